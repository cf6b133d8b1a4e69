# %% [markdown]
# # Causal self-attention on six tokens (seed 000, "Self-attention", its four-panel figure).
#
# X is (6, 8); W_Q, W_K, W_V are random (8, 4). The score matrix compares every query with every
# key; the causal mask removes the future, so the first token can only attend to itself; each row
# of A is a distribution over the visible tokens; each output row is the matching mixture of
# value rows.

# %%
import numpy as np

import minitensor as mt
from models.attention import causal_mask, scaled_dot_product_attention

from demos._common import Checks, plt, save


def causal_self_attention(Q, K, V):
    """The seed's four panels for queries Q, keys K, values V (T, d_k): (scores, hidden, A, Y) with
    hidden the causal mask (True: a key the query may not see), A the weights, Y the outputs."""
    # BEGIN SOLUTION demo_causal_self_attention
    T, d_k = Q.shape
    scores = Q @ K.T / np.sqrt(d_k)  # (T, T)
    hidden = causal_mask(T)  # True above the diagonal: the future
    A = scores.softmax(axis=-1, mask=hidden)  # rows sum to 1 over visible tokens
    Y = A @ V  # (T, d_k)
    return scores, hidden, A, Y
    # END SOLUTION


# %%
checks = Checks()
rng = np.random.default_rng(0)
T, d, d_k = 6, 8, 4
# %% [markdown]
# Tokens and random projections

# %%
X = mt.tensor(rng.standard_normal((T, d)))
W_Q, W_K, W_V = (mt.tensor(rng.standard_normal((d, d_k)) / np.sqrt(d)) for _ in range(3))
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (6, 4) each

# %% [markdown]
# Scores, mask, weights, outputs

# %%
scores, hidden, A, Y = causal_self_attention(Q, K, V)  # (6, 6), (6, 6), (6, 6), (6, 4)
M = np.where(hidden, -np.inf, 0.0)

checks("each row of A sums to 1", np.allclose(A.data.sum(axis=1), 1))
checks("the first token attends only to itself", A.data[0, 0] == 1.0)
checks("weights above the diagonal are exactly 0", np.all(A.data[hidden] == 0))
checks("each output is the A-weighted mixture of value rows", np.allclose(Y.data[3], A.data[3] @ V.data))
fused = scaled_dot_product_attention(Q, K, V, is_causal=True)
checks("the fused, tiled kernel gives the same outputs", np.allclose(fused.data, Y.data))

# %% [markdown]
# The four panels

# %%
fig, axes = plt.subplots(1, 4, figsize=(16, 4), layout="constrained", gridspec_kw={"width_ratios": [1, 1, 1, 0.75]})
panels = [
    (scores.data, "scores  Q K^T / sqrt(d_k)", "coolwarm"),
    (np.where(hidden, np.nan, M), "mask M  (grey: -inf, hidden; white: 0)", "Greys"),
    (A.data, "weights A = softmax(scores + M)", "viridis"),
    (Y.data, "outputs Y = A V", "coolwarm"),
]
for ax, (matrix, title, cmap) in zip(axes, panels):
    image = ax.imshow(matrix, cmap=cmap)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("query (token)" if ax is axes[0] else "")
    ax.set_xlabel("output coordinate" if ax is axes[3] else "key (token)")
    ax.set_yticks(range(T))
    if ax is not axes[1]:  # the mask has two values, written in its cells
        fig.colorbar(image, ax=ax, fraction=0.046)
for i in range(T):
    for j in range(T):
        if not hidden[i, j]:
            axes[2].text(j, i, f"{A.data[i, j]:.2f}", ha="center", va="center", fontsize=7, color="w")
axes[1].imshow(np.where(hidden, 1.0, 0.0), cmap="Greys", vmin=0, vmax=1.5)
for i in range(T):
    for j in range(T):
        axes[1].text(j, i, "-inf" if hidden[i, j] else "0", ha="center", va="center", fontsize=7)
save(fig, "causal_self_attention")
