# %% [markdown]
# # Training instabilities and their remedies (seed 000, "Training transformers"; Wortsman et al., 2023, who reproduced both in small models at high learning rates).
#
# A small GPT (2 layers, width 64) trained with AdamW at a high learning rate (1e-2) on a
# synthetic language (a random Markov chain). Without QK-norm the largest attention logit grows
# between ten- and twentyfold in 400 steps (the run prints its own factor and checks 10x to 40x);
# normalising queries and keys (QK-norm) keeps it near 10. The
# output log-normaliser log Z drifts upward as the model grows confident; a z-loss
# c (log Z)^2 holds it near 0. Wortsman et al. use c = 1e-4 over long runs; over our 400 steps
# that does nothing visible (log Z 5.79 against 5.82), so we show c = 1e-2.
# (At lr 3e-2 and 1e-1 the attention logits grow into the thousands, but the model does not
# learn at all, and log Z stays at log 64.)

# %%
import numpy as np
from tqdm import tqdm

import minitensor as mt
from models.attention import split_heads
from models.transformer import GPT

from demos._common import QUICK, Checks, plt, save

VOCAB, CONTEXT, D, HEADS, LAYERS = 64, 32, 64, 4, 2


def markov_batches(batch, rng, transition):
    tokens = np.empty((batch, CONTEXT + 1), dtype=np.int64)
    tokens[:, 0] = rng.integers(0, VOCAB, size=batch)
    for t in range(1, CONTEXT + 1):
        cumulative = transition[tokens[:, t - 1]].cumsum(axis=1)
        tokens[:, t] = (rng.random((batch, 1)) < cumulative).argmax(axis=1)
    return tokens[:, :-1], tokens[:, 1:]


def largest_attention_logit(model, idx):
    """max |q . k| / sqrt(d_head) over every block, head and pair of positions."""
    with mt.no_grad():
        h = model.tok(idx) + model.pos(np.arange(idx.shape[1]))
        largest = 0.0
        for block in model.blocks:
            attn = block.attn
            a = block.ln1(h)
            q, k = split_heads(attn.w_q(a), attn.heads), split_heads(attn.w_k(a), attn.kv_heads)
            if attn.qk_norm:
                q, k = attn.q_norm(q), attn.k_norm(k)
            logits = (q @ k.swapaxes(-1, -2)).data / np.sqrt(attn.d_head)
            largest = max(largest, float(np.abs(logits).max()))
            h = block(h, is_causal=True)
    return largest


def train(qk_norm, z_loss, steps, lr, transition, probe):
    mt.manual_seed(0)
    rng = np.random.default_rng(0)
    model = GPT(VOCAB, CONTEXT, D, HEADS, LAYERS)
    for table in (model.tok.weight, model.pos.weight):  # GPT-2's initialisation, not nn.Embedding's N(0, 1)
        mt.nn.init.normal_(table, std=0.02)
    if qk_norm:  # swap in QK-normalised attention (same initial projections)
        from models.layernorm import LayerNorm

        for block in model.blocks:
            block.attn.qk_norm = True
            block.attn.q_norm, block.attn.k_norm = LayerNorm(block.attn.d_head), LayerNorm(block.attn.d_head)
    opt = mt.optim.AdamW(mt.optim.decay_groups(model, 0.0), lr=lr)
    history = []
    label = f"instabilities: qk_norm={qk_norm}, z_loss={z_loss}"
    for step in tqdm(range(steps), desc=label, leave=False, mininterval=1.0):
        x, y = markov_batches(16, rng, transition)
        logits = model(x)  # (B, T, V)
        flat = logits.reshape(-1, VOCAB)
        log_z = flat[:, 0] - flat.log_softmax(axis=-1)[:, 0]  # log sum exp of each row's logits
        loss = mt.F.cross_entropy(flat, y.reshape(-1))
        if z_loss:
            loss = loss + z_loss * (log_z * log_z).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            history.append((step, largest_attention_logit(model, probe), float(log_z.data.mean()), loss.item()))
    return np.array(history)


# %%
checks = Checks()
rng = np.random.default_rng(1)
transition = rng.dirichlet(np.full(VOCAB, 0.1), size=VOCAB)  # a peaked next-token distribution
probe, _ = markov_batches(8, np.random.default_rng(2), transition)
steps, lr = (30, 1e-2) if QUICK else (400, 1e-2)
runs = {
    "baseline": train(False, 0.0, steps, lr, transition, probe),
    "QK-norm": train(True, 0.0, steps, lr, transition, probe),
    "z-loss 1e-2": train(False, 1e-2, steps, lr, transition, probe),
}
for name, h in runs.items():
    print(f"{name:12}: largest attention logit {h[0, 1]:6.1f} -> {h[-1, 1]:6.1f}; mean log Z {h[0, 2]:6.2f} -> {h[-1, 2]:6.2f}; loss {h[-1, 3]:.3f}")
base, qk, z = runs["baseline"], runs["QK-norm"], runs["z-loss 1e-2"]
growth = base[-1, 1] / base[0, 1]
print(f"without QK-norm the largest attention logit grew {growth:.1f}x in {steps} steps; "
      f"with QK-norm its largest value was {qk[:, 1].max():.1f}")
if not QUICK:
    checks("without QK-norm the largest attention logit grows between 10x and 40x", 10 < growth < 40)
    checks("with QK-norm it stays bounded (well below the baseline's)", qk[:, 1].max() < base[-1, 1] / 2)
    checks("z-loss keeps log Z nearer 0 than without it", abs(z[-1, 2]) < abs(base[-1, 2]) / 2)
else:
    checks("training runs and every tracked value is finite", all(np.isfinite(h).all() for h in runs.values()))

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
left.plot(base[:, 0], base[:, 1], label="no QK-norm")
left.plot(qk[:, 0], qk[:, 1], label="QK-norm")
left.set(xlabel="step", ylabel="largest |q . k| / sqrt(d_head)", title=f"attention logits at learning rate {lr:g}")
left.legend()
right.plot(base[:, 0], base[:, 2], label="no z-loss")
right.plot(z[:, 0], z[:, 2], label="z-loss 1e-2 (log Z)^2")
right.axhline(0, color="gray", lw=0.8)
right.set(xlabel="step", ylabel="mean log Z of the output softmax", title="output log-normaliser")
right.legend()
save(fig, "instabilities")
