"""Keep freed memory in the process, so that the next array of that size costs no page faults.

Every op makes fresh arrays, many of them megabytes (a GPT step of `python -m benchmarks
user_models` makes hundreds). glibc's malloc hands an allocation above its mmap threshold (at
most 32 MB, adjusted as the program runs) straight from the kernel and gives it back on free,
and it trims the top of its heap whenever 128 KB or more lies free there. Either way the next
array of that size is new memory, and the kernel zero-fills each of its 4 KB pages on first
touch: a GPT step of the default backend took 24,000 page faults (81 ms of system time in a
~500 ms step, counted with resource.getrusage), PyTorch's 1,500. Raising both thresholds keeps
that memory for reuse: 150 faults per step, and the process holds on to its peak (what it
needed anyway) instead of asking for it again every step.

A process-wide setting of the C library, made once when minitensor is imported, on Linux with
glibc. Its price: a process keeps its peak memory until it ends (each worker of a
multiprocessing pool its own), where glibc would have given most of it back between steps.
MINITENSOR_KEEP_FREED_MEMORY=0 (or false, no, off) leaves the C library's own settings alone.
"""

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_ABOVE = 256 * 2**20  # an array above this still gets memory of its own, given back on free
TRIM_ABOVE = 2**30  # free memory at the top of the heap is given back above this much


def keep_freed_memory():
    """Raise glibc's mmap and trim thresholds (see above); True if it did."""
    setting = os.environ.get("MINITENSOR_KEEP_FREED_MEMORY", "1").strip().lower()
    if setting in ("0", "false", "no", "off") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no such settings): nothing to do
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_ABOVE)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_ABOVE))
