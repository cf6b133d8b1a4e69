"""Exact attention with less memory, and linear attention (seed 000, "Efficient attention").

Tiled attention visits the keys in blocks and keeps, for every query, a running maximum, a
running normaliser and a running weighted sum: the exact result, holding T x tile scores
(16,384) instead of T x T (65,536). Causal linear attention's recurrence with a d x d state
equals its parallel form. The figure: time and peak memory against T for the materialised and
the tiled kernels on each CPU backend.
"""

# %%
import math
import subprocess
import sys
import time

import numpy as np

import minitensor as mt
from minitensor.backends import numba_backend, numpy_backend

from ._common import Checks, plt, result, save


def tiled_attention(q, k, v, tile):
    """The seed's loop, in minitensor: the online softmax over blocks of keys."""
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


def materialised(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., T, T): every score at once
    causal = np.triu(np.ones(scores.shape[-2:], dtype=bool), k=1)
    return numpy_backend.softmax(scores, -1, causal) @ v


def measure(method, T, repeats=2):
    """Seconds and peak extra MB of one causal forward at length T, 8 heads of 64, float32."""
    from benchmarks.common import peak_memory_mb

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((8, T, 64)).astype(np.float32) for _ in range(3))
    kernel = {
        "materialised (numpy)": materialised,
        "tiled (numpy reference)": lambda q, k, v: numpy_backend.attention(q, k, v, None, None, True),
        "tiled (numba)": lambda q, k, v: numba_backend.attention(q, k, v, None, None, True),
    }[method]
    kernel(q[:, :64], k[:, :64], v[:, :64])  # load the compiled kernels, on a small input
    memory = peak_memory_mb(lambda: kernel(q, k, v))  # the first run at this size: nothing reused

    def run():
        return kernel(q, k, v)

    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - start) / repeats, memory


def measure_in_fresh_process(method, T):
    code = f"from demos.efficient_attention import measure; print(*measure({method!r}, {T}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    seconds, memory = map(float, out.split())
    return seconds, memory


def main(quick=False):
    checks = Checks()
    rng = np.random.default_rng(0)
    T, d, tile = 256, 32, 64
    q, k, v = (mt.tensor(rng.standard_normal((T, d))) for _ in range(3))
    full = (q @ k.T / math.sqrt(d)).softmax(axis=-1) @ v  # materialises all T x T scores
    checks("tiled attention equals full attention", np.allclose(tiled_attention(q, k, v, tile).data, full.data))
    print("scores held at once:", T * tile, "instead of", T * T)
    checks("the backends' tiled kernels equal full attention too",
           all(np.allclose(b.attention(q.data, k.data, v.data)[0], full.data) for b in (numpy_backend, numba_backend)))

    # %% causal linear attention: parallel form and recurrence
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

    # %% time and memory against T, each measurement in a fresh process
    lengths = [256, 512, 1024] if quick else [256, 512, 1024, 2048, 4096]
    methods = ["materialised (numpy)", "tiled (numpy reference)", "tiled (numba)"]
    table = {m: [measure_in_fresh_process(m, n) for n in lengths] for m in methods}
    print(f"{'T':>6}" + "".join(f"{m:>28}" for m in methods))
    for i, n in enumerate(lengths):
        print(f"{n:>6}" + "".join(f"{table[m][i][0] * 1e3:>14.1f} ms {table[m][i][1]:>7.0f} MB" for m in methods))
    longest = len(lengths) - 1
    checks("at the longest T the tiled numba kernel needs under a tenth of the materialised memory",
           table["tiled (numba)"][longest][1] < table["materialised (numpy)"][longest][1] / 10)

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
    return result(checks, save(fig, "efficient_attention"))


if __name__ == "__main__":
    main()
