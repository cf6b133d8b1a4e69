"""How the tools show a node in text: describe (what `p node` prints in pdb), one trace line per
backward step, the gradient norms (|g|), where each input of a node came from, and what is not
finite in an array."""

import numpy as np

from .. import autograd
from ..sites import created_at, models_of, module_path, module_text, parameter_names


def shape_of(array):
    """The shape of a saved array (a tuple of arrays, such as attention's softmax statistics,
    gives its stacked shape); None for nothing saved."""
    if array is None:
        return None
    try:
        return tuple(np.shape(array))
    except ValueError:
        return "?"


def describe(node):
    """What `p node` shows in pdb (a Context's repr): the op, its label and output shape, where
    it was made, the module that made it, each input by name with its shape and where it came
    from, and each saved array by name with its shape."""
    node = getattr(node, "grad_fn", node)
    label = f" {node.label!r}" if node.label else ""
    output = f" -> {tuple(node.output_shape)}" if hasattr(node, "output_shape") else ""
    lines = [f"<{node.name} node{label}{output}"]
    where = created_at(node)
    if where:
        lines.append(f"  made at {where}")
    module = module_text(node)
    if module:
        lines.append(f"  module  {module}")
    if hasattr(node, "edges"):
        sources = input_labels(node, _labels_of_model(node))
        for name, shape, source in zip(node.input_names, node.input_shapes, sources):
            came = f"from {source}" if source is not None else "a constant (no gradient)"
            lines.append(f"  input   {name} {tuple(shape)} {came}")
    if node.freed:
        lines.append("  saved   (freed by backward; retain_graph=True keeps them)")
    else:
        for name, array in node.saved.items():
            lines.append(f"  saved   {name} {shape_of(array)}" if array is not None else f"  saved   {name} None")
    return "\n".join(lines) + ">"


def _labels_of_model(node):
    """id(leaf) -> label for the leaves of node, naming parameters in the model that made node."""
    names = parameter_names(models_of([node]))
    return {id(e): e.name if e.name is not None else names.get(id(e))
            for e in node.edges if e is not None and type(e) is not autograd.Context}


def input_labels(node, labels):
    """For each input of node: a leaf's label, "<Op>" for an op's output, None for a constant."""
    names = []
    for edge in node.edges:
        if edge is None:
            names.append(None)
        elif type(edge) is autograd.Context:
            names.append(edge.label or edge.name)
        else:
            names.append(labels.get(id(edge)) or f"leaf {edge.shape}")
    return tuple(names)


def grad_norm(array):
    """The L2 norm of an array, in float64 (what the tools print as |g|)."""
    return float(np.sqrt(np.sum(np.asarray(array, dtype=np.float64) ** 2)))


def step_text(index, node, grad_output, summed, sources):
    """One backward step as trace prints it (sources: where each input came from, as input_labels gives)."""
    label = f" {node.label!r}" if node.label else ""
    module = module_path(node)
    module = f"  in {module}" if module else ""
    where = created_at(node)
    where = f"  [{where}]" if where else ""
    inputs = ", ".join(
        f"{name} -" if g is None else f"{name} {g.shape} |{grad_norm(g):.3g}|" + (f" to {source}" if source else "")
        for g, name, source in zip(summed, node.input_names, sources))
    saved = ", ".join(f"{name} {shape_of(array)}" for name, array in node.saved.items()
                      if array is not None)
    return (f"{index:4d} {node.name}{label}{module}{where}\n"
            f"       grad out {grad_output.shape} |{grad_norm(grad_output):.3g}|  ->  grad in {inputs}"
            + (f"\n       saved {saved}" if saved else ""))


def not_finite_text(array):
    """What is not finite in array, as text: nan and inf (3 of 16 values)."""
    array = np.asarray(array)
    kinds = [name for name, mask in (("nan", np.isnan(array)), ("inf", np.isinf(array))) if mask.any()]
    count = int((~np.isfinite(array)).sum())
    return f"{' and '.join(kinds)} ({count} of {array.size} values)"
