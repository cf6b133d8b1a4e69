"""Debugging backward: step through it node by node, trace it, break on an op, find the
first NaN, find the op whose backward is wrong.

    steps = mt.debug.backward_steps(loss)       # a generator: one node's backward per step
    with mt.debug.trace(): loss.backward()      # one printed line per node
    with mt.debug.break_on(op="Softmax"):       # pdb inside Softmax's backward
        loss.backward()
    with mt.debug.detect_anomaly():             # names the op that made the first NaN / Inf
        loss = model(x).sum(); loss.backward()
    mt.debug.find_wrong_op(fn, x, w)            # which op's backward disagrees with finite differences

Where each op was made in your code (`file:line`) is recorded while any of these tools is
active (around the forward pass too), or inside `with mt.debug.record_sites():`. It is not
recorded otherwise: looking up the caller's frame costs about as much as a small op.
"""

import dataclasses
import os
import sys

import numpy as np

from . import autograd
from .autograd import walk

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_tools = []  # the active tools, innermost last


def creation_site():
    """(file, line) of the first frame outside minitensor: where your code made the op.
    Formatted as "file:line: source" only when asked for (Context.created_at)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


class _Dispatcher:
    """What autograd calls while tools are active: it forwards to each tool in turn."""

    @staticmethod
    def after_forward(function, ctx, arrays, options, output):
        if ctx._site is None:
            ctx._site = creation_site()
        for tool in list(_tools):
            tool.after_forward(function, ctx, arrays, options, output)

    @staticmethod
    def call_backward(node, grad_output):
        for tool in reversed(_tools):
            if tool.wants_to_stop(node, grad_output):
                return _debug_backward(node, grad_output)
        return node.function.backward(node, grad_output)

    @staticmethod
    def after_backward(node, grad_output, grad_inputs, summed):
        for tool in list(_tools):
            tool.after_backward(node, grad_output, grad_inputs, summed)


def _debug_backward(node, grad_output):
    """Run node's backward under pdb. In scope as named locals: node, op, created_at,
    grad_output, saved (the arrays forward saved). `step` enters the op's backward."""
    op = node.name  # noqa: F841 (named locals for you to print)
    created_at = node.created_at  # noqa: F841
    saved = node._saved  # noqa: F841
    breakpoint()  # mt.debug.break_on stopped here: `p grad_output`, `p saved`, `step` into backward
    grad_inputs = node.function.backward(node, grad_output)
    return grad_inputs


class _Tool:
    """Base of the context managers: register while active; do nothing by default."""

    def __enter__(self):
        _tools.append(self)
        autograd._observer = _Dispatcher
        return self

    def __exit__(self, *exc_info):
        _tools.remove(self)
        if not _tools:
            autograd._observer = None
        return False

    def after_forward(self, function, ctx, arrays, options, output):
        pass

    def wants_to_stop(self, node, grad_output):
        return False

    def after_backward(self, node, grad_output, grad_inputs, summed):
        pass


class record_sites(_Tool):
    """`with mt.debug.record_sites():` remember where each op was made (file:line: source)."""


# ----------------------------------------------------------------------------
# Stepping
# ----------------------------------------------------------------------------


@dataclasses.dataclass
class Step:
    """One node's backward: what came in, what went out, what it had saved."""

    index: int
    op: str
    node: autograd.Context
    created_at: str
    label: str
    grad_output: np.ndarray
    grad_inputs: tuple  # one per input, summed to the input's shape (None where not needed)
    saved: tuple

    def __str__(self):
        return _describe(self.index, self.node, self.grad_output, self.grad_inputs)


def backward_steps(loss, grad=None, retain_graph=False):
    """Run backward one node at a time: a generator of Steps. Run to the end, it leaves
    exactly the gradients loss.backward() leaves; stop early and the rest is not computed."""
    for index, (node, grad_output, grad_inputs) in enumerate(walk(loss, grad, retain_graph)):
        yield Step(index, node.name, node, node.created_at, node.label, grad_output, grad_inputs, node._saved)


# ----------------------------------------------------------------------------
# Tracing
# ----------------------------------------------------------------------------


def _norm(array):
    return float(np.sqrt(np.sum(np.asarray(array, dtype=np.float64) ** 2)))


def _describe(index, node, grad_output, summed):
    label = f" {node.label!r}" if node.label else ""
    where = f"  [{node.created_at}]" if node.created_at else ""
    inputs = ", ".join("-" if g is None else f"{g.shape} |{_norm(g):.3g}|" for g in summed)
    return (f"{index:4d} {node.name}{label}{where}\n"
            f"       grad out {grad_output.shape} |{_norm(grad_output):.3g}|  ->  grad in {inputs}")


class trace(_Tool):
    """`with mt.debug.trace(): loss.backward()` prints one line per node as backward runs: the op,
    where it was made, the shapes and norms of the gradients, and every broadcast reduction."""

    def __init__(self, file=None):
        self.file = file
        self.index = 0

    def after_backward(self, node, grad_output, grad_inputs, summed):
        out = self.file or sys.stdout
        print(_describe(self.index, node, grad_output, summed), file=out)
        for position, (raw, final) in enumerate(zip(grad_inputs, summed)):
            if raw is not None and final is not None and raw.shape != final.shape:
                axes = autograd.summed_axes(raw.shape, final.shape)
                print(f"       input {position}: summed axes {axes}: {raw.shape} -> {final.shape}", file=out)
        self.index += 1


