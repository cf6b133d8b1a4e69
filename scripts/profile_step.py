"""Profile one adding-problem training step on a backend: python scripts/profile_step.py [numpy] [steps]

Prints cProfile's top functions by their own time (tottime) over `steps` steps of the model
`python -m benchmarks train` times (the same model and batches), after warm-up steps.
"""

import cProfile
import pstats
import sys
import time

import minitensor as mt
from benchmarks import train


def main(backend="numpy", steps=10):
    mt.set_backend(backend)
    _, step = train.minitensor_model()
    batches = train._batches()
    for x, y in batches[:3]:
        step(x, y)
    times = []
    for i in range(steps):
        start = time.perf_counter()
        step(*batches[i % len(batches)])
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"{backend}: median step {times[len(times) // 2] * 1e3:.1f} ms over {steps} steps (unprofiled)")
    profile = cProfile.Profile()
    profile.enable()
    for i in range(steps):
        step(*batches[i % len(batches)])
    profile.disable()
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "numpy", int(sys.argv[2]) if len(sys.argv) > 2 else 10)
