"""The hot kernels side by side: the ops' own NumPy code, Numba, PyTorch eager (CPU).

Each row times forward + backward of one kernel on the same float32 arrays and
prints the times and the ratios numba / numpy and numba / torch.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

from minitensor.backends import numba_backend as nb

from .common import best_seconds, describe_machine, peak_memory_mb, ratio
from .common import op_code as ref


def _torch():
    try:
        import torch

        torch.set_num_threads(2)
        return torch
    except ImportError:
        return None


def softmax_rows(torch, rng):
    shape = (16, 4, 256, 256)
    x = rng.standard_normal(shape).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    mask = np.triu(np.ones((256, 256), dtype=bool), k=1)  # causal: True hides

    def run(backend):
        y = backend.softmax(x, -1, mask)
        backend.softmax_backward(y, dy, -1)

    times = {"numpy": best_seconds(lambda: run(ref)), "numba": best_seconds(lambda: run(nb))}
    if torch:
        tx = torch.from_numpy(x).requires_grad_()
        tmask, tdy = torch.from_numpy(mask), torch.from_numpy(dy)

        def run_torch():
            tx.grad = None
            torch.softmax(tx.masked_fill(tmask, float("-inf")), dim=-1).backward(tdy)

        times["torch"] = best_seconds(run_torch)
    return "masked softmax fwd+bwd (16, 4, 256, 256)", times


def layer_norm_rows(torch, rng):
    shape, d = (8, 256, 256), 256
    x = rng.standard_normal(shape).astype(np.float32)
    w, b = rng.standard_normal(d).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)

    def run(backend):
        y, mean, rstd = backend.layer_norm(x, w, b, 1e-5)
        backend.layer_norm_backward(dy, x, w, mean, rstd)

    times = {"numpy": best_seconds(lambda: run(ref)), "numba": best_seconds(lambda: run(nb))}
    if torch:
        tx, tw, tb = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
        tdy = torch.from_numpy(dy)

        def run_torch():
            torch.nn.functional.layer_norm(tx, (d,), tw, tb).backward(tdy)

        times["torch"] = best_seconds(run_torch)
    return "layer norm fwd+bwd (8, 256, 256)", times


def gelu_elementwise(torch, rng):
    x = rng.standard_normal((8, 256, 1024)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)

    def run(backend):
        backend.gelu(x, "tanh")
        backend.gelu_backward(x, dy, "tanh")

    times = {"numpy": best_seconds(lambda: run(ref)), "numba": best_seconds(lambda: run(nb))}
    if torch:
        tx, tdy = torch.from_numpy(x).requires_grad_(), torch.from_numpy(dy)
        times["torch"] = best_seconds(lambda: torch.nn.functional.gelu(tx, approximate="tanh").backward(tdy))
    return "GELU (tanh) fwd+bwd (8, 256, 1024)", times


def batched_matmul(torch, rng):
    a = rng.standard_normal((32, 256, 256)).astype(np.float32)
    b = rng.standard_normal((32, 256, 64)).astype(np.float32)
    times = {"numpy": best_seconds(lambda: np.matmul(a, b)), "numba": best_seconds(lambda: nb.matmul(a, b))}
    if torch:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        times["torch"] = best_seconds(lambda: torch.matmul(ta, tb))
    return "batched matmul (32, 256, 256) @ (32, 256, 64)", times


def linear_matmul(torch, rng):
    a = rng.standard_normal((8, 256, 256)).astype(np.float32)
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    times = {"numpy": best_seconds(lambda: np.matmul(a, w)), "numba": best_seconds(lambda: nb.matmul(a, w))}
    if torch:
        ta, tw = torch.from_numpy(a), torch.from_numpy(w)
        times["torch"] = best_seconds(lambda: torch.matmul(ta, tw))
    return "stack @ matrix (8, 256, 256) @ (256, 1024)", times


def attention_long(torch, rng):
    """B*H = 8, T = 2048, d = 64, causal: the tiled kernel against the materialised one."""
    shape = (2, 4, 2048, 64)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))

    def tiled():
        out, stats = nb.attention(q, k, v, None, None, True)
        nb.attention_backward(q, k, v, out, stats, dout, None, None, True)

    times = {"numpy": best_seconds(lambda: materialised(q, k, v, dout), repeats=3),
             "numba": best_seconds(tiled, repeats=3)}
    memory = {name: _peak_in_fresh_process(name) for name in ("numpy", "numba", "torch")}
    if torch:
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))  # 4-D: the fast path
        tdout = torch.from_numpy(dout)

        def run_torch():
            torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(tdout)

        times["torch"] = best_seconds(run_torch, repeats=3)
    return "attention fwd+bwd B*H=8 T=2048 d=64 causal", times, memory


def materialised(q, k, v, dout):
    """Forward and backward of attention with every (..., T, T) score held: the definition, written
    op by op in models/attention.py (the path that returns the weights), on the reference backend."""
    import minitensor as mt
    from models.attention import scaled_dot_product_attention

    with mt.use_backend("numpy"):
        tq, tk, tv = (mt.tensor(a, requires_grad=True) for a in (q, k, v))
        out, _ = scaled_dot_product_attention(tq, tk, tv, is_causal=True, return_weights=True)
        out.backward(dout)
    return out.data, tq.grad, tk.grad, tv.grad


def _peak_in_fresh_process(which):
    """Peak extra memory (MB) of one attention forward + backward, measured in a new process
    so that no allocator still holds memory from an earlier run."""
    code = f"from benchmarks.kernels import attention_memory; print(attention_memory({which!r}))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    try:
        return float(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return float("nan")


def attention_memory(which):
    """Run in a fresh process by _peak_in_fresh_process: the peak of one run of `which`."""
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal((2, 4, 2048, 64)).astype(np.float32) for _ in range(4))
    small = [a[:, :, :128] for a in (q, k, v)]
    out, stats = nb.attention(*small, None, None, True)  # load the compiled kernels first
    nb.attention_backward(*small, out, stats, dout[:, :, :128], None, None, True)

    def numba_run():
        o, s = nb.attention(q, k, v, None, None, True)
        nb.attention_backward(q, k, v, o, s, dout, None, None, True)

    def numpy_run():  # the materialised version: (2, 4, T, T) scores and weights
        return materialised(q, k, v, dout)

    torch = _torch()

    def torch_run():
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(torch.from_numpy(dout))

    if which == "torch":
        torch_run()  # warm up its allocator and kernels once
    return peak_memory_mb({"numba": numba_run, "numpy": numpy_run, "torch": torch_run}[which])


def compile_times():
    """Seconds for a fresh process to compile every kernel, then to load them from the cache."""
    code = (
        "import time, numpy as np; t = time.perf_counter();"
        "from minitensor.backends import numba_backend as nb;"
        "x = np.ones((4, 8), np.float32); y = nb.softmax(x, -1); nb.softmax_backward(y, x, -1);"
        "nb.log_softmax(x); nb.gelu(x); nb.gelu_backward(x, x); o = nb.layer_norm(x, x[0], x[0]);"
        "nb.layer_norm_backward(x, x, x[0], o[1], o[2]); q = np.ones((1, 2, 8, 4), np.float32);"
        "out, stats = nb.attention(q, q, q); nb.attention_backward(q, q, q, out, stats, out);"
        "print(time.perf_counter() - t)"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        command = [sys.executable, "-c", code]
        first = float(subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout)
        second = float(subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout)
    return first, second


def main():
    torch = _torch()
    rng = np.random.default_rng(0)
    print("Kernels, float32, forward + backward unless noted; best of several runs")
    print(describe_machine())
    print(f"{'kernel':46}{'numpy':>10}{'numba':>10}{'torch':>10}{'numba/numpy':>13}{'numba/torch':>13}")
    for bench in (softmax_rows, layer_norm_rows, gelu_elementwise, batched_matmul, linear_matmul, attention_long):
        label, times, *memory = bench(torch, rng)
        t_torch = times.get("torch", float("nan"))
        print(f"{label:46}{times['numpy'] * 1e3:>8.1f}ms{times['numba'] * 1e3:>8.1f}ms{t_torch * 1e3:>8.1f}ms"
              f"{ratio(times['numba'], times['numpy']):>13}{ratio(times['numba'], t_torch):>13}")
        if memory:
            m = memory[0]
            m_torch = m.get("torch", float("nan"))
            print(f"{'  peak extra memory':46}{m['numpy']:>8.0f}MB{m['numba']:>8.0f}MB{m_torch:>8.0f}MB"
                  f"{ratio(m['numba'], m['numpy']):>13}{ratio(m['numba'], m_torch):>13}")
    first, second = compile_times()
    print(f"Numba: a fresh process compiles every kernel in {first:.1f} s; a second process loads them "
          f"from the cache in {second:.1f} s")


if __name__ == "__main__":
    main()
