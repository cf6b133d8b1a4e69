"""Check a function's backward against central finite differences, in float64.

    mt.gradcheck(fn, x, w)          # True, or a GradcheckError that says what is wrong

For each input that requires grad, the analytic derivative (what backward
computes) is compared with a numeric one from central differences, whose
error is O(eps**2). Small problems compare the full Jacobian (one
backward per output element); larger ones project the output on a fixed
random direction u and compare d(u . f)/dx element by element (all elements,
or a random sample of `max_checked` of them).
"""

import numpy as np

from .autograd import no_grad, topological_order
from .tensor import Tensor


class GradcheckError(AssertionError):
    """The analytic gradient disagrees with finite differences."""


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, full_jacobian_limit=4096, max_checked=400, seed=0):
    """Return True when backward agrees with central differences; raise GradcheckError if not.

    fn          takes the inputs (Tensors; anything else is passed through) and returns a Tensor
    inputs      the Tensors that require grad are checked; copies in float64 are used
    eps         the finite-difference step
    atol, rtol  an element passes when |analytic - numeric| <= atol + rtol * |numeric|
    """
    copies, checked = [], []
    for position, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.dtype.kind == "f":
            # C order, so that _central_difference can perturb the values through a flat view
            copy = Tensor(np.array(x.data, dtype=np.float64, order="C"), requires_grad=x.requires_grad)
            if x.requires_grad:
                checked.append(position)
            copies.append(copy)
        else:
            copies.append(x)
    if not checked:
        raise ValueError("gradcheck: no input requires grad; create the inputs with requires_grad=True")

    output = fn(*copies)
    if not isinstance(output, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, it returned a {type(output).__name__}")
    if not output.requires_grad:
        raise ValueError("gradcheck: fn's output does not depend on any input that requires grad")

    def evaluate():
        with no_grad():
            return np.array(fn(*copies).data, dtype=np.float64)  # a copy: the output may be a view of an input

    total = sum(copies[p].size for p in checked)
    rng = np.random.default_rng(seed)
    if output.size * total <= full_jacobian_limit:
        comparisons = _full_jacobian(output, copies, checked, evaluate, eps)
    else:
        comparisons = _projected(output, copies, checked, evaluate, eps, rng, max_checked)

    for position, analytic, numeric, describe in comparisons:
        allowed = atol + rtol * np.abs(numeric)
        error = np.abs(analytic - numeric)
        bad = ~(error <= allowed)  # also catches NaN
        if bad.any():
            worst = np.unravel_index(np.argmax(np.where(np.isnan(error), np.inf, error / allowed)), error.shape)
            raise GradcheckError(
                _report(fn, position, copies[position], describe(worst), analytic[worst], numeric[worst],
                        atol, rtol, int(bad.sum()), bad.size, output)
            )
    return True


def _full_jacobian(output, copies, checked, evaluate, eps):
    """Yield (input position, analytic J, numeric J, describe) with J of shape (outputs, inputs)."""
    out_shape = output.shape
    for position in checked:
        x = copies[position]
        analytic = np.zeros((output.size, x.size))
        for row in range(output.size):
            x.grad = None
            one_hot = np.zeros(output.size)
            one_hot[row] = 1.0
            output.backward(one_hot.reshape(out_shape), retain_graph=True)
            if x.grad is not None:
                analytic[row] = x.grad.reshape(-1)
        numeric = np.zeros_like(analytic)
        for column in range(x.size):
            numeric[:, column] = _central_difference(x, column, evaluate, eps).reshape(-1)
        x.grad = None

        def describe(worst, x=x):
            out_index = np.unravel_index(worst[0], out_shape) if out_shape else ()
            in_index = np.unravel_index(worst[1], x.shape)
            return f"d output{_format_index(out_index)} / d input{_format_index(in_index)}"

        yield position, analytic, numeric, describe


def _projected(output, copies, checked, evaluate, eps, rng, max_checked):
    """Compare d(u . f)/dx for a random u, on every element or a random sample of them."""
    u = rng.standard_normal(output.shape)
    for p in checked:
        copies[p].grad = None
    output.backward(u, retain_graph=True)

    def projected():
        return np.sum(u * evaluate())

    for position in checked:
        x = copies[position]
        grad = x.grad if x.grad is not None else np.zeros(x.shape)
        flat = np.arange(x.size)
        if x.size > max_checked:
            flat = np.sort(rng.choice(x.size, size=max_checked, replace=False))
        analytic = grad.reshape(-1)[flat]
        numeric = np.array([_central_difference(x, j, projected, eps) for j in flat])

        def describe(worst, x=x, flat=flat):
            in_index = np.unravel_index(flat[worst[0]], x.shape)
            return f"d (u . output) / d input{_format_index(in_index)}, u a fixed random direction"

        yield position, analytic, numeric, describe


def _format_index(index):
    """(1, 2) -> '[1, 2]'; () -> '' (a scalar has no index)."""
    return f"[{', '.join(str(int(i)) for i in index)}]" if len(index) else ""


def _central_difference(x, flat_index, evaluate, eps):
    """d f / d x_j from two evaluations of f around x (the homework task
    gradcheck_central_difference), leaving x as it was."""
    # BEGIN SOLUTION gradcheck_central_difference
    # (f(x + eps e_j) - f(x - eps e_j)) / (2 eps), restoring x afterwards.
    values = x.data.reshape(-1)  # a view: x.data is a float64 copy we own
    original = values[flat_index]
    values[flat_index] = original + eps
    plus = evaluate()
    values[flat_index] = original - eps
    minus = evaluate()
    values[flat_index] = original
    return (plus - minus) / (2 * eps)
    # END SOLUTION


def _report(fn, position, x, where, analytic, numeric, atol, rtol, bad_count, total, output):
    name = getattr(fn, "__name__", type(fn).__name__)
    ops = []
    for node in topological_order(output.grad_fn):
        if node.name not in ops:
            ops.append(node.name)
    return (
        f"gradcheck failed for input {position} of {name} (shape {x.shape}):\n"
        f"  worst element: {where}\n"
        f"  analytic (backward):         {analytic:.8g}\n"
        f"  numeric (finite difference): {numeric:.8g}\n"
        f"  absolute error {abs(analytic - numeric):.3g}, relative error "
        f"{abs(analytic - numeric) / abs(numeric) if numeric else float('inf'):.3g} "
        f"(allowed: atol={atol:g} + rtol={rtol:g} * |numeric|)\n"
        f"  {bad_count} of {total} checked derivatives are off.\n"
        f"  ops in the graph, output first: {', '.join(ops)}\n"
        f"  to find the op whose backward is wrong: mt.debug.find_wrong_op({name}, *inputs) "
        f"re-checks each op alone"
    )
