"""Shared by the benchmarks: a note on the BLAS in use, ratios, a side timed in a process of its
own, and the machine's peak matrix-product rate (the floor under a step's time). Timing and peak
memory are minitensor.timing's, which the demos use too."""

import json
import os
import statistics
import subprocess
import sys

from minitensor.timing import best_seconds, peak_memory_mb  # noqa: F401 (peak_memory_mb: for kernels and train)
from minitensor import ops
from minitensor.testing import op_backward, op_forward


def describe_machine():
    """One line: cores, BLAS kernel (threadpoolctl), OPENBLAS_CORETYPE."""
    line = f"cores: {os.cpu_count()}"
    try:
        from threadpoolctl import threadpool_info

        blas = [f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')}, {i.get('num_threads')} threads)"
                for i in threadpool_info() if i.get("user_api") == "blas"]
        line += f"; NumPy BLAS: {', '.join(blas) or 'unknown'}"
    except ImportError:
        line += "; NumPy BLAS: (install threadpoolctl to see it)"
    line += f"; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
    return line


def ratio(a, b):
    return f"{a / b:.2f}x" if b and b == b else "n/a"


def compare_rounds(ours, theirs):
    """Per-round seconds of two sides -> {"ours", "theirs": the medians; "ratio": the ratio of those
    two medians, so that a line printing the three adds up; "low", "high": the lowest and highest
    per-round ratio, the spread over the rounds}. (A median of per-round ratios printed beside the
    medians of the times need not be their ratio: 10.80 us against 13.13 us read "1.46x".)"""
    per_round = [a / b for a, b in zip(ours, theirs)]
    mine, other = statistics.median(ours), statistics.median(theirs)
    return {"ours": mine, "theirs": other, "ratio": mine / other, "low": min(per_round), "high": max(per_round)}


def ratio_and_range(compared):
    """"0.82x (rounds 0.70x to 2.16x)": the ratio of the medians and its range over the rounds."""
    return f"{compared['ratio']:.2f}x (rounds {compared['low']:.2f}x to {compared['high']:.2f}x)"


def run_worker(module, side, env=None):
    """Run `python -m benchmarks.<module> --worker <side>` in a process of its own and return
    the JSON its last line prints. PyTorch's OpenMP threads keep spinning after its calls and
    slow whatever runs next in the same process, so every side is timed alone."""
    output = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--worker", side],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False,
    )
    if output.returncode:
        raise RuntimeError(f"benchmarks.{module} worker {side!r} failed:\n{output.stderr}")
    return json.loads(output.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# the floor: what this machine's arithmetic and memory allow at best
# ---------------------------------------------------------------------------

PEAK_SIZE = 2048  # the square float32 matmul the peak is measured on
COPY_MB = 256  # the array copied to measure memory bandwidth (far past every cache)


def _peak_worker(library):
    """One side's peak: the best rate of a large square float32 matmul, on NumPy's BLAS (its own
    thread count) or PyTorch's (2 threads, as PyTorch runs in every benchmark); NumPy's side also
    times a large copy for the memory bandwidth. Prints one JSON line."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((PEAK_SIZE, PEAK_SIZE)).astype(np.float32) for _ in range(2))
    result = {}
    if library == "torch":
        import torch

        torch.set_num_threads(2)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        seconds = best_seconds(lambda: torch.mm(ta, tb), repeats=5, warmup=2)
    else:
        seconds = best_seconds(lambda: np.matmul(a, b), repeats=5, warmup=2)
        source = np.ones(COPY_MB * 2**20 // 4, dtype=np.float32)
        target = np.empty_like(source)
        copy_seconds = best_seconds(lambda: np.copyto(target, source), repeats=5, warmup=1)
        result["copy_gb_per_s"] = 2 * source.nbytes / copy_seconds / 1e9  # read once, written once
    result["gflops"] = 2 * PEAK_SIZE**3 / seconds / 1e9
    print(json.dumps(result))


def machine_peaks():
    """{"numpy": GFLOP/s, "torch": GFLOP/s, "peak": the larger, "peak_from": which, "copy": GB/s}:
    this machine's best matrix-product rate on each side's BLAS, and its copy bandwidth, each
    measured in a process of its own."""
    numpy_side, torch_side = run_worker("common", "peak-numpy"), run_worker("common", "peak-torch")
    peaks = {"numpy": numpy_side["gflops"], "torch": torch_side["gflops"], "copy": numpy_side["copy_gb_per_s"]}
    peaks["peak_from"] = max(("numpy", "torch"), key=peaks.get)
    peaks["peak"] = peaks[peaks["peak_from"]]
    return peaks


def describe_peaks(peaks):
    return (f"this machine's peak: {peaks['numpy']:.0f} GFLOP/s on NumPy's BLAS, {peaks['torch']:.0f} on "
            f"PyTorch's (2 threads), a {PEAK_SIZE} x {PEAK_SIZE} float32 matmul; the floors use the larger "
            f"({peaks['peak_from']}); copy bandwidth {peaks['copy']:.1f} GB/s ({COPY_MB} MB float32 copy)")


def floor(multiply_adds, reference_seconds, peaks):
    """The floor beside a ratio to `reference_seconds`: the products' multiply-adds at the peak rate
    (2 flops each), as a time and as that ratio, which no code can go below."""
    seconds = 2 * multiply_adds / (peaks["peak"] * 1e9)
    return (f"floor {seconds / reference_seconds:.2f}x ({multiply_adds / 1e9:.3g} G multiply-adds at "
            f"{peaks['peak']:.0f} GFLOP/s = {seconds * 1e3:.1f} ms)")


def bandwidth_floor(bytes_moved, reference_seconds, peaks):
    """The floor of a step with no products: the bytes it must read and write at the copy bandwidth."""
    seconds = bytes_moved / (peaks["copy"] * 1e9)
    return (f"floor {seconds / reference_seconds:.2f}x (no multiply-adds: {bytes_moved / 1e6:.0f} MB read and "
            f"written at {peaks['copy']:.1f} GB/s = {seconds * 1e3:.1f} ms)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"] and sys.argv[2].startswith("peak-"):
        _peak_worker(sys.argv[2].removeprefix("peak-"))


class op_code:
    """The fused ops' own code on arrays (minitensor/ops/, no accelerator), with the signatures of an
    accelerator's kernels, so that a benchmark times it beside Numba's."""

    @staticmethod
    def softmax(x, axis, mask=None):
        return op_forward(ops.Softmax, x, axis=axis, mask=mask)[0]

    @staticmethod
    def softmax_backward(y, dy, axis):
        return op_backward(ops.Softmax, dy, (y,), axis=axis, mask=None)

    @staticmethod
    def layer_norm(x, weight, bias, eps):
        y, node = op_forward(ops.LayerNormFunction, x, weight, bias, eps=eps)
        return (y, *node.saved_tensors[2:])  # y, mean, rstd

    @staticmethod
    def layer_norm_backward(dy, x, weight, mean, rstd):
        return op_backward(ops.LayerNormFunction, dy, (x, weight, mean, rstd))

    @staticmethod
    def gelu(x, approximate):
        return op_forward(ops.GELU, x, approximate=approximate)[0]

    @staticmethod
    def gelu_backward(x, dy, approximate):
        return op_backward(ops.GELU, dy, (x,), approximate=approximate)
