# %% [markdown]
# # Pre-norm against post-norm at initialisation (seed 001, "Add & Norm"; Xiong et al., 2020).
#
# A 12-layer stack of blocks, once with pre-normalisation (x + f(LN(x))) and once with
# post-normalisation (LN(x + f(x))), the same weights. We backpropagate one loss and compare the
# gradient norm of every layer's parameters. Xiong et al. show post-norm's gradients largest near
# the output, so a learning rate that suits the other layers is too large there: that is why the
# original transformer needed a warmup; pre-norm's stay of one size across layers.
# What we measure (12 layers, d = 64, mean of 5 seeds): post-norm's gradients are flat through
# layer 11 and jump at the output layer, about 2x its first layer's; pre-norm's decrease gently
# (about 0.6x from first to last) and are 5-7x larger than post-norm's in the lower layers.

# %%
import numpy as np

import minitensor as mt
from models.transformer import Block

from demos._common import QUICK, Checks, plt, save

LAYERS, D, HEADS, T, BATCH = 12, 64, 4, 32, 8


def gradient_norms(pre_norm, x, target, seed):
    mt.manual_seed(seed)
    blocks = [Block(D, HEADS, pre_norm=pre_norm) for _ in range(LAYERS)]
    h = x
    for block in blocks:
        h = block(h, is_causal=True)
    loss = ((h - target) ** 2).mean()
    loss.backward()
    return np.array([np.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2)) for p in block.parameters())) for block in blocks])


# %%
checks = Checks()
rng = np.random.default_rng(0)
x = mt.tensor(rng.standard_normal((BATCH, T, D)).astype(np.float32))
target = mt.tensor(rng.standard_normal((BATCH, T, D)).astype(np.float32))
seeds = range(1 if QUICK else 5)
pre = np.mean([gradient_norms(True, x, target, s) for s in seeds], axis=0)
post = np.mean([gradient_norms(False, x, target, s) for s in seeds], axis=0)
print("layer:          " + " ".join(f"{i + 1:6d}" for i in range(LAYERS)))
print("pre-norm grad:  " + " ".join(f"{g:6.3f}" for g in pre))
print("post-norm grad: " + " ".join(f"{g:6.3f}" for g in post))
pre_ratio, post_ratio = pre[-1] / pre[0], post[-1] / post[0]
print(f"last layer / first layer: pre-norm {pre_ratio:.2f}, post-norm {post_ratio:.2f}")
checks("post-norm's gradient is largest at the output layer", np.argmax(post) == LAYERS - 1)
checks("relative to the first layer, post-norm's output layer gets more gradient than pre-norm's", post_ratio > pre_ratio)
checks("pre-norm's gradients are of one size across layers (within 3x)", 1 / 3 < pre_ratio < 3)

fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
layers = np.arange(1, LAYERS + 1)
ax.plot(layers, pre, "o-", label="pre-norm: x + f(LN(x))")
ax.plot(layers, post, "s-", label="post-norm: LN(x + f(x))")
ax.set(yscale="log", xlabel="layer", ylabel="gradient norm of the layer's parameters", title=f"at initialisation, {LAYERS} layers (mean over {len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
ax.set_xticks(layers)
ax.legend()
save(fig, "pre_vs_post_norm")
