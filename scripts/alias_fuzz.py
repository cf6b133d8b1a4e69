"""Run the alias fuzzer of tests/test_aliases.py (random view / in-place programs, minitensor
against PyTorch) for many programs and count the outcomes, instead of stopping at the first
difference: `python scripts/alias_fuzz.py 20000 [seed]`.

agree       both ran and gave the same loss and gradients (or both raised)
differ      one raised and the other did not, or the numbers differ; each is printed
"""

import collections
import pathlib
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
import test_aliases as fuzz  # noqa: E402


def classify(program):
    theirs, their_error = fuzz._outcome(fuzz._Torch, program)
    ours, our_error = fuzz._outcome(fuzz._Minitensor, program)
    if their_error is not None and our_error is not None:
        return "both raise", None
    if (their_error is None) != (our_error is None):
        return "differ", f"PyTorch: {their_error!r}\n  minitensor: {our_error!r}"
    (our_loss, our_grads), (their_loss, their_grads) = ours, theirs
    if not np.allclose(our_loss, their_loss, rtol=1e-10, atol=1e-12):
        return "differ", f"loss {our_loss} vs PyTorch {their_loss}"
    names = ["x.grad", "w.grad"] + [f"retained grad {i}" for i in range(len(our_grads) - 3)] + ["hook calls"]
    if len(our_grads) != len(their_grads):
        return "differ", f"{len(our_grads)} gradients and hook records vs PyTorch {len(their_grads)}"
    for name, mine, reference in zip(names, our_grads, their_grads):
        if (mine is None) != (reference is None):
            return "differ", f"{name} {mine} vs PyTorch {reference}"
        if mine is not None and (mine.shape != reference.shape or not np.allclose(mine, reference, rtol=1e-10,
                                                                                  atol=1e-12)):
            return "differ", f"{name} {mine.tolist()} vs PyTorch {reference.tolist()}"
    return "agree", None


def main(count, seed):
    counts = collections.Counter()
    layouts = collections.Counter()
    differences = []

    @settings(max_examples=count, derandomize=False, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(fuzz.programs())
    def run(program):
        outcome, detail = classify(program)
        counts[outcome] += 1
        layouts[program["layout"]] += 1
        if detail is not None:
            differences.append((program, detail))

    np.random.seed(seed)
    run()
    total = sum(counts.values())
    print(f"{total} programs (layouts: {dict(sorted(layouts.items()))})")
    for outcome in ("agree", "both raise", "differ"):
        print(f"  {outcome:<11} {counts[outcome]}")
    for program, detail in differences:
        print(f"\nprogram: {program}\n  {detail}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
