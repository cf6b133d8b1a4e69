"""Time building a chain of n views (each a view of the one before) and one backward through
it: `python scripts/chained_views.py 10000 30000 100000` (issue 21, item 10). Building must
grow linearly with n."""

import sys
import time

import numpy as np

import minitensor as mt


def chain(n):
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 1.0
    start = time.perf_counter()
    view = y
    for i in range(n):
        view = view.T if i % 2 else view[:]  # each one a view of the last (shared memory)
    built = time.perf_counter() - start
    start = time.perf_counter()
    view.sum().backward()
    backward = time.perf_counter() - start
    assert np.all(x.grad == 1.0) and np.shares_memory(view.data, y.data)
    return built, backward


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    for n in [int(a) for a in sys.argv[1:]] or [10_000, 30_000, 100_000]:
        built, backward = chain(n)
        print(f"{n:>7} chained views: built in {built:7.2f} s, backward in {backward:6.2f} s", flush=True)
