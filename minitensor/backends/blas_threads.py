"""How many threads NumPy's BLAS uses for one product, chosen by its size and by how busy
the machine is.

OpenBLAS's threads wait for each other by spinning. When anything else runs on the machine,
a thread that loses its core stalls the others, and a product that takes a fraction of a
millisecond on one thread can take orders of magnitude longer on two (measured: with one
busy process beside it on two cores, a (6464, 64) @ (64, 256) product took 2.7 ms on one
thread and 5.4 ms, often 8 ms, on two; with four busy processes a GRU step fell from 72 ms
to 4.9 s). So:

- a small product always runs on one thread: a second one gains little even when idle;
- a large one runs on as many of NumPy's BLAS threads as there are cores other processes
  leave free (`spare_cores`: the machine's CPU counters less this process's own CPU time):
  all of them on an idle machine, one on two cores with one busy process beside it.
"""

import os
import time

# Multiply-adds below which a product runs on one BLAS thread. Every product of the GRU step
# ((64, 64) @ (64, 192) and its backward: 2**19.6) is below it, where a second thread gains
# nothing idle and costs several times over beside a busy process. The products of the
# adding-problem transformer ((6464, 64) @ (64, 64): 2**24.7, up to 2**26.7) are above it:
# on two idle cores they take about half the time on two threads, which is most of why
# PyTorch (which threads them) was faster per step. `python -m benchmarks train` (the GRU
# beside a busy process, and the transformer's step) is how to move it.
ONE_THREAD_BELOW = 2**22

_blas = None  # [(controller, threads)] for NumPy's BLAS, found on first use


def _numpy_blas():
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # a speed-up, not a requirement
            _blas = []
            return _blas
        # SciPy's own BLAS (Numba's) is not NumPy's: the numba backend keeps it at one thread.
        _blas = [lib for lib in ThreadpoolController().lib_controllers
                 if lib.user_api == "blas" and "scipy.libs" not in lib.filepath]
    return _blas


def multiply_adds(a, b):
    """The multiply-adds of a @ b (batch x n x k x m)."""
    n = a.shape[-2] if a.ndim > 1 else 1
    m = b.shape[-1] if b.ndim > 1 else 1
    return max(a.size * m, b.size * n)


def product(matmul, a, b):
    """matmul(a, b) on the BLAS threads chosen above; the thread count is put back
    afterwards, so NumPy code outside minitensor keeps whatever it had."""
    if not _numpy_blas():
        return matmul(a, b)
    threads = [lib.get_num_threads() for lib in _blas]
    use = 1 if multiply_adds(a, b) < ONE_THREAD_BELOW else _free_cores()
    if all(count <= use for count in threads):
        return matmul(a, b)
    for lib, count in zip(_blas, threads):
        lib.set_num_threads(min(count, use))
    try:
        return matmul(a, b)
    finally:
        for lib, count in zip(_blas, threads):
            lib.set_num_threads(count)


# ----------------------------------------------------------------------------
# is anything else running?
# ----------------------------------------------------------------------------

# How often the CPU counters are read again (each read is a few microseconds; the decision
# only needs to follow a machine that changes over seconds).
LOOK_EVERY = 0.25  # seconds
_look = {"at": None, "machine": None, "ours": None, "free": os.cpu_count() or 1}


def _machine_busy_seconds():
    """CPU-seconds all cores have spent busy since boot (Linux's /proc/stat), or None."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()[1:]  # user nice system idle iowait irq softirq steal ...
    except OSError:
        return None
    ticks = [int(f) for f in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _our_busy_seconds():
    times = os.times()
    return times.user + times.system


def spare_cores(machine=None, ours=None, now=None):
    """Cores other processes left free since the last look (None before a second look).

    The machine's busy CPU time less our own, over the wall time between two looks: our own
    BLAS threads count as ours, so using them never makes the machine look busy."""
    machine = _machine_busy_seconds() if machine is None else machine
    ours = _our_busy_seconds() if ours is None else ours
    now = time.monotonic() if now is None else now
    last = dict(_look)
    _look.update(at=now, machine=machine, ours=ours)
    if machine is None or last["at"] is None or now <= last["at"]:
        return None
    others = max(0.0, (machine - last["machine"]) - (ours - last["ours"])) / (now - last["at"])
    return (os.cpu_count() or 1) - others


def _free_cores():
    """Whole cores the other processes leave free (at least 1), looked at every LOOK_EVERY s.
    Where the counters cannot be read (not Linux), every core is taken to be free."""
    now = time.monotonic()
    if _look["at"] is None or now - _look["at"] >= LOOK_EVERY:
        spare = spare_cores(now=now)
        if spare is not None:
            # a quarter of a core of noise (a shell, a browser tab) does not take a core away
            _look["free"] = max(1, int(spare + 0.25))
    return _look["free"]
