"""Look at the graph: as a tree in a terminal, as Graphviz DOT text, or as a matplotlib figure.

    print(mt.viz.text(loss))
    open("graph.dot", "w").write(mt.viz.to_dot(loss))      # dot -Tpng graph.dot (no graphviz needed here)
    mt.viz.draw(loss).savefig("graph.png")
"""

import numpy as np

from .autograd import Context
from .backward_page import html  # noqa: F401  (mt.viz.html: the backward pass as one HTML page)


def _norm(array):
    return float(np.sqrt(np.sum(np.asarray(array, dtype=np.float64) ** 2)))


def _node_text(node):
    label = f" {node.label!r}" if node.label else ""
    return f"{node.name}{label} -> {node.output_shape}"


def _leaf_text(leaf):
    name = f" {leaf.name!r}" if leaf.name else ""
    grad = f" |grad| {_norm(leaf.grad):.3g}" if leaf.grad is not None else ""
    return f"leaf{name} {leaf.shape}{grad}"


def text(t):
    """The graph that made t as an indented tree, output first; a node used twice is printed
    once and then referred to by its number."""
    if t.grad_fn is None:
        return _leaf_text(t)
    lines, numbers = [], {}
    stack = [(t.grad_fn, 0)]
    while stack:
        item, depth = stack.pop()
        indent = "  " * depth
        if isinstance(item, Context):
            if item in numbers:
                lines.append(f"{indent}(#{numbers[item]}, see above)")
                continue
            numbers[item] = len(numbers) + 1
            lines.append(f"{indent}#{numbers[item]} {_node_text(item)}")
            for edge in reversed(item.edges):
                if edge is not None:
                    stack.append((edge, depth + 1))
        else:
            lines.append(f"{indent}{_leaf_text(item)}")
    return "\n".join(lines)


def _walk(t):
    """Every node and leaf reachable from t, with an id each, and the edges input -> consumer."""
    ids, edges, order = {}, [], []
    stack = [t.grad_fn if t.grad_fn is not None else t]
    while stack:
        item = stack.pop()
        if id(item) in ids:
            continue
        ids[id(item)] = f"n{len(ids)}"
        order.append(item)
        if isinstance(item, Context):
            for edge in item.edges:
                if edge is not None:
                    edges.append((edge, item))
                    stack.append(edge)
    return ids, edges, order


def to_dot(t):
    """Graphviz DOT text of the graph (boxes: ops, ellipses: leaves; edges point to the consumer)."""
    ids, edges, order = _walk(t)
    lines = ["digraph minitensor {", "  rankdir=BT;", '  node [fontname="Helvetica", fontsize=10];']
    for item in order:
        if isinstance(item, Context):
            label = _node_text(item).replace('"', "'")
            lines.append(f'  {ids[id(item)]} [shape=box, label="{label}"];')
        else:
            label = _leaf_text(item).replace('"', "'")
            lines.append(f'  {ids[id(item)]} [shape=ellipse, label="{label}"];')
    for source, consumer in edges:
        lines.append(f"  {ids[id(source)]} -> {ids[id(consumer)]};")
    lines.append("}")
    return "\n".join(lines)


def draw(t, ax=None):
    """A matplotlib figure of the graph: ops as boxes with their output shapes, leaves with
    their shapes and gradient norms when known, arrows from inputs to the ops that use them.
    Layers go from the leaves (bottom) to the output (top)."""
    import matplotlib.pyplot as plt

    ids, edges, order = _walk(t)
    height = {}  # longest path from a leaf: leaves 0, the output highest
    for item in reversed(order):  # inputs come later in `order`, so walk backwards
        inputs = [e for e in item.edges if e is not None] if isinstance(item, Context) else []
        height[id(item)] = 1 + max((height.get(id(e), 0) for e in inputs), default=-1)
    for item in order:  # a second pass: order is not strictly topological for shared nodes
        if isinstance(item, Context):
            height[id(item)] = 1 + max((height[id(e)] for e in item.edges if e is not None), default=-1)
    layers = {}
    for item in order:
        layers.setdefault(height[id(item)], []).append(item)
    position = {}
    for level, items in layers.items():
        for i, item in enumerate(items):
            position[id(item)] = (i - (len(items) - 1) / 2, level)
    if ax is None:
        width = max(len(items) for items in layers.values())
        fig, ax = plt.subplots(figsize=(max(4, 2.6 * width), max(3, 1.1 * len(layers))))
    else:
        fig = ax.figure
    for source, consumer in edges:
        (x0, y0), (x1, y1) = position[id(source)], position[id(consumer)]
        ax.annotate("", xy=(x1, y1 - 0.18), xytext=(x0, y0 + 0.18), arrowprops=dict(arrowstyle="->", color="gray"))
    for item in order:
        x, y = position[id(item)]
        if isinstance(item, Context):
            ax.text(x, y, _node_text(item), ha="center", va="center", fontsize=8,
                    bbox=dict(boxstyle="round", facecolor="lightsteelblue"))
        else:
            ax.text(x, y, _leaf_text(item), ha="center", va="center", fontsize=8,
                    bbox=dict(boxstyle="round", facecolor="lightyellow"))
    xs = [p[0] for p in position.values()]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(-0.6, max(height.values()) + 0.6)
    ax.axis("off")
    return fig
