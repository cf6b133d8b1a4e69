# %% [markdown]
# # Stacking attention without a nonlinearity (seed 001, the lecture notes' argument for the MLP).
#
# Two self-attention layers with no elementwise nonlinearity between them: layer 2 mixes, with its
# weights A2, the value vectors of layer 1's output, which are themselves mixtures. Write the second
# layer's output Y2 in terms of X, A1, A2 and the value maps (the row-vector convention of code:
# X @ W), and regroup the products: it is one attention layer with one mixing matrix alpha* and one
# value map Wv*. So depth without a nonlinearity adds no new kind of function; that is why a
# transformer applies an MLP to every position after each attention layer.

# %%
import numpy as np

import minitensor as mt

from demos._common import Checks, plt, save


def self_attention(X, W_q, W_k, W_v):
    """One head: returns (weights A, output A X W_v)."""
    scores = (X @ W_q) @ (X @ W_k).T / np.sqrt(W_q.shape[1])
    A = scores.softmax(axis=-1)
    return A, A @ (X @ W_v)


def collapse(A1, A2, W_v1, W_v2):
    """The one layer that two stacked layers without a nonlinearity amount to: (alpha*, Wv*) with
    Y2 = alpha* X Wv*, from layer 1's and layer 2's weights A1, A2 and value maps W_v1, W_v2."""
    # BEGIN SOLUTION demo_stacking
    A_star = A2 @ A1  # (T, T)
    W_star = W_v1 @ W_v2
    return A_star, W_star
    # END SOLUTION


# %%
checks = Checks()
rng = np.random.default_rng(0)
T, d = 7, 8
X = mt.tensor(rng.standard_normal((T, d)))
layer1 = [mt.tensor(rng.standard_normal((d, d)) / np.sqrt(d)) for _ in range(3)]
layer2 = [mt.tensor(rng.standard_normal((d, d)) / np.sqrt(d)) for _ in range(3)]

A1, H = self_attention(X, *layer1)  # layer 1
A2, Y2 = self_attention(H, *layer2)  # layer 2 reads layer 1's output
A_star, W_star = collapse(A1, A2, layer1[2], layer2[2])
one_layer = A_star @ (X @ W_star)
checks("two stacked attention layers equal one layer with weights alpha* and value map Wv*", np.allclose(Y2.data, one_layer.data))
checks("alpha* is still a row-stochastic mixing matrix", np.allclose(A_star.data.sum(axis=1), 1) and np.all(A_star.data >= 0))
print("so without a nonlinearity, depth adds no new kind of function: the MLP after each attention layer supplies it")

fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), layout="constrained")
for ax, (matrix, title) in zip(axes, [(A1.data, "alpha(1)"), (A2.data, "alpha(2)"), (A_star.data, "alpha*: the one layer's weights")]):
    image = ax.imshow(matrix, cmap="viridis", vmin=0)
    ax.set(title=title, xlabel="key", ylabel="query")
    fig.colorbar(image, ax=ax, fraction=0.046)
fig.suptitle("two attention layers without a nonlinearity collapse into one mixing matrix")
save(fig, "stacking")
