# %% [markdown]
# # Exact attention with less memory, and linear attention (seed 000, "Efficient attention").
#
# Tiled attention visits the keys in blocks and keeps, for every query, just enough to finish the
# softmax at the end (the homework task tiled_attention): the exact result, holding T x tile
# scores (16,384) instead of T x T (65,536). Causal linear attention's recurrence with a d x d state
# equals its parallel form. The figure: time and peak memory against T for the materialised
# kernel, the tiled NumPy reference and the fused Numba kernel (which takes a block of 128
# queries against all their keys up to 2,048 keys, and tiles beyond).

# %%
import math
import subprocess
import sys

import numpy as np

import minitensor as mt
from minitensor.backends import numba_backend
from minitensor.testing import op_forward

from demos._attention_memory import KERNELS
from demos._common import QUICK, Checks, plt, save


def tiled_attention(q, k, v, tile):
    """The seed's loop, in minitensor: the online softmax over blocks of keys (q, k, v of
    shape (T, d); the homework task tiled_attention, as in ops/attention.py: Attention)."""
    # BEGIN SOLUTION tiled_attention
    # A running maximum m, normaliser l and weighted sum acc per query; a larger maximum
    # rescales what was accumulated so far.
    T, d = q.shape
    m = mt.full((T, 1), -np.inf, dtype=np.float64)
    l = mt.zeros(T, 1, dtype=np.float64)
    acc = mt.zeros(T, d, dtype=np.float64)
    for j in range(0, T, tile):
        s = q @ k[j : j + tile].T / math.sqrt(d)  # scores for this block of keys only
        m_new = mt.maximum(m, s.max(axis=-1, keepdims=True))
        rescale = (m - m_new).exp()  # correct what was accumulated so far
        p = (s - m_new).exp()
        l = l * rescale + p.sum(axis=-1, keepdims=True)
        acc = acc * rescale + p @ v[j : j + tile]
        m = m_new
    return acc / l
    # END SOLUTION


def measure_in_fresh_process(method, T):
    code = f"from demos._attention_memory import measure; print(*measure({method!r}, {T}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    seconds, memory = map(float, out.split())
    return seconds, memory


# %%
checks = Checks()
rng = np.random.default_rng(0)
T, d, tile = 256, 32, 64
q, k, v = (mt.tensor(rng.standard_normal((T, d))) for _ in range(3))
full = (q @ k.T / math.sqrt(d)).softmax(axis=-1) @ v  # materialises all T x T scores
checks("tiled attention equals full attention", np.allclose(tiled_attention(q, k, v, tile).data, full.data))
print("scores held at once:", T * tile, "instead of", T * T)
numba_kernel = None if getattr(numba_backend.attention, "stripped_task", None) else numba_backend.attention
if numba_kernel is None:  # a student copy: the kernel is part of the task tiled_attention
    print("(Numba's attention kernel is part of a homework task in this copy: the op's own code is compared alone)")
checks("the attention op's own code and Numba's kernel equal full attention too",
       np.allclose(op_forward(mt.ops.Attention, q.data, k.data, v.data)[0], full.data)
       and (numba_kernel is None or np.allclose(numba_kernel(q.data, k.data, v.data)[0], full.data)))

# %% [markdown]
# Causal linear attention: parallel form and recurrence

# %%
def phi(z):  # elu(z) + 1, a positive feature map
    return np.where(z > 0, z + 1, np.exp(np.minimum(z, 0)))

Qf, Kf, V = phi(q.data), phi(k.data), v.data
W = np.tril(Qf @ Kf.T)  # parallel form: T x T weights, masked
parallel = (W @ V) / W.sum(axis=-1, keepdims=True)
S, z, outs = np.zeros((d, d)), np.zeros(d), []
for t in range(T):  # recurrent form: constant memory per step
    S, z = S + np.outer(Kf[t], V[t]), z + Kf[t]
    outs.append(Qf[t] @ S / (Qf[t] @ z))
checks("linear attention, recurrence equals parallel form", np.allclose(np.stack(outs), parallel))

# %% [markdown]
# Time and memory against T, each measurement in a fresh process

# %%
lengths = [256, 512, 1024] if QUICK else [256, 512, 1024, 2048, 4096]
methods = list(KERNELS)
table = {m: [measure_in_fresh_process(m, n) for n in lengths] for m in methods}
print(f"{'T':>6}" + "".join(f"{m:>28}" for m in methods))
for i, n in enumerate(lengths):
    print(f"{n:>6}" + "".join(f"{table[m][i][0] * 1e3:>14.1f} ms {table[m][i][1]:>7.0f} MB" for m in methods))
longest = len(lengths) - 1
checks("at the longest T the fused numba kernel needs under a tenth of the materialised memory",
       table["fused (numba)"][longest][1] < table["materialised (numpy)"][longest][1] / 10)

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
for m in methods:
    left.plot(lengths, [t * 1e3 for t, _ in table[m]], "o-", label=m)
    right.plot(lengths, [max(mb, 0.5) for _, mb in table[m]], "o-", label=m)
left.set(xscale="log", yscale="log", xlabel="T", ylabel="ms", title="causal attention forward, 8 heads of 64")
right.set(xscale="log", yscale="log", xlabel="T", ylabel="peak extra MB", title="peak memory")
for ax in (left, right):
    ax.minorticks_off()
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.legend(fontsize=8)
save(fig, "efficient_attention")
