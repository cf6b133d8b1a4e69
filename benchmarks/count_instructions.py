"""The overhead benchmark's mixed chain (forward + backward), counted in instructions.

Wall-clock time per op moves by tens of percent between runs on a shared machine; the number
of instructions does not (about 0.4 %). To compare two trees' per-op overhead:

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \\
        --callgrind-out-file=/dev/null python -m benchmarks.count_instructions 4 [off]

It runs 3 chains to warm up, then N chains inside functools.reduce(), the only function
callgrind counts; instructions per chain = callgrind's "Collected" / N. With `off`, mt.debug's
observer (creation sites) is switched off, so the engine alone is counted.
"""

import functools
import sys

import numpy as np

import minitensor as mt

from .overhead import MIX, _chain


def main(n, observer=True):
    if not observer:
        mt.autograd.set_observer(None)
    x = mt.tensor(np.array([0.5]), requires_grad=True)
    c = mt.tensor(np.array([1.1]))

    def step():
        x.grad = None
        _chain(x, c, MIX).backward()

    for _ in range(3):
        step()
    functools.reduce(lambda done, _: step(), range(n), None)


if __name__ == "__main__":
    main(int(sys.argv[1]), observer="off" not in sys.argv[2:])
