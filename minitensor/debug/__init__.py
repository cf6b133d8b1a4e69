"""Debugging backward: step through it node by node, trace it, break on an op, find the
first NaN, find the op whose backward is wrong.

    steps = mt.debug.backward_steps(loss)       # a generator: one node's backward per step
    with mt.debug.trace(): loss.backward()      # one printed line per node
    with mt.debug.break_on(op="Softmax"):       # pdb inside Softmax's backward
        loss.backward()
    with mt.debug.detect_anomaly():             # names the op that made the first NaN
        loss = model(x).sum(); loss.backward()
    mt.debug.find_wrong_op(fn, x, w)            # which op's backward disagrees with finite differences
    mt.debug.compare(model, reference, x)       # the first node that departs from a reference model

Where each op was made in your code is recorded always (`mt.debug.created_at(node)`): the line
of your code, and for an op made inside models/ (or a forward method of your own Module) also
that line and the lines in between, so two layer norms of one block can be told apart. A parameter of a Module
shows its name (`block.ln1.weight`) wherever the tools show a leaf (`mt.debug.leaf_labels`).

One job a file:
    minitensor/sites.py   where each node was made, module paths, leaf labels (gradcheck uses it too)
    observer.py           the observer the engine calls (installed on import), Tool, where break_on lands
    show.py               a node in text: describe (`p node`), a trace line, grad_norm
    stepping.py           backward_steps, trace
    breaking.py           break_on
    anomaly.py            detect_anomaly
    op_check.py           each op checked on its own: find_wrong_op, and the backward page's check mode
    compare_graphs.py     compare: two graphs aligned, each node judged on the reference's inputs
    compare_torch.py      compare against a PyTorch module: each module call judged on torch's boundary values
    compare_tolerance.py  when a value departs from the reference's (both kinds of reference)
    compare_record.py     one side's nodes recorded as plain arrays (the grader's worker sends them)
    compare_report.py     the words of compare's report: Row, Comparison
"""

import importlib

from ..sites import created_at, leaf_labels, module_path, part_of
from .observer import Tool
from .observer import engine_observer  # to put it back after autograd.set_observer(None): tests, benchmarks

# The engine's observer (observer.py) is installed with this package, so every node knows where it
# was made; the tools below load when first used (`import minitensor` stays light).
_WHERE = {"AnomalyError": "anomaly", "detect_anomaly": "anomaly", "break_on": "breaking", "known_ops": "breaking",
          "compare": "compare_graphs", "Comparison": "compare_report", "OpCheck": "op_check", "WrongOp": "op_check",
          "find_wrong_op": "op_check", "describe": "show", "grad_norm": "show", "shape_of": "show",
          "Step": "stepping", "backward_steps": "stepping", "trace": "stepping"}


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'minitensor.debug' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "backward_steps", "Step", "trace", "break_on", "known_ops", "detect_anomaly", "AnomalyError",
    "find_wrong_op", "WrongOp", "OpCheck", "created_at", "module_path", "part_of", "leaf_labels",
    "describe", "grad_norm", "shape_of", "Tool", "engine_observer", "compare", "Comparison",
]
