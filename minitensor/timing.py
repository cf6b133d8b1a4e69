"""Measuring a piece of code: its best time and its peak memory. Used by the demos and the
benchmarks alike (both sit above minitensor and neither imports the other)."""

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
    (NumPy, Numba's, PyTorch's): reset the kernel's high-water mark, run, read it.
    Linux only (/proc/self); elsewhere nan."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current RSS
    except OSError:
        return float("nan")
    before = _status_kb("VmRSS")
    run()
    return (_status_kb("VmHWM") - before) / 1024
