"""Each op checked on its own: find_wrong_op, and the per-op check the backward page's check mode
shows. fn runs once on float64 copies of its inputs with every op's call recorded; then each op's
backward is compared with central differences of its own forward, on the inputs it received,
by mt.gradcheck's measure, so every report gives gradcheck's one relative error."""

import dataclasses
import inspect
import re
import sys

import numpy as np

from .. import autograd, backends
from ..gradcheck import Progress, measure
from ..sites import _short, created_at, module_path
from ..tensor import Tensor
from .observer import Tool


class _RecordCalls(Tool):
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
    module: str = None
    backward_at: str = None  # the file and function that hold the faulty backward

    def __str__(self):
        where = f" made at {self.created_at}" if self.created_at else ""
        module = f" in {self.module}" if self.module else ""
        code = f"\n  its backward: {self.backward_at}" if self.backward_at else ""
        return (f"the first op whose backward disagrees with finite differences: {self.op}{module}{where}{code}\n"
                f"{self.report}")


def backward_at(function):
    """Where a Function's backward is written: file:line and its name, and the kernel of the active
    backend it hands the work to, if it does (Softmax.backward calls softmax_backward)."""
    code = getattr(function.backward, "__code__", None)
    if code is None:
        return None
    where = f"{_short(code.co_filename)}:{code.co_firstlineno}: {function.__name__}.backward"
    try:
        source = inspect.getsource(function.backward)
    except (OSError, TypeError):
        return where
    for name in dict.fromkeys(re.findall(r"backends\.active\(\)\.(\w+)\(", source)):
        kernel = getattr(backends.active(), name, None)
        kernel = getattr(kernel, "py_func", kernel)  # a Numba kernel: its Python source
        try:
            where += f", which calls {_short(inspect.getsourcefile(kernel))}: {name}"
        except TypeError:
            where += f", which calls the backend's {name}"
    return where


@dataclasses.dataclass
class OpCheck:
    """One op of fn(*inputs) re-checked alone: node is its node in the float64 run, relative_error
    gradcheck's (mt.gradcheck.relative_error), report gradcheck's report when it failed."""

    op: str
    node: autograd.Context
    created_at: str
    module: str
    passed: bool
    relative_error: float
    report: str


def recorded_run(fn, inputs):
    """fn on float64 copies of the inputs, every op's call kept: (output, calls in forward order)."""
    copies = [Tensor(np.array(x.data, dtype=np.float64), requires_grad=x.requires_grad)
              if isinstance(x, Tensor) and x.dtype.kind == "f" else x for x in inputs]
    with _RecordCalls() as recorder:
        output = fn(*copies)
    return output, recorder.calls


def checked_ops(calls, eps=1e-6, atol=1e-5, rtol=1e-3, max_checked=400):
    """Each recorded call's backward against central differences of its own forward, on the inputs
    it received, with mt.gradcheck's own measurement: an OpCheck per op, in forward order (an op
    with no input that requires grad is skipped). A generator, so find_wrong_op stops at the first."""
    for function, ctx, arrays, options in calls:
        tensors = [Tensor(np.ascontiguousarray(a, dtype=np.float64) if a.dtype.kind == "f" else a,
                          requires_grad=a.dtype.kind == "f" and wanted)
                   for a, wanted in zip(arrays, ctx.needs_input_grad)]
        if not any(t.requires_grad for t in tensors):
            continue

        def alone(*ts, function=function, options=options):
            return function.apply(*ts, **options)

        alone.__name__ = function.__name__  # so gradcheck's report names the op
        measured = measure(alone, *tensors, eps=eps, atol=atol, rtol=rtol, max_checked=max_checked, sites=False,
                           kinks=True)  # an op meets its recorded inputs, kinks included (relu of relu's zeros)
        yield OpCheck(function.__name__, ctx, created_at(ctx), module_path(ctx), measured.passed,
                      measured.relative_error, measured.details)


def find_wrong_op(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Re-check every op of fn(*inputs) alone, in the order forward ran them: each op's backward
    against central differences of its own forward, on the inputs it received. Returns a WrongOp
    naming the first that disagrees (op, where it was made, its module, the worst element), or None."""
    _, calls = recorded_run(fn, inputs)
    progress = Progress("find_wrong_op", len(calls), "ops checked")
    for checked in checked_ops(calls, eps=eps, atol=atol, rtol=rtol):
        progress.tick(f" (now {checked.op}{' in ' + checked.module if checked.module else ''})")
        if not checked.passed:
            return WrongOp(checked.op, checked.created_at, checked.report, checked.module,
                           backward_at(checked.node.function))
    return None


def upstream_failure(fn, inputs, name, leaf, **tolerances):
    """For a failing leaf (a parameter checked by leaves="all"): whether an op's backward fails on
    its own elsewhere, where the leaf's error may come from. Every op is checked alone (what
    mt.debug.find_wrong_op does); '' when none but the ops that use the leaf fail."""
    _, calls = recorded_run(fn, inputs)
    for checked in checked_ops(calls, **tolerances):
        if checked.passed:
            continue
        if any(edge is leaf for edge in _sources(checked.node)):
            return ""  # the op that uses the leaf is wrong itself: the report above is its error
        where = f" in {checked.module}" if checked.module else ""
        made = f" (made at {checked.created_at})" if checked.created_at else ""
        return (f"\n  an op upstream of {name} fails on its own too: {checked.op}{where}{made}. A leaf's gradient "
                f"passes through every op between it and the output, so {name}'s error may be inherited from "
                f"it: fix {checked.op} first (mt.debug.find_wrong_op names it with its report)")
    return ""


def _sources(node):
    """The leaves a node uses, directly or through views (Transpose of a weight)."""
    for edge in node.edges:
        while type(edge) is autograd.Context and edge.function.returns_view:
            edge = edge.edges[0]
        yield edge


# mt.gradcheck's hook for a failing parameter (its module: the package's name `gradcheck` is the function)
sys.modules[measure.__module__].upstream_check = upstream_failure
