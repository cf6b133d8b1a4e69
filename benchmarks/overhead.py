"""Per-op overhead: forward + backward on one-element tensors, minitensor against PyTorch.

With one element the arithmetic is free, so what is timed is the bookkeeping:
building the node, the Tensor, the topological sort and the backward calls.
Both engines run the same chains (the same Python lambdas drive both): one
mixed chain, then one chain per op. We report the best of several repeats,
per op, and the ratio minitensor / PyTorch (below 1 means minitensor is faster).
"""

import json
import statistics
import sys

import numpy as np

import minitensor as mt

from .common import best_seconds, compare_rounds, ratio_and_range, run_worker

CHAIN = 1000  # ops per graph
REPEATS = 7


OPS = {
    "add": lambda y, c: y + c,
    "mul": lambda y, c: y * c,
    "div": lambda y, c: y / c,
    "tanh": lambda y, c: y.tanh(),
    "exp": lambda y, c: (y * 0.0).exp(),  # 2 ops; keeps values finite
    "sigmoid": lambda y, c: y.sigmoid(),
}
MIX = ["mul", "add", "tanh", "div", "sigmoid", "add"]


def _chain(x, c, names):
    """CHAIN ops applied in turn (the same lambdas serve both engines), then a sum."""
    y = x
    steps = [OPS[name] for name in names]
    for i in range(CHAIN):
        y = steps[i % len(steps)](y, c)
    return y.sum()


def _ops_in(names):
    return CHAIN * (2 if names == ["exp"] else 1) + 1


def measure_minitensor(names):
    x = mt.tensor(np.array([0.5]), requires_grad=True)
    c = mt.tensor(np.array([1.1]))

    def forward_backward():
        x.grad = None
        _chain(x, c, names).backward()

    return best_seconds(forward_backward, repeats=REPEATS, warmup=0) / _ops_in(names)


def measure_torch(names):
    import torch

    torch.set_num_threads(1)
    x = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([1.1], dtype=torch.float64)

    def forward_backward():
        x.grad = None
        _chain(x, c, names).backward()

    return best_seconds(forward_backward, repeats=REPEATS, warmup=0) / _ops_in(names)


ROUNDS = 3  # alternating processes per side
TARGET = 0.9  # issue 25: the mixed chain at most this times PyTorch's per-op time
ROWS = [(" ".join(MIX) + " (mix)", MIX)] + [(name, [name]) for name in OPS]


def worker(side):
    """Time every row on one side ("minitensor", "engine-alone" or "torch"); print one JSON line."""
    if side == "torch":
        seconds = {label: measure_torch(names) for label, names in ROWS}
    else:
        if side == "engine-alone":
            mt.autograd.set_observer(None)  # the engine alone: no creation sites recorded
        seconds = {label: measure_minitensor(names) for label, names in ROWS}
    print(json.dumps(seconds))


def measure(rounds=ROUNDS):
    """Each side in processes of its own, taking turns: per row, the median seconds of each side,
    their ratio and its range over the rounds. PyTorch's threads (one here) never share a process
    with ours."""
    sides = ["minitensor", "engine-alone"] + (["torch"] if _have_torch() else [])
    runs = {side: [] for side in sides}
    for _ in range(rounds):
        for side in sides:
            runs[side].append(run_worker("overhead", side))
    table = {}
    for label, _ in ROWS:
        ours = [run[label] for run in runs["minitensor"]]
        row = {"minitensor": statistics.median(ours),
               "engine-alone": statistics.median(run[label] for run in runs["engine-alone"])}
        if "torch" in runs:
            compared = compare_rounds(ours, [run[label] for run in runs["torch"]])
            row.update(torch=compared["theirs"], ratio=compared["ratio"], compared=compared)
        table[label] = row
    return table


def _have_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def mix_line(table):
    """The issue's per-op line: the mixed chain against PyTorch, its target and its floor."""
    row = table[ROWS[0][0]]
    if "ratio" not in row:
        return f"Per-op overhead (mixed chain): {row['minitensor'] * 1e6:.2f} us per op (no torch to compare)"
    return (f"Per-op overhead, {CHAIN}-op mixed chain forward + backward: {row['minitensor'] * 1e6:.2f} us per op, "
            f"PyTorch {row['torch'] * 1e6:.2f} us: {ratio_and_range(row['compared'])} (target <= {TARGET}x; "
            f"floor: none to compute, one-element ops are all bookkeeping)")


def main():
    print(f"Per-op overhead: forward + backward on one-element float64 tensors, chains of {CHAIN} ops, best of "
          f"{REPEATS} per process, each side in processes of its own, median of {ROUNDS} rounds; a ratio is "
          f"that of the two medians")
    table = measure()
    print(f"{'ops in the chain':34}{'minitensor':>12}{'PyTorch':>12}{'ratio':>8}")
    for label, _ in ROWS:
        row = table[label]
        theirs = f"{row['torch'] * 1e6:>10.2f}us{row['ratio']:>7.2f}x" if "ratio" in row else f"{'(no torch)':>12}"
        print(f"{label:34}{row['minitensor'] * 1e6:>10.2f}us{theirs}")
    mix = table[ROWS[0][0]]
    print(f"{'mix, the engine without mt.debug':34}{mix['engine-alone'] * 1e6:>10.2f}us{'':>12}"
          f"{mix['minitensor'] / mix['engine-alone']:>7.2f}x (the cost of recording where each node was made)")
    print(mix_line(table))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        main()
