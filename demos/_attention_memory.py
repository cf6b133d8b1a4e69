"""Time and peak memory of one causal attention forward, for demos/efficient_attention.py, which
runs `measure` in a fresh process for each point so that no run reuses another's memory."""

import time

import numpy as np

import minitensor as mt
from minitensor.backends import numba_backend
from minitensor.backends.numba_backend import SHORT_KEYS
from minitensor.testing import op_forward
from minitensor.timing import peak_memory_mb
from models.attention import scaled_dot_product_attention


def materialised(q, k, v):
    """Every (..., T, T) score at once: the definition, written op by op in models/attention.py
    (the path that returns the weights), on the reference backend, recording no graph."""
    with mt.no_grad(), mt.use_backend("numpy"):
        out, _ = scaled_dot_product_attention(*map(mt.tensor, (q, k, v)), is_causal=True, return_weights=True)
    return out.data


KERNELS = {
    "materialised (numpy)": materialised,
    "tiled (numpy reference)": lambda q, k, v: op_forward(mt.ops.Attention, q, k, v, is_causal=True)[0],
    "fused (numba)": lambda q, k, v: numba_backend.attention(q, k, v, None, None, True),
}


def measure(method, T, repeats=None):
    """Seconds and peak extra MB of one causal forward at length T, 8 heads of 64, float32: the
    time is the best of `repeats` calls after the one that measured memory (default: 3 up to
    T = 1,024, where one call is short and the timer's noise is not, then 1)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((8, T, 64)).astype(np.float32) for _ in range(3))
    kernel = KERNELS[method]
    warm_up(kernel)
    memory = peak_memory_mb(lambda: kernel(q, k, v))  # the first run at this size: nothing reused
    times = []
    for _ in range(repeats or (3 if T <= 1024 else 1)):
        start = time.perf_counter()
        kernel(q, k, v)
        times.append(time.perf_counter() - start)
    return min(times), memory


def warm_up(kernel):
    """Call `kernel` on small inputs that take each of its paths, so that no measurement includes
    Numba compiling (or loading) a kernel: the compiler's memory would count as the kernel's. The
    fused kernel has two paths, chosen by the number of keys: up to SHORT_KEYS, and beyond. The
    inputs stay small (under 128 kB, glibc's first mmap threshold) so that the measurement cannot
    reuse memory the warm-up freed: its own allocations still count."""
    rng = np.random.default_rng(1)
    for keys in (64, SHORT_KEYS + 1):
        q = rng.standard_normal((1, 1, 8)).astype(np.float32)
        k, v = (rng.standard_normal((1, keys, 8)).astype(np.float32) for _ in range(2))
        kernel(q, k, v)
