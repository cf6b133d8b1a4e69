"""Per-op overhead: forward + backward on one-element tensors, minitensor against PyTorch.

With one element the arithmetic is free, so what is timed is the bookkeeping:
building the node, the Tensor, the topological sort and the backward calls.
Both engines run the same chains (the same Python lambdas drive both): one
mixed chain, then one chain per op. We report the best of several repeats,
per op, and the ratio minitensor / PyTorch (below 1 means minitensor is faster).
"""

import numpy as np

import minitensor as mt

from .common import best_seconds

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


def main():
    try:
        import torch  # noqa: F401

        have_torch = True
    except ImportError:
        have_torch = False
    print(f"Per-op overhead: forward + backward on one-element float64 tensors, "
          f"chains of {CHAIN} ops, best of {REPEATS}")
    print(f"{'ops in the chain':34}{'minitensor':>12}{'PyTorch':>12}{'ratio':>8}")
    rows = [(" ".join(MIX) + " (mix)", MIX)] + [(name, [name]) for name in OPS]
    usual = measure_minitensor(MIX)
    mt.autograd.set_observer(None)  # the engine alone: no creation sites recorded
    try:
        alone = measure_minitensor(MIX)
    finally:
        mt.autograd.set_observer(mt.debug._observer)
    print(f"{'mix, the engine without mt.debug':34}{alone * 1e6:>10.2f}us{'':>12}{usual / alone:>7.2f}x "
          f"(the cost of recording where each node was made)")
    for label, names in rows:
        ours = measure_minitensor(names)
        if have_torch:
            theirs = measure_torch(names)
            print(f"{label:34}{ours * 1e6:>10.2f}us{theirs * 1e6:>10.2f}us{ours / theirs:>7.2f}x")
        else:
            print(f"{label:34}{ours * 1e6:>10.2f}us{'(no torch)':>12}")


if __name__ == "__main__":
    main()
