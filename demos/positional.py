# %% [markdown]
# # Position information (seed 000, "Positions" and "Attention, recurrence, and convolution").
#
# The sinusoidal figure: the sine coordinates of 128 positions at d = 64, and the normalised dot
# product of two encodings against their offset. RoPE's three checks from the seed's code. ALiBi's
# per-head distance penalties and T5's buckets of offsets.

# %%
import numpy as np

import minitensor as mt
from models.positional import alibi_bias, alibi_slopes, rope, sinusoidal, t5_bucket

from demos._common import Checks, plt, save


# %%
checks = Checks()
# %% [markdown]
# Sinusoidal encodings

# %%
table = sinusoidal(128, 64).data.astype(np.float64)  # (128, 64)
unit = table / np.linalg.norm(table, axis=1, keepdims=True)
offsets = np.arange(-60, 61)
anchor = 64
similarity = unit[anchor + offsets] @ unit[anchor]
checks("an encoding is most similar to itself (offset 0)", offsets[np.argmax(similarity)] == 0)
checks("the similarity depends on the offset, not the position",
       np.allclose(unit[10 + offsets[offsets >= -10]] @ unit[10], similarity[offsets >= -10]))

# %% [markdown]
# RoPE: the seed's three checks

# %%
rng = np.random.default_rng(0)
d, T = 64, 50
q, k = rng.standard_normal(d), rng.standard_normal(d)
Q, K = rope(mt.tensor(np.tile(q, (T, 1)))).data, rope(mt.tensor(np.tile(k, (T, 1)))).data
S = Q @ K.T  # S[m, n]: query at position m, key at position n
constant = all(np.allclose(np.diagonal(S, o), np.diagonal(S, o)[0]) for o in range(1 - T, T))
checks("score depends only on the offset n - m", constant)
checks("rotation leaves norms unchanged", np.allclose(np.linalg.norm(Q, axis=1), np.linalg.norm(q)))
checks("at offset 0 the score is the unrotated q . k", np.isclose(S[0, 0], q @ k))

# %% [markdown]
# ALiBi and T5

# %%
slopes = alibi_slopes(8)
print("ALiBi slopes for 8 heads:", ", ".join(f"1/{int(round(1 / m))}" for m in slopes))
checks("ALiBi's slopes are 2^-1 ... 2^-8 for 8 heads", np.allclose(slopes, 2.0 ** -np.arange(1, 9)))
rel = np.arange(-128, 129)
buckets = t5_bucket(rel, bidirectional=True, num_buckets=32, max_distance=128)
print("T5 buckets for offsets -1, -8, -16, -64, -128, +1, +128:", [int(t5_bucket(o)) for o in (-1, -8, -16, -64, -128, 1, 128)])
checks("T5: small offsets get their own bucket, far ones share logarithmic buckets",
       len(set(buckets[(rel >= -7) & (rel <= 0)])) == 8 and len(set(buckets[rel <= -64])) <= 3)

# %% [markdown]
# The figure

# %%
fig, axes = plt.subplots(2, 2, figsize=(12, 8), layout="constrained")
image = axes[0, 0].imshow(table[:, 0::2].T, aspect="auto", cmap="RdBu", origin="lower")
axes[0, 0].set(title="sinusoidal encoding: sine coordinates (d = 64)", xlabel="position", ylabel="frequency index j")
fig.colorbar(image, ax=axes[0, 0])
axes[0, 1].plot(offsets, similarity)
axes[0, 1].set(title="normalised dot product of PE(t) and PE(t + offset)", xlabel="offset", ylabel="cosine similarity")
bias = alibi_bias(8, 16)
for head in (0, 3, 7):
    axes[1, 0].plot(np.arange(16), bias[head, 15], "o-", ms=3, label=f"head {head + 1}: slope 1/{int(round(1 / slopes[head]))}")
axes[1, 0].set(title="ALiBi: penalty added to the score of query 15 for key j", xlabel="key position j", ylabel="bias")
axes[1, 0].legend(fontsize=8)
axes[1, 1].plot(rel, buckets, drawstyle="steps-mid")
axes[1, 1].set(title="T5: bucket of each offset (32 buckets, max distance 128)", xlabel="offset j - i", ylabel="bucket")
save(fig, "positional")
