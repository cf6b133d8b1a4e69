"""Check a function's backward against central finite differences, in float64.

    mt.gradcheck(fn, x, w)          # True, or a GradcheckError that says what is wrong

For each input that requires grad, the analytic derivative (what backward
computes) is compared with a numeric one from central differences, whose
error is O(eps**2). Small problems compare the full Jacobian (one
backward per output element); larger ones project the output on a fixed
random direction u and compare d(u . f)/dx element by element (all elements,
or a random sample of `max_checked` of them).

    mt.gradcheck(fn, x, leaves="all")   # also every other leaf that requires grad (parameters)

checks the parameters fn uses without taking them as arguments too, each reported by its
name in the model (block.ln1.weight).
"""

import sys
from typing import NamedTuple

import numpy as np

from .autograd import no_grad, topological_order
from .sites import leaf_labels
from .tensor import Tensor


class GradcheckError(AssertionError):
    """The analytic gradient disagrees with finite differences. `details` is the report
    without the closing advice (what mt.debug.find_wrong_op shows for one op)."""

    def __init__(self, details, advice):
        super().__init__(f"{details}\n{advice}")
        self.details = details


class Measured(NamedTuple):
    """What measure found: passed, the relative error of the worst element (the one definition
    every report and the backward page use, see relative_error), and the report when it failed."""

    passed: bool
    relative_error: float
    details: str  # None when passed


def relative_error(analytic, numeric, atol, rtol):
    """|analytic - numeric| / (|numeric| + atol / rtol), elementwise; NaN counts as inf.

    The one relative error minitensor reports. It is the tolerance test rearranged: an element
    passes (|analytic - numeric| <= atol + rtol |numeric|) exactly when its relative error is at
    most rtol, and near 0, where |numeric| / |numeric| would blow up, atol / rtol keeps it finite."""
    error = np.abs(analytic - numeric)
    scale = np.abs(numeric) + (atol / rtol if rtol > 0 else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(error == 0, 0.0, error / scale)
    return np.where(np.isnan(ratio), np.inf, ratio)


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, full_jacobian_limit=4096, max_checked=400, seed=0,
              leaves="inputs"):
    """Return True when backward agrees with central differences; raise GradcheckError if not.

    fn          takes the inputs (Tensors; anything else is passed through) and returns a Tensor
    inputs      the Tensors that require grad are checked; copies in float64 are used
    eps         the finite-difference step
    atol, rtol  an element passes when |analytic - numeric| <= atol + rtol * |numeric|
    leaves      "inputs": the inputs only; "all": also every other leaf that requires grad and
                that the output depends on (a model's parameters that fn uses), switched to
                float64 during the check and restored after. The report names each checked
                tensor and lists the leaves that were not checked.
    The report ends with the call of mt.debug.find_wrong_op to paste, written with the names
    your code gives fn and the inputs.
    """
    measured = measure(fn, *inputs, eps=eps, atol=atol, rtol=rtol, full_jacobian_limit=full_jacobian_limit,
                       max_checked=max_checked, seed=seed, leaves=leaves)
    if not measured.passed:
        raise GradcheckError(measured.details, _advice(fn, inputs, sys._getframe(1)))
    return True


