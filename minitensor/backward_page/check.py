"""Check mode: every op of fn(*inputs) re-checked alone, as mt.debug.find_wrong_op does (each
op's backward against central differences of its own forward, on the inputs it received, in
float64), keeping each op's relative error so the page can colour every node by it."""

import numpy as np

from .. import debug
from ..autograd import no_grad, topological_order
from ..gradcheck import GradcheckError, gradcheck
from ..tensor import Tensor

EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3  # find_wrong_op's defaults
MAX_CHECKED = 256  # elements compared per input (a random sample above it)


class _RecordCalls(debug.Tool):
    """A debugging tool that keeps each op's inputs and options, in forward order."""

    def __init__(self):
        self.calls = {}  # node -> (function, input arrays, options)

    def after_forward(self, function, ctx, arrays, options, output, *more):
        self.calls[ctx] = (function, [np.array(a, copy=True) for a in arrays], dict(options))


def _measure(function, tensors, options, seed):
    """d(u . f)/dx for a fixed random u: backward against central differences, on up to
    MAX_CHECKED elements of each input. Returns (relative error, passed) where the relative
    error is |analytic - numeric| / (|numeric| + atol) over the checked elements and an
    element passes as in gradcheck: |analytic - numeric| <= atol + rtol |numeric|."""
    rng = np.random.default_rng(seed)
    output = function.apply(*tensors, **options)
    u = rng.standard_normal(output.shape)
    output.backward(u)
    worst, passed = 0.0, True
    for x in tensors:
        if not x.requires_grad:
            continue
        grad = np.zeros(x.shape) if x.grad is None else np.asarray(x.grad, dtype=np.float64)
        flat = np.arange(x.size)
        if x.size > MAX_CHECKED:
            flat = rng.choice(x.size, size=MAX_CHECKED, replace=False)
        values = x.data.reshape(-1)  # a view of our float64 copy
        analytic = grad.reshape(-1)[flat]
        numeric = np.empty(len(flat))
        with no_grad():
            for n, j in enumerate(flat):
                original = values[j]
                values[j] = original + EPS
                plus = np.sum(u * np.asarray(function.apply(*tensors, **options).data, dtype=np.float64))
                values[j] = original - EPS
                minus = np.sum(u * np.asarray(function.apply(*tensors, **options).data, dtype=np.float64))
                values[j] = original
                numeric[n] = (plus - minus) / (2 * EPS)
        error = np.abs(analytic - numeric)
        if not np.all(error <= ATOL + RTOL * np.abs(numeric)):
            passed = False
        relative = np.linalg.norm(analytic - numeric) / (np.linalg.norm(numeric) + ATOL)
        worst = max(worst, float(relative) if np.isfinite(relative) else float("inf"))
    return worst, passed


def per_op_errors(fn, inputs):
    """Run fn on float64 copies of the inputs, re-check each op alone. Returns the output of
    that run and, for each of its graph's nodes in topological order, a dict with the relative
    error, whether it passed, and (when it failed) gradcheck's report of that op alone."""
    copies = [Tensor(np.array(x.data, dtype=np.float64), requires_grad=x.requires_grad)
              if isinstance(x, Tensor) and x.dtype.kind == "f" else x for x in inputs]
    with _RecordCalls() as recorder:
        output = fn(*copies)
    if not isinstance(output, Tensor) or output.grad_fn is None:
        raise ValueError("viz.html(check=(fn, *inputs)): fn(*inputs) must return a Tensor made by ops "
                         "from inputs that require grad")
    results = []
    for seed, node in enumerate(topological_order(output.grad_fn)):
        function, arrays, options = recorder.calls[node]
        # C order, so that _measure can perturb the values through a flat view
        tensors = [Tensor(np.ascontiguousarray(a, dtype=np.float64) if a.dtype.kind == "f" else a,
                          requires_grad=a.dtype.kind == "f" and wanted)
                   for a, wanted in zip(arrays, node.needs_input_grad)]
        if not any(t.requires_grad for t in tensors):
            results.append(None)
            continue
        relative, passed = _measure(function, tensors, options, seed)
        report = None
        if not passed:
            def alone(*ts, function=function, options=options):
                return function.apply(*ts, **options)

            alone.__name__ = function.__name__  # so gradcheck's report names the op
            for t in tensors:
                t.grad = None
            try:
                gradcheck(alone, *tensors, eps=EPS, atol=ATOL, rtol=RTOL)
                passed = True  # gradcheck's own sample passed: trust it
            except GradcheckError as error:
                report = str(error)
        results.append({"op": node.name, "created_at": debug.created_at(node), "relative_error": relative,
                        "passed": passed, "report": report, "shape": node.output_shape})
    return output, results
