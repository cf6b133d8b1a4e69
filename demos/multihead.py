# %% [markdown]
# # Multi-head self-attention written out, and the seed's checks (seed 000, "Multiple heads").
#
# The seed writes multi-head attention with the weights of nn.MultiheadAttention and prints:
# it matches nn.MultiheadAttention (checked when PyTorch is installed), permuting the tokens
# permutes the outputs, with a causal mask outputs 0-2 ignore tokens 3-4, and the module has
# 1,088 parameters for d = 16: count them by hand, as a function of d.

# %%
import numpy as np

import minitensor as mt
from models.attention import MultiHeadAttention, causal_mask

from demos._common import Checks, plt, save


def count_by_hand(d):
    """The number of weights and biases of nn.MultiheadAttention(d, heads), as a function of d."""
    # BEGIN SOLUTION demo_multihead
    return 4 * d * d + 4 * d  # W_Q, W_K, W_V and W_O (d x d each), and their four biases
    # END SOLUTION


# %%
checks = Checks()
B, T, d, h = 2, 5, 16, 4
rng = np.random.default_rng(0)
x = rng.standard_normal((B, T, d))
mt.manual_seed(0)
try:
    import torch

    torch.manual_seed(0)
    torch_mha = torch.nn.MultiheadAttention(d, h, batch_first=True).double()
    mha = MultiHeadAttention.from_torch(torch_mha)
except ImportError:
    torch = None
    mha = MultiHeadAttention(d, h)
    mha.to(np.float64)

def self_attention(x, mask=None, need_weights=False):
    return mha(mt.tensor(x), mask=mask, need_weights=need_weights)

ours = self_attention(x).data
if torch is not None:
    theirs, _ = torch_mha(*(torch.from_numpy(x),) * 3)
    checks("matches nn.MultiheadAttention", np.allclose(ours, theirs.detach().numpy(), atol=1e-6))
else:
    checks.skip("matches nn.MultiheadAttention", "PyTorch is not installed")

perm = rng.permutation(T)
checks("permuting the tokens permutes the outputs", np.allclose(self_attention(x[:, perm]).data, ours[:, perm], atol=1e-6))

causal = causal_mask(T)
x2 = x.copy()
x2[:, 3:] = rng.standard_normal((B, T - 3, d))  # change the last two tokens
same = np.allclose(self_attention(x, causal).data[:, :3], self_attention(x2, causal).data[:, :3], atol=1e-6)
checks("with a causal mask, outputs 0-2 ignore tokens 3-4", same)
n = mha.num_parameters()
by_hand = count_by_hand(d)
print(f"parameters: {n}; counted by hand: {by_hand}")
checks("1,088 parameters, as the count by hand says", n == 1088 == by_hand)

# %% [markdown]
# Each head's causal attention pattern for the first sequence

# %%
_, weights = self_attention(x, causal, need_weights=True)  # (B, h, T, T)
fig, axes = plt.subplots(1, h, figsize=(13, 3.4))
for head, ax in enumerate(axes):
    image = ax.imshow(weights.data[0, head], cmap="viridis", vmin=0, vmax=1)
    ax.set(title=f"head {head + 1}", xlabel="key", ylabel="query" if head == 0 else "")
fig.colorbar(image, ax=axes, fraction=0.02, label="attention weight (each row sums to 1)")
fig.suptitle(f"each head's causal attention weights on one sequence, with random (untrained) projections: "
             f"{h} heads, {h} patterns, some alike", y=1.02)
save(fig, "multihead")