def measure(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, full_jacobian_limit=4096, max_checked=400, seed=0,
            leaves="inputs"):
    """gradcheck without raising: a Measured (passed, relative_error, details). mt.debug's
    per-op checks (find_wrong_op and the backward page's check mode, minitensor/debug/op_check.py)
    use it, so all report one number."""
    _check_tolerances(eps, atol, rtol)
    if leaves not in ("inputs", "all"):
        raise ValueError(f'gradcheck: leaves must be "inputs" or "all", got {leaves!r}')
    copies, checked = [], []  # checked: (name, tensor) of everything compared
    for position, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.dtype.kind == "f":
            # C order, so that _central_difference can perturb the values through a flat view
            copy = Tensor(np.array(x.data, dtype=np.float64, order="C"), requires_grad=x.requires_grad)
            if x.requires_grad:
                checked.append((f"input {position}", copy))
            copies.append(copy)
        else:
            copies.append(x)
    if not checked and leaves == "inputs":
        raise ValueError("gradcheck: no input requires grad; create the inputs with requires_grad=True")

    output = fn(*copies)
    if not isinstance(output, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, it returned a {type(output).__name__}")
    if not output.requires_grad:
        raise ValueError("gradcheck: fn's output does not depend on any input that requires grad")
    others = _other_leaves(output, [x for _, x in checked])
    # The other leaves (a model's parameters) get gradients from the backward calls below, and
    # with leaves="all" float64 values: both are put back afterwards.
    restore = [(leaf, leaf.data, leaf.grad) for _, leaf in others]
    try:
        if leaves == "all":
            for name, leaf in others:
                leaf.data, leaf.grad = np.array(leaf.data, dtype=np.float64, order="C"), None
                checked.append((name, leaf))
            others = []
            output = fn(*copies)  # again, now that the leaves are float64
        return _compare(fn, output, copies, checked, others, eps, atol, rtol, full_jacobian_limit, max_checked,
                        seed)
    finally:
        for leaf, data, grad in restore:
            leaf.data, leaf.grad = data, grad


def _other_leaves(output, inputs):
    """(name, leaf) of every leaf that requires grad, that output depends on and that is not
    one of inputs, named as mt.debug names it (block.ln1.weight), in the order found."""
    labels = leaf_labels(output)
    found, seen = [], {id(x) for x in inputs}
    for node in topological_order(output.grad_fn):
        for edge in node.edges:
            if isinstance(edge, Tensor) and edge.requires_grad and id(edge) not in seen:
                seen.add(id(edge))
                found.append((labels.get(id(edge)) or f"a leaf of shape {edge.shape}", edge))
    return found


def _compare(fn, output, copies, checked, unchecked, eps, atol, rtol, full_jacobian_limit, max_checked, seed):
    def evaluate():
        with no_grad():
            return np.array(fn(*copies).data, dtype=np.float64)  # a copy: the output may be a view of an input

    tensors = [x for _, x in checked]
    total = sum(x.size for x in tensors)
    rng = np.random.default_rng(seed)
    if output.size * total <= full_jacobian_limit:
        comparisons = _full_jacobian(output, tensors, evaluate, eps)
    else:
        comparisons = _projected(output, tensors, evaluate, eps, rng, max_checked)

    worst = None  # (relative error, the report's arguments) of the worst element of any input
    failed = False
    for index, analytic, numeric, describe in comparisons:
        allowed = atol + rtol * np.abs(numeric)
        error = np.abs(analytic - numeric)
        bad = ~(error <= allowed)  # also catches NaN
        failed = failed or bool(bad.any())
        ratios = relative_error(analytic, numeric, atol, rtol)
        if not ratios.size:
            continue
        at = np.unravel_index(np.argmax(ratios), ratios.shape)
        if worst is None or ratios[at] > worst[0]:
            name, x = checked[index]
            worst = (float(ratios[at]), (name, x, describe(at), analytic[at], numeric[at], int(bad.sum()), bad.size))
    if worst is None:
        return Measured(True, 0.0, None)
    if not failed:
        return Measured(True, worst[0], None)
    name, x, where, analytic, numeric, bad_count, total = worst[1]
    details = _report(fn, name, x, where, analytic, numeric, worst[0], atol, rtol, bad_count, total, output,
                      unchecked)
    return Measured(False, worst[0], details)


def _advice(fn, inputs, frame):
    """The call of find_wrong_op to paste, with the names the caller's code gives fn and the
    inputs (a placeholder where it gives none)."""
    def named(value):
        for scope in (frame.f_locals, frame.f_globals):
            for key, held in scope.items():
                if held is value:
                    return key
        owner = getattr(value, "__self__", None)  # MySwish.apply: a method of a class the code names
        if owner is not None:
            owner_name = named(owner)
            return owner_name and f"{owner_name}.{value.__name__}"
        return None

    fn_name = named(fn)
    arguments = [named(x) for x in inputs]
    if fn_name is not None and None not in arguments:
        call = f"mt.debug.find_wrong_op({', '.join([fn_name] + arguments)})"
        return f"  to find the op whose backward is wrong, run: {call}"
    shown = ", ".join([fn_name or "fn"] + [a or f"input{i}" for i, a in enumerate(arguments)])
    return (f"  to find the op whose backward is wrong: mt.debug.find_wrong_op({shown}), with the function "
            f"and the inputs you gave gradcheck (give {_name(fn)} a name to paste it as it is)")


def _check_tolerances(eps, atol, rtol):
    """eps must be a positive step (eps = 0 divides 0 by 0, a negative one flips the
    difference's sign); atol and rtol must not be negative (nothing could pass)."""
    if not (isinstance(eps, (int, float, np.integer, np.floating)) and 0 < eps < np.inf):
        raise ValueError(f"gradcheck: eps is the finite-difference step and must be a positive number, got eps={eps!r}")
    for name, value in (("atol", atol), ("rtol", rtol)):
        if not (isinstance(value, (int, float, np.integer, np.floating)) and 0 <= value < np.inf):
            raise ValueError(f"gradcheck: {name} must be a number >= 0, got {name}={value!r}")


def _full_jacobian(output, tensors, evaluate, eps):
    """Yield (index in tensors, analytic J, numeric J, describe) with J of shape (outputs, inputs)."""
    out_shape = output.shape
    for index, x in enumerate(tensors):
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

        yield index, analytic, numeric, describe


def _projected(output, tensors, evaluate, eps, rng, max_checked):
    """Compare d(u . f)/dx for a random u, on every element or a random sample of them."""
    u = rng.standard_normal(output.shape)
    for x in tensors:
        x.grad = None
    output.backward(u, retain_graph=True)

    def projected():
        return np.sum(u * evaluate())

    for index, x in enumerate(tensors):
        grad = x.grad if x.grad is not None else np.zeros(x.shape)
        flat = np.arange(x.size)
        if x.size > max_checked:
            flat = np.sort(rng.choice(x.size, size=max_checked, replace=False))
        analytic = grad.reshape(-1)[flat]
        numeric = np.array([_central_difference(x, j, projected, eps) for j in flat])

        def describe(worst, x=x, flat=flat):
            in_index = np.unravel_index(flat[worst[0]], x.shape)
            return f"d (u . output) / d input{_format_index(in_index)}, u a fixed random direction"

        yield index, analytic, numeric, describe


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


def _name(fn):
    return getattr(fn, "__name__", type(fn).__name__)


def _report(fn, checked_name, x, where, analytic, numeric, relative, atol, rtol, bad_count, total, output,
            unchecked):
    ops = []
    for node in topological_order(output.grad_fn):
        if node.name not in ops:
            ops.append(node.name)
    not_checked = ""
    if unchecked:
        names = ", ".join(name for name, _ in unchecked)
        not_checked = f"\n  not checked (leaves fn uses besides its inputs; leaves=\"all\" checks them): {names}"
    return (
        f"gradcheck failed for {checked_name} of {_name(fn)} (shape {x.shape}):\n"
        f"  worst element: {where}\n"
        f"  analytic (backward):         {analytic:.8g}\n"
        f"  numeric (finite difference): {numeric:.8g}\n"
        f"  absolute error {abs(analytic - numeric):.3g} (allowed: atol={atol:g} + rtol={rtol:g} * |numeric|)\n"
        f"  relative error {relative:.3g} = |analytic - numeric| / (|numeric| + atol/rtol), "
        f"at most rtol={rtol:g} to pass\n"
        f"  {bad_count} of {total} checked derivatives are off.\n"
        f"  ops in the graph, output first: {', '.join(ops)}"
        f"{not_checked}"
    )
