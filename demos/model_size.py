# %% [markdown]
# # A complete model and its size (seed 000, "A complete model and its size").
#
# GPT-2 small's shape: 12 blocks of width 768 with 12 heads, 50,257 tokens, 1,024 positions,
# learned positions, the output layer tied to the token embedding. The seed prints 124,439,808
# parameters = L(12 d^2 + 13 d) + (V + C + 2) d, 68% in the blocks, logits (1, 8, 50257); a
# forward pass costs about 2N operations per token and training about 6N.

# %%
import numpy as np

import minitensor as mt
from minitensor import backends
from models.transformer import GPT

from demos._common import Checks, plt, save


class CountMatmulFlops:
    """Count 2 m n k operations for every matrix product the backend computes (a, b -> a @ b)."""

    def __enter__(self):
        self.flops = 0
        self.backend = backends.active()
        self.original = self.backend.matmul

        def counting(a, b):
            out = self.original(a, b)
            self.flops += 2 * out.size * a.shape[-1]
            return out

        self.backend.matmul = counting
        return self

    def __exit__(self, *exc_info):
        self.backend.matmul = self.original


# %%
checks = Checks()
mt.manual_seed(0)
V, C, d, L = 50257, 1024, 768, 12
model = GPT(V, C, d, heads=12, layers=L)
n = model.num_parameters()
formula = L * (12 * d * d + 13 * d) + (V + C + 2) * d
print(f"parameters: {n:,}")
print(f"formula L(12 d^2 + 13 d) + (V + C + 2) d: {formula:,}")
T = 8
with mt.no_grad(), CountMatmulFlops() as counter:
    logits = model(np.random.default_rng(0).integers(0, V, size=(1, T)))
print("in the blocks:", f"{L * (12 * d * d + 13 * d) / n:.0%}", "; logits shape:", logits.shape)
checks("parameters: 124,439,808", n == 124_439_808)
checks("equal to the formula", n == formula)
checks("68% of them in the blocks", round(L * (12 * d * d + 13 * d) / n, 2) == 0.68)
checks("logits shape (1, 8, 50257)", logits.shape == (1, 8, 50257))

# %% [markdown]
# Operations per token: 2N for N non-embedding weights (+ the output layer, + attention)

# %%
N = L * 12 * d * d  # the seed's N: the non-embedding weights, those the blocks' matrix products use
per_token = counter.flops / T
blocks, output_layer = 2 * N, 2 * d * V
print(f"N = 12 L d^2 = {N / 1e6:.1f} M non-embedding weights (the seed's N throughout)")
print(f"counted matrix-product operations per token: {per_token / 1e6:.1f} M = 2N ({blocks / 1e6:.1f} M, the blocks) "
      f"+ 2dV ({output_layer / 1e6:.1f} M, the output layer, tied to the token embedding)")
print(f"(the fused attention kernel adds about 2LTd = {2 * L * T * d / 1e6:.2f} M per token with a causal mask over T = {T})")
print(f"training costs about 3x the forward pass: 6N = {6 * N / 1e6:.0f} M per token for the blocks, "
      f"{3 * per_token / 1e6:.0f} M with the output layer")
checks("a forward pass costs 2N per token in the blocks (+ 2dV in the output layer)", per_token == blocks + output_layer)

# %% [markdown]
# Where the parameters are

# %%
parts = {  # counted from the model's modules (counting attention's by hand is demos/multihead.py's task)
    "token embedding (tied with the output)": model.tok.num_parameters(),
    "position embedding": model.pos.num_parameters(),
    "attention (W_Q, W_K, W_V, W_O and their biases)": sum(b.attn.num_parameters() for b in model.blocks),
    "MLP": sum(b.mlp.num_parameters() for b in model.blocks),
    "layer norms": sum(b.ln1.num_parameters() + b.ln2.num_parameters() for b in model.blocks) + model.ln.num_parameters(),
}
checks("the parts add up", sum(parts.values()) == n)
fig, ax = plt.subplots(figsize=(9, 3.2), layout="constrained")
left = 0
for (label, count), color in zip(parts.items(), plt.cm.tab10.colors):
    ax.barh(0, count, left=left, color=color, label=f"{label}: {count / 1e6:.1f} M ({count / n:.0%})")
    left += count
ax.set(yticks=[], xlabel="parameters", title=f"GPT-2 small: {n:,} parameters")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=2, fontsize=8)
save(fig, "model_size")
