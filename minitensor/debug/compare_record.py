"""One side of mt.debug.compare: run a model forward and backward and keep, for every node, what
the comparison needs, as plain values: the op, the module that made it (its path inside the
model: attn.w_q), the line of your code, the input arrays and which node made each, the output,
and in backward the gradient that reached the node and the ones it passed on.

Records are plain dicts of arrays, strings and numbers, so that the homework's worker can send
them to the grader as they are (homework/worker.py's wire format). In this process a
record also keeps the op's Function and its options (axis, mask, ...), the two things compare
needs to run the node again on the other side's inputs; `plain(records)` drops them.
"""

import numpy as np

from .. import autograd, grad_mode
from ..nn.module import Module
from ..sites import created_at, module_path
from ..tensor import Tensor
from .observer import Tool

IN_PROCESS_ONLY = ("function", "options")


class _Recorder(Tool):
    """Watches one forward and backward: a record per node, in the order forward made them."""

    def __init__(self, model):
        self.model = model
        self.records = []
        self.index_of = {}  # id(ctx) -> its record's index
        self.nodes = []  # the Contexts, kept alive while recording so that ids stay unique
        self.paths = _module_names(model)

    def after_forward(self, function, ctx, arrays, options, output):
        if not (True in ctx.needs_input_grad and grad_mode.is_grad_enabled()):
            return  # no node is recorded for this call
        self.index_of[id(ctx)] = len(self.records)
        self.nodes.append(ctx)
        self.records.append({
            "op": function.__name__, "function": function, "options": dict(options),
            "inputs": [np.array(a, copy=True) for a in arrays], "output": np.array(output, copy=True),
            "input_from": None, "module": None, "site": None, "grad_output": None, "grad_inputs": None,
        })

    def after_backward(self, node, grad_output, grad_inputs, summed):
        index = self.index_of.get(id(node))
        if index is not None:
            record = self.records[index]
            record["grad_output"] = np.array(grad_output, copy=True)
            record["grad_inputs"] = [None if g is None else np.array(g, copy=True) for g in summed]

    def finish(self, leaf_names):
        """Fill what is known only once forward has returned: edges, module paths, sites."""
        for ctx, record in zip(self.nodes, self.records):
            record["input_from"] = [_source(edge, self.index_of, leaf_names) for edge in ctx.edges]
            record["module"] = _relative_path(module_path(ctx), self.paths)
            record["site"] = created_at(ctx) or ""


def _source(edge, index_of, leaf_names):
    """Where an input came from: a node's index (an int), a leaf's name ("x", "attn.w_q.weight"),
    or "" for an input that needs no gradient (a constant)."""
    if type(edge) is autograd.Context:
        return index_of.get(id(edge), "")
    if edge is None:
        return ""
    return leaf_names.get(id(edge), "")


def _module_names(model):
    """The model's submodule names, longest first (a node's path ends with one of them)."""
    if not isinstance(model, Module):
        return []
    return sorted((name for name, _ in model.named_modules() if name), key=len, reverse=True)


def _relative_path(path, names):
    """A module path as seen from inside the model: the name your code gives the model dropped
    (student.attn -> attn), so that the two sides' paths can be compared; "" for the model's own
    forward and for code no Module ran."""
    if not path:
        return ""
    for name in names:
        if path == name or path.endswith("." + name):
            return name
    return ""


def record(model, inputs, upstream=None, seed=0, expected_shape=None):
    """Run model(*inputs) forward, then backward from `upstream` (drawn from a seeded normal of the
    output's shape when None; never all ones, which hides an indexing bug), and return
    (records, output array, upstream, {input or parameter name: its gradient}). With expected_shape
    (the model's, when this is the reference), an output of another shape is refused before backward."""
    tensors = [fresh_leaf(a) for a in inputs]
    leaf_names = {id(t): f"input {i}" for i, t in enumerate(tensors) if isinstance(t, Tensor)}
    if isinstance(model, Module):
        for name, parameter in model.named_parameters():
            parameter.grad = None
            leaf_names[id(parameter)] = name
    recorder = _Recorder(model)
    with recorder:
        output = model(*tensors)
        if not isinstance(output, Tensor):
            raise TypeError(f"compare: the model returned {type(output).__name__}; it must return one Tensor")
        if expected_shape is not None and output.shape != tuple(expected_shape):
            raise ValueError(f"compare: the model's output has shape {tuple(expected_shape)}, the reference's "
                             f"{output.shape}; they must have the same shape to be compared")
        if upstream is None:
            upstream = np.random.default_rng(seed).standard_normal(output.shape).astype(output.dtype)
        if output.requires_grad:
            output.backward(np.asarray(upstream, dtype=output.dtype))
    recorder.finish(leaf_names)
    grads = {f"input {i}": t.grad for i, t in enumerate(tensors) if isinstance(t, Tensor) and t.grad is not None}
    if isinstance(model, Module):
        grads.update({name: p.grad for name, p in model.named_parameters() if p.grad is not None})
    return recorder.records, output.data, np.asarray(upstream), grads


def fresh_leaf(value):
    """A new leaf for an array or a Tensor (each side gets its own, so no gradient is shared); a
    floating array requires grad. Anything else (a mask, None, a number) is passed as it is."""
    if isinstance(value, Tensor):
        return Tensor(value.data.copy(), requires_grad=value.requires_grad)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return Tensor(value.copy(), requires_grad=True)
    return value


def plain(records):
    """The records without what only this process can use (the Function, the options): what the
    homework's worker sends."""
    return [{key: value for key, value in r.items() if key not in IN_PROCESS_ONLY} for r in records]
