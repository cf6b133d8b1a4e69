"""Anomalies: detect_anomaly names the first op that made a NaN (forward) or a NaN or Inf
(backward) from inputs without one, where it was made and the shapes."""

import weakref

import numpy as np

from .. import autograd, grad_mode
from ..sites import created_at, module_path
from .observer import Tool
from .show import not_finite_text


class AnomalyError(FloatingPointError):
    """An op made a NaN in the forward pass, or a NaN or Inf in the backward pass, from inputs
    without one."""


def _has_nan(array):
    array = np.asarray(array)
    return array.dtype.kind in "fc" and bool(np.isnan(array).any())


def _not_finite(array):
    array = np.asarray(array)
    return array.dtype.kind in "fc" and not np.all(np.isfinite(array))


def _made_at(node):
    where = created_at(node)
    module = module_path(node)
    return (f"\n  made at {where}" if where else "") + (f"\n  in module {module}" if module else "")


class detect_anomaly(Tool):
    """`with mt.debug.detect_anomaly():` around forward and backward raises AnomalyError naming
    the first op that made a bad value, where it was made, and the shapes. The rule:

    forward   a NaN in an op's output while its inputs had none. An infinity is allowed: a
              mask puts -inf in the scores on purpose (masked_fill(mask, float("-inf"))), and
              softmax turns it into an exact 0. But a softmax row or an attention query with
              every entry -inf or hidden is reported: minitensor gives it zero weights (a zero
              output, no gradient) where torch.softmax gives NaN, and a padding mask that hides
              everything is a bug to see, not to train through.
    backward  a NaN or Inf in the gradient an op's backward gives an input while the gradient
              it received was finite (PyTorch's anomaly mode checks this side only).

    The ops that merely pass a bad value on are not blamed. Around backward() alone (the forward
    ran outside the block), a bad gradient from an op whose saved values already held a NaN is
    traced back through the graph to the first op in forward order that saved one, and the
    error says to wrap the forward too."""

    def __init__(self):
        self.seen = weakref.WeakSet()  # the nodes whose forward this tool checked

    def after_forward(self, function, ctx, arrays, options, output):
        self.seen.add(ctx)
        empty = _rows_with_nothing_visible(function, ctx, output)
        if empty:
            rows, total, index = empty
            shapes = ", ".join(str(np.shape(a)) for a in arrays)
            recorded = grad_mode.enabled and True in ctx.needs_input_grad
            raise AnomalyError(
                f"detect_anomaly: {function.__name__}'s forward met {rows} of {total} rows (the first at "
                f"index {index}) whose entries are all -inf or hidden by the mask, in inputs of shapes "
                f"{shapes}. minitensor gives such a row zero weights and no gradient (torch.softmax "
                f"gives NaN); a mask that hides every key of a query is usually a bug (a padding "
                f"mask built the wrong way round? a causal mask, or is_causal=True, that hides the "
                f"diagonal too, so that query 0 sees no key?)" + (_made_at(ctx) if recorded else "")
            )
        if _has_nan(output) and not any(_has_nan(a) for a in arrays):
            shapes = ", ".join(str(np.shape(a)) for a in arrays)
            recorded = grad_mode.enabled and True in ctx.needs_input_grad
            raise AnomalyError(
                f"detect_anomaly: {function.__name__}'s forward produced {not_finite_text(output)} in its output of "
                f"shape {np.shape(output)} from inputs of shapes {shapes} without NaN"
                + (_made_at(ctx) if recorded else "")
            )

    def after_backward(self, node, grad_output, grad_inputs, summed):
        if _not_finite(grad_output):
            return  # passed on from an op already checked
        for position, grad in enumerate(summed):
            if grad is not None and _not_finite(grad):
                message = (
                    f"detect_anomaly: {node.name}.backward produced {not_finite_text(grad)} in the gradient of its "
                    f"input {position} (shape {grad.shape}) from a finite incoming gradient of shape "
                    f"{grad_output.shape}" + _made_at(node))
                if node not in self.seen and any(_has_nan(a) for a in node.saved_arrays):
                    message += _forward_outside(node)
                raise AnomalyError(message)


def _rows_with_nothing_visible(function, ctx, output):
    """(how many, of how many, the first's index) for the rows a Softmax or Attention forward
    found with every entry -inf or hidden, or None. Softmax: a row of all-zero weights (a row
    with anything visible has a weight of exactly 1 at its maximum before normalising, so it
    cannot be all zeros). Attention: a query whose saved running maximum is -inf."""
    name = function.__name__
    if name == "Softmax":
        if output.ndim == 0 or output.shape[ctx.axis] == 0:
            return None
        empty = np.all(np.asarray(output) == 0, axis=ctx.axis)
    elif name == "Attention" and ctx.saved_arrays:
        row_max = np.asarray(ctx.saved_arrays[-1][0])  # softmax_stats = (row_max, row_sum), per query
        empty = np.isneginf(row_max)
    else:
        return None
    if not empty.any():
        return None
    first = tuple(int(i) for i in np.argwhere(empty)[0])
    return int(empty.sum()), int(empty.size), first


def _inline(made_at):
    return made_at.replace("\n  made at", ",").replace("\n  in module", ", in module")


def _forward_outside(node):
    """The hint when the NaN was made by a forward that detect_anomaly did not watch."""
    in_forward_order = list(reversed(autograd.topological_order(node)))
    first = next((n for n in in_forward_order if any(_has_nan(a) for a in n.saved_arrays)), node)
    producers = [edge for edge in first.edges if type(edge) is autograd.Context]
    lines = [f"\n  {node.name}'s saved values already held NaN: it came from the forward pass, which "
             f"ran outside detect_anomaly, so the op that made it was not checked."]
    lines.append(f"  The first op (in forward order) whose saved values hold NaN: {first.name}"
                 + _inline(_made_at(first)))
    for producer in producers:
        lines.append(f"  its input came from {producer.name}" + _inline(_made_at(producer)))
    lines.append("  To name the op for certain, run the forward inside the block too:\n"
                 "      with mt.debug.detect_anomaly():\n"
                 "          loss = f(x)\n"
                 "          loss.backward()")
    return "\n".join(lines)
