"""How many cores the other processes on this machine leave free (Linux's /proc/stat).

blas_threads.py asks this before a large product, so that NumPy's BLAS does not start more
threads than there are free cores (a spinning BLAS thread that loses its core stalls the others).
"""

import os
import time

# How often the CPU counters are read again (a read is a system call: not per product; the
# decision only needs to follow a machine that changes over seconds).
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


def free_cores():
    """Whole cores the other processes leave free (at least 1), looked at every LOOK_EVERY s.
    Where the counters cannot be read (not Linux), every core is taken to be free."""
    now = time.monotonic()
    if _look["at"] is None or now - _look["at"] >= LOOK_EVERY:
        spare = spare_cores(now=now)
        if spare is not None:
            # a quarter of a core of noise (a shell, a browser tab) does not take a core away
            _look["free"] = max(1, int(spare + 0.25))
    return _look["free"]
