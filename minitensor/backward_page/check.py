"""Check mode: every op of fn(*inputs) re-checked alone by mt.debug's per-op check (the one
find_wrong_op runs, measured by mt.gradcheck: minitensor/debug/op_check.py), keeping every op's
result, not only the first failure, so the page can mark each node."""

import math

from ..autograd import topological_order
from ..debug.op_check import backward_at, checked_ops, recorded_run
from ..tensor import Tensor

MAX_CHECKED = 256  # elements compared per input (a random sample above it)


def per_op_errors(fn, inputs):
    """Run fn on float64 copies of the inputs and re-check each op alone. Returns the output of
    that run and, for each of its graph's nodes in topological order, a dict with gradcheck's
    relative error, whether it passed, and (when it failed) gradcheck's report of that op alone;
    None for a node with no input that requires grad."""
    output, calls = recorded_run(fn, inputs)
    if not isinstance(output, Tensor) or output.grad_fn is None:
        raise ValueError("viz.html(check=(fn, *inputs)): fn(*inputs) must return a Tensor made by ops "
                         "from inputs that require grad")
    checked = {c.node: c for c in checked_ops(calls, max_checked=MAX_CHECKED)}
    results = []
    for node in topological_order(output.grad_fn):
        c = checked.get(node)
        results.append(None if c is None else {
            "op": c.op, "created_at": c.created_at, "module": c.module,
            "relative_error": c.relative_error if math.isfinite(c.relative_error) else None,  # JSON has no inf
            "passed": c.passed, "shape": node.output_shape,
            "report": c.report if c.passed else f"its backward: {backward_at(c.node.function)}\n{c.report}"})
    return output, results
