"""Breaking in backward: break_on stops in pdb inside the backward of each node that matches
(an op, a label, a NaN or Inf, a large gradient); observer._debug_backward is where it lands."""

import sys

import numpy as np

from .. import autograd
from ..sites import module_path
from .observer import Tool
from .show import grad_norm, not_finite_text


def known_ops():
    """The names of every Function subclass defined so far (the ops break_on can stop in)."""
    names, stack = set(), [autograd.Function]
    while stack:
        for subclass in stack.pop().__subclasses__():
            names.add(subclass.__name__)
            stack.append(subclass)
    return sorted(names)


class break_on(Tool):
    """`with mt.debug.break_on(op="Softmax"): loss.backward()` calls breakpoint() inside each
    matching node's backward. Every condition given must hold: op (the Function's name, as in
    the trace: "Softmax"), label (a tensor's .name), module (a module path, as the tools print it:
    "blocks.1.ln1" stops in that module and its submodules, with or without the model's own name in
    front), nan=True (the incoming gradient, or a gradient
    the node's backward produces for an input, has a NaN or Inf), grad_norm_above (the norm of
    either is above it).

    pdb stops in _debug_backward (minitensor/debug/observer.py), one line above the call of the
    op's backward, with the named locals grad (the incoming gradient, the name every op's backward
    gives it), saved (by name), node (`p node`), op, made_at (the line of your code that made the
    node), module and reason (which gradient matched). `step` twice enters the op's backward. A
    block that ends without a single stop prints so."""

    def __init__(self, op=None, label=None, nan=False, grad_norm_above=None, file=None, module=None):
        if op is None and label is None and module is None and not nan and grad_norm_above is None:
            raise ValueError("break_on: give op=, label=, module=, nan=True or grad_norm_above=")
        if module is not None and (not isinstance(module, str) or not module.strip(".")):
            raise ValueError(f"break_on: module must be a module path such as 'blocks.1.ln1', got {module!r}")
        self.module = module
        if op is not None and op not in known_ops():
            known = known_ops()
            close = [name for name in known if name.lower() == str(op).lower()]
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"break_on: no op is called {op!r}.{hint} The ops: {', '.join(known)}")
        self.op, self.label, self.nan, self.grad_norm_above = op, label, nan, grad_norm_above
        self.file = file
        self.stops = 0
        self.reason = None  # why it stopped last, for pdb

    def wants_to_stop(self, node, grad_output):
        if self.op is not None and node.name != self.op:
            return False
        if self.label is not None and node.label != self.label:
            return False
        if self.module is not None and not _within(module_path(node), self.module):
            return False
        self.reason = None
        if not self.nan and self.grad_norm_above is None:
            return True
        # The gradient coming in, then each gradient the node's backward produces: a NaN made by
        # sqrt(-1) (or a huge gradient from log(1e-8)) flows from this node into its inputs, a
        # leaf among them, where no later node would see it. To look at what the node produces,
        # its backward runs once here, and again under pdb if it stops.
        if self._matches(grad_output):
            self.reason = f"the incoming gradient {self._what(grad_output)}"
            return True
        produced = node.function.backward(node, grad_output)
        produced = produced if isinstance(produced, tuple) else (produced,)
        for name, shape, grad in zip(node.input_names, node.input_shapes, produced):
            if grad is None or not hasattr(grad, "shape"):
                continue
            grad = np.asarray(getattr(grad, "data", grad))
            if grad.shape != tuple(shape):
                try:
                    if np.broadcast_shapes(tuple(shape), grad.shape) != grad.shape:
                        continue  # a wrong shape: the engine names it (GradientShapeError) right after
                except ValueError:
                    continue
                grad = autograd.unbroadcast(grad, shape)
            if self._matches(grad):
                self.reason = f"{node.name}.backward produces a gradient for {name} that {self._what(grad)}"
                return True
        return False

    def _matches(self, grad):
        if self.nan and np.all(np.isfinite(grad)):
            return False
        if self.grad_norm_above is not None and not grad_norm(grad) > self.grad_norm_above:
            return False
        return True

    def _what(self, grad):
        said = []
        if self.nan:
            said.append(f"holds {not_finite_text(grad)}")
        if self.grad_norm_above is not None:
            said.append(f"has norm {grad_norm(grad):.3g} > {self.grad_norm_above:g}")
        return " and ".join(said)

    def __exit__(self, *exc_info):
        super().__exit__(*exc_info)
        if self.stops == 0 and exc_info[0] is None:
            asked = ", ".join(f"{key}={value!r}" for key, value in (
                ("op", self.op), ("label", self.label), ("module", self.module), ("nan", self.nan or None),
                ("grad_norm_above", self.grad_norm_above)) if value is not None)
            print(f"break_on({asked}): no node's backward matched, so it never stopped "
                  f"(did backward() run inside the block?)", file=self.file or sys.stdout)
        return False


def _within(path, module):
    """Whether a node of module path `path` (gpt.blocks.1.ln1) is in `module` (blocks.1, or
    gpt.blocks.1): module's names appear in path as a run of whole names, from its start or
    after the model's own name."""
    if path is None:
        return False
    names, wanted = path.split("."), module.strip(".").split(".")
    return any(names[start:start + len(wanted)] == wanted for start in (0, 1))
