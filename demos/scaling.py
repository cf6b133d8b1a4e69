# %% [markdown]
# # Why scaled dot-product attention divides by sqrt(d_k) (seed 000, "Scaled dot-product attention", the table printed under its code).
#
# 200 queries with N(0, 1) coordinates each meet 100 keys. Unscaled, the score variance is d_k,
# the largest softmax weight approaches 1 as d_k grows and the softmax Jacobian that carries
# gradients back to the scores shrinks; scaled by 1/sqrt(d_k), none of them depends on d_k.

# %%
import numpy as np

import minitensor as mt

from demos._common import Checks, plt, save

WIDTHS = (16, 64, 256, 1024)
SEED_TABLE = {  # d_k: (variance unscaled, scaled, largest weight unscaled, scaled, Jacobian norm unscaled, scaled)
    16: (16.0, 1.00, 0.56, 0.08, 0.28, 0.15),
    64: (65.1, 1.02, 0.76, 0.08, 0.23, 0.15),
    256: (257.0, 1.00, 0.89, 0.08, 0.14, 0.15),
    1024: (1019.6, 1.00, 0.95, 0.08, 0.06, 0.15),
}


def jacobian_norm(p):
    """Frobenius norm of the softmax Jacobian of each row of p (one row per query), averaged over queries."""
    # BEGIN SOLUTION demo_scaling
    J = p[:, :, None] * np.eye(p.shape[1]) - p[:, :, None] * p[:, None, :]
    return np.linalg.norm(J, axis=(1, 2)).mean()
    # END SOLUTION


def score_statistics(s, d):
    """For dot-product scores s (queries, keys) of width d: (variance of the scores, the same scaled
    by 1/sqrt(d), the largest softmax weight averaged over queries unscaled and scaled, the
    softmax Jacobian norm unscaled and scaled), softmax along the keys."""
    # BEGIN SOLUTION demo_scaling
    p_raw, p_scaled = s.softmax(axis=-1).data, (s / np.sqrt(d)).softmax(axis=-1).data
    return (s.data.var(), (s.data / np.sqrt(d)).var(), p_raw.max(-1).mean(), p_scaled.max(-1).mean(),
            jacobian_norm(p_raw), jacobian_norm(p_scaled))
    # END SOLUTION


# %%
checks = Checks()
rng = np.random.default_rng(0)
rows = {}
print("unscaled -> scaled by 1/sqrt(d_k), for 100 keys per query")
for d in WIDTHS:
    q = mt.tensor(rng.standard_normal((200, 1, d)))
    k = mt.tensor(rng.standard_normal((200, 100, d)))
    s = (q * k).sum(axis=-1)  # (200, 100) dot products
    row = score_statistics(s, d)
    rows[d] = row
    seed = SEED_TABLE[d]
    print(f"d_k = {d:4d}: variance of scores {row[0]:6.1f} -> {row[1]:.2f}; largest weight {row[2]:.2f} -> {row[3]:.2f};"
          f" Jacobian norm {row[4]:.2f} -> {row[5]:.2f}   (seed: {seed[0]:.1f} -> {seed[1]:.2f}; {seed[2]:.2f} -> {seed[3]:.2f}; {seed[4]:.2f} -> {seed[5]:.2f})")
for d in WIDTHS:
    ours, seed = rows[d], SEED_TABLE[d]
    # sampling noise: 20,000 scores per width; the largest weight and Jacobian norm average 200 queries
    checks(f"d_k = {d}: the seed's numbers within sampling noise",
           abs(ours[0] / d - 1) < 0.05 and abs(ours[1] - 1) < 0.05
           and all(abs(a - b) < 0.03 for a, b in zip(ours[2:], seed[2:])))
checks("unscaled, the largest weight grows with d_k", all(rows[a][2] < rows[b][2] for a, b in zip(WIDTHS, WIDTHS[1:])))
checks("unscaled, the Jacobian norm shrinks with d_k", all(rows[a][4] > rows[b][4] for a, b in zip(WIDTHS, WIDTHS[1:])))

fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
titles = ("variance of scores", "largest weight", "softmax Jacobian norm")
for i, (ax, title) in enumerate(zip(axes, titles)):
    ax.plot(WIDTHS, [rows[d][2 * i] for d in WIDTHS], "o-", label="unscaled")
    ax.plot(WIDTHS, [rows[d][2 * i + 1] for d in WIDTHS], "s-", label="scaled by 1/sqrt(d_k)")
    ax.set(xscale="log", xlabel="d_k", title=title)
    if i == 0:
        ax.set_yscale("log")
    ax.set_xticks(WIDTHS, [str(d) for d in WIDTHS])
    ax.legend(fontsize=8)
save(fig, "scaling")
