"""python -m benchmarks [NAME ...]: run the benchmarks (all by default) and print their ratios."""

import importlib
import sys

BENCHMARKS = ["overhead", "kernels", "block", "train"]


def main(argv):
    names = argv or BENCHMARKS
    for name in names:
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
        importlib.import_module(f"benchmarks.{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
