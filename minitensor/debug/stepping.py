"""Stepping through backward: backward_steps (a generator, one node's backward per step) and
trace (one printed record per node as loss.backward() runs)."""

import dataclasses
import sys

import numpy as np

from .. import autograd
from ..autograd import walk
from ..sites import created_at, leaf_labels, models_of, module_path, parameter_names
from .observer import Tool
from .show import input_labels, step_text


@dataclasses.dataclass
class Step:
    """One node's backward: what came in, what went out, what it had saved. input_labels names
    where each input came from: the label of a leaf (x, block.ln1.weight), the op that made it,
    or None. input_names and saved_names are the names the op gives its inputs and saved arrays
    (q, k, v); module is the path of the module that made the node (block.attn), or None."""

    index: int
    op: str
    node: autograd.Context
    created_at: str
    label: str
    grad_output: np.ndarray
    grad_inputs: tuple  # one per input, summed to the input's shape (None where not needed)
    saved: tuple
    input_labels: tuple
    input_names: tuple = ()
    saved_names: tuple = ()
    module: str = None

    def __str__(self):
        return step_text(self.index, self.node, self.grad_output, self.grad_inputs, self.input_labels)


def backward_steps(loss, grad=None, retain_graph=False):
    """Run backward one node at a time: a generator of Steps. Run to the end, it leaves
    exactly the gradients loss.backward() leaves; stop early and the rest is not computed."""
    labels = leaf_labels(loss)
    for index, (node, grad_output, grad_inputs) in enumerate(walk(loss, grad, retain_graph)):
        yield Step(index, node.name, node, created_at(node), node.label, grad_output, grad_inputs,
                   node.saved_arrays, input_labels(node, labels), node.input_names, node.saved_names,
                   module_path(node))


class trace(Tool):
    """`with mt.debug.trace(): loss.backward()` prints one line per node as backward runs: the op,
    where it was made, the shapes and norms of the gradients, where each goes (a leaf by name:
    x, block.ln1.weight), and every broadcast reduction."""

    def __init__(self, file=None):
        self.file = file
        self.index = 0
        self.names = {}  # id(parameter) -> its name in the model, filled as models are met

    def _labels(self, node):
        for model in models_of([node]):
            if id(model) not in self.names:
                self.names[id(model)] = parameter_names([model])
        labels = {}
        for edge in node.edges:
            if edge is not None and type(edge) is not autograd.Context:
                labels[id(edge)] = edge.name or next(
                    (names[id(edge)] for names in self.names.values() if id(edge) in names), None)
        return input_labels(node, labels)

    def after_backward(self, node, grad_output, grad_inputs, summed):
        out = self.file or sys.stdout
        print(step_text(self.index, node, grad_output, summed, self._labels(node)), file=out)
        for position, (raw, final) in enumerate(zip(grad_inputs, summed)):
            if raw is not None and final is not None and raw.shape != final.shape:
                axes = autograd.summed_axes(raw.shape, final.shape)
                print(f"       input {position}: summed axes {axes}: {raw.shape} -> {final.shape}", file=out)
        self.index += 1