# ----------------------------------------------------------------------------
# Breaking
# ----------------------------------------------------------------------------


class break_on(_Tool):
    """`with mt.debug.break_on(op="Softmax"): loss.backward()` calls breakpoint() inside each
    matching node's backward, with `grad_output`, `saved`, `node`, `op` and `created_at` as
    named locals. Every condition given must hold: op (the Function's name), label (a tensor's
    .name), nan=True (the incoming gradient has a NaN or Inf), grad_norm_above (its norm)."""

    def __init__(self, op=None, label=None, nan=False, grad_norm_above=None):
        if op is None and label is None and not nan and grad_norm_above is None:
            raise ValueError("break_on: give op=, label=, nan=True or grad_norm_above=")
        self.op, self.label, self.nan, self.grad_norm_above = op, label, nan, grad_norm_above

    def wants_to_stop(self, node, grad_output):
        if self.op is not None and node.name != self.op:
            return False
        if self.label is not None and node.label != self.label:
            return False
        if self.nan and np.all(np.isfinite(grad_output)):
            return False
        if self.grad_norm_above is not None and not _norm(grad_output) > self.grad_norm_above:
            return False
        return True


# ----------------------------------------------------------------------------
# Anomalies
# ----------------------------------------------------------------------------


class AnomalyError(FloatingPointError):
    """An op produced NaN or Inf from finite inputs."""


def _bad(array):
    array = np.asarray(array)
    return array.dtype.kind in "fc" and not np.all(np.isfinite(array))


def _what(array):
    array = np.asarray(array)
    kinds = [name for name, mask in (("nan", np.isnan(array)), ("inf", np.isinf(array))) if mask.any()]
    count = int((~np.isfinite(array)).sum())
    return f"{' and '.join(kinds)} ({count} of {array.size} values)"


class detect_anomaly(_Tool):
    """`with mt.debug.detect_anomaly():` around forward and backward: the first op whose output
    (forward) or input gradient (backward) holds NaN or Inf while everything it was given was
    finite raises AnomalyError naming that op, where it was made, and the shapes. The ops that
    merely pass a NaN on are not blamed."""

    def after_forward(self, function, ctx, arrays, options, output):
        if _bad(output) and not any(_bad(a) for a in arrays):
            shapes = ", ".join(str(np.shape(a)) for a in arrays)
            raise AnomalyError(
                f"detect_anomaly: {function.__name__}'s forward produced {_what(output)} in its output of "
                f"shape {np.shape(output)} from finite inputs of shapes {shapes}"
                + (f"\n  made at {ctx.created_at}" if ctx.created_at else "")
            )

    def after_backward(self, node, grad_output, grad_inputs, summed):
        if _bad(grad_output):
            return  # passed on from an op already checked
        for position, grad in enumerate(summed):
            if grad is not None and _bad(grad):
                raise AnomalyError(
                    f"detect_anomaly: {node.name}.backward produced {_what(grad)} in the gradient of its "
                    f"input {position} (shape {grad.shape}) from a finite incoming gradient of shape "
                    f"{grad_output.shape}" + (f"\n  made at {node.created_at}" if node.created_at else "")
                )


# ----------------------------------------------------------------------------
# Finding the wrong op
# ----------------------------------------------------------------------------


class _RecordCalls(_Tool):
    """Keep each node's inputs and options, so its backward can be re-checked alone."""

    def __init__(self):
        self.calls = []  # (function, ctx, input arrays, options), in forward order

    def after_forward(self, function, ctx, arrays, options, output):
        self.calls.append((function, ctx, [np.array(a, copy=True) for a in arrays], dict(options)))


@dataclasses.dataclass
class WrongOp:
    op: str
    created_at: str
    report: str

    def __str__(self):
        where = f" made at {self.created_at}" if self.created_at else ""
        return f"the first op whose backward disagrees with finite differences: {self.op}{where}\n{self.report}"


def find_wrong_op(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Re-check every op of fn(*inputs) alone, in the order forward ran them: each op's backward
    against central differences of its own forward, on the inputs it received. Returns a WrongOp
    naming the first that disagrees (op, where it was made, the worst element), or None."""
    from .gradcheck import GradcheckError, gradcheck
    from .tensor import Tensor

    copies = [Tensor(np.array(x.data, dtype=np.float64), requires_grad=x.requires_grad)
              if isinstance(x, Tensor) and x.dtype.kind == "f" else x for x in inputs]
    with _RecordCalls() as recorder:
        fn(*copies)
    for function, ctx, arrays, options in recorder.calls:
        tensors = [Tensor(a.astype(np.float64) if a.dtype.kind == "f" else a,
                          requires_grad=a.dtype.kind == "f" and wanted)
                   for a, wanted in zip(arrays, ctx.needs_input_grad)]
        if not any(t.requires_grad for t in tensors):
            continue

        def alone(*ts, function=function, options=options):
            return function.apply(*ts, **options)

        alone.__name__ = function.__name__  # so gradcheck's report names the op
        try:
            gradcheck(alone, *tensors, eps=eps, atol=atol, rtol=rtol)
        except GradcheckError as error:
            return WrongOp(function.__name__, ctx.created_at, str(error))
    return None
