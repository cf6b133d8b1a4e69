"""Shared by the benchmarks: timing, peak memory, and a note on the BLAS in use."""

import json
import os
import subprocess
import sys
import time


def best_seconds(run, repeats=5, warmup=1):
    """The best of `repeats` timed calls of run(), after `warmup` untimed ones."""
    for _ in range(warmup):
        run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _status_kb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def peak_memory_mb(run):
    """Extra resident memory (MB) at the peak of run(), for every allocator alike
    (NumPy, Numba's, PyTorch's): reset the kernel's high-water mark, run, read it."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current RSS
    except OSError:
        return float("nan")
    before = _status_kb("VmRSS")
    run()
    return (_status_kb("VmHWM") - before) / 1024


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
