"""python -m benchmarks [NAME ...]: run the benchmarks (all by default) and print their ratios."""

import importlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
# block and kernels are not in a student copy (homework.NOT_IN_STUDENT_COPY): run those present
BENCHMARKS = [name for name in ["overhead", "kernels", "block", "train", "user_models"]
              if (HERE / f"{name}.py").exists()]


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{__doc__.strip()}\nknown benchmarks: {', '.join(BENCHMARKS)}")
        return
    names = argv or BENCHMARKS
    for name in names:
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
        importlib.import_module(f"benchmarks.{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
