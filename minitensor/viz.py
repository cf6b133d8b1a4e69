"""Look at the graph: as a tree in a terminal, as Graphviz DOT text, or as a matplotlib figure.

    print(mt.viz.text(loss))
    open("graph.dot", "w").write(mt.viz.to_dot(loss))      # dot -Tpng graph.dot (no graphviz needed here)
    mt.viz.draw(loss).savefig("graph.png")

A parameter shows its name in the model that used it (block.ln1.weight); a tensor you named
(t.name = "x") shows that name. `draw` folds each part of a model (ln1, attn, mlp) into one box
when the whole graph would not fit at notebook width, and says so in the figure.
"""

from .autograd import Context, topological_order
from .backward_page import html  # noqa: F401  (mt.viz.html: the backward pass as one HTML page)
from .debug import grad_norm, leaf_labels, module_path, part_of, shape_of

FIT = 24  # draw folds a model's parts when the graph has more boxes than this
WIDTH = 9.0  # inches: what a notebook cell shows without scrolling


def _node_text(node):
    label = f" {node.label!r}" if node.label else ""
    module = module_path(node)
    return f"{node.name}{label} -> {node.output_shape}" + (f" in {module}" if module else "")


def _node_details(node):
    """The lines DOT adds under a node, as torchviz's show_saved does: the names of the inputs
    and each saved array by name and shape."""
    lines = [f"inputs: {', '.join(node.input_names)}"]
    saved = ", ".join(f"{name} {shape_of(array)}" for name, array in node.saved.items()
                      if array is not None)
    if saved:
        lines.append(f"saved: {saved}")
    elif node.freed:
        lines.append(f"saved: {', '.join(node.saved_names)} (freed by backward)")
    return lines


def _leaf_text(leaf, labels):
    label = labels.get(id(leaf))
    name = f" {label!r}" if label else ""
    grad = f" |grad| {grad_norm(leaf.grad):.3g}" if leaf.grad is not None else ""
    return f"leaf{name} {leaf.shape}{grad}"


def text(t):
    """The graph that made t as an indented tree, output first; a node or leaf used twice is
    printed once and then referred to ("see above"). Node #k is step k of the backward page and
    mt.debug.backward_steps(t)[k-1]: the k-th node backward runs."""
    labels = leaf_labels(t)
    if t.grad_fn is None:
        return _leaf_text(t, labels)
    lines, leaves_shown, printed = [], set(), set()
    numbers = {node: k for k, node in enumerate(topological_order(t.grad_fn), start=1)}
    stack = [(t.grad_fn, 0)]
    while stack:
        item, depth = stack.pop()
        indent = "  " * depth
        if isinstance(item, Context):
            if item in printed:
                lines.append(f"{indent}(#{numbers[item]}, see above)")
                continue
            printed.add(item)
            lines.append(f"{indent}#{numbers[item]} {_node_text(item)}")
            for edge in reversed(item.edges):
                if edge is not None:
                    stack.append((edge, depth + 1))
        elif id(item) in leaves_shown:
            lines.append(f"{indent}({_leaf_text(item, labels).split(' |grad|')[0]}, see above)")
        else:
            leaves_shown.add(id(item))
            lines.append(f"{indent}{_leaf_text(item, labels)}")
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
    """Graphviz DOT text of the graph (boxes: ops, ellipses: leaves; edges point to the consumer).
    Each op's box says which module made it, its inputs' names and what it saved, by name and
    shape (before backward frees it: draw the graph first, or backward(retain_graph=True))."""
    ids, edges, order = _walk(t)
    labels = leaf_labels(t)
    lines = ["digraph minitensor {", "  rankdir=BT;", '  node [fontname="Helvetica", fontsize=10];']
    for item in order:
        if isinstance(item, Context):
            label = "\\n".join([_node_text(item)] + _node_details(item)).replace('"', "'")
            lines.append(f'  {ids[id(item)]} [shape=box, label="{label}"];')
        else:
            label = _leaf_text(item, labels).replace('"', "'")
            lines.append(f'  {ids[id(item)]} [shape=ellipse, label="{label}"];')
    for source, consumer in edges:
        lines.append(f"  {ids[id(source)]} -> {ids[id(consumer)]};")
    lines.append("}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# draw: boxes in layers, folded by model part when the graph is too big
# ----------------------------------------------------------------------------


class _Box:
    """One box of the picture: an op, a leaf, or a folded part of a model (many ops)."""

    def __init__(self, text, kind):
        self.text, self.kind = text, kind  # kind: "op", "leaf" or "part"


def _boxes(t, fold):
    """The boxes to draw and the edges between them (input box -> consumer box), plus the
    names of the parts folded. Folding puts every op a part of the model made (and the
    parameters only that part uses) in one box."""
    ids, edges, order = _walk(t)
    labels = leaf_labels(t)
    box_of, boxes, parts = {}, [], {}
    if fold:
        for item in order:
            part = part_of(item) if isinstance(item, Context) else None
            if part is not None:
                name, module = part
                if name not in parts:  # met output first: this node gives the part's output
                    parts[name] = {"module": module, "ops": 0, "box": _Box("", "part"),
                                   "shape": item.output_shape}
                    boxes.append(parts[name]["box"])
                parts[name]["ops"] += 1
                box_of[id(item)] = parts[name]["box"]
        # a leaf whose every consumer sits in one part belongs to that part too
        consumers = {}
        for source, consumer in edges:
            if not isinstance(source, Context):
                consumers.setdefault(id(source), set()).add(box_of.get(id(consumer)))
        for item in order:
            if not isinstance(item, Context):
                inside = consumers.get(id(item), set())
                if len(inside) == 1 and None not in inside and item is not t:
                    box_of[id(item)] = next(iter(inside))
        # A parameter used by several parts (a tied embedding and output layer) is counted and
        # drawn in the first part that uses it, in forward order; the others say they share it.
        forward_parts = list(reversed(parts))
        for item in order:
            inside = consumers.get(id(item), set())
            if not isinstance(item, Context) and len(inside) > 1 and None not in inside and item is not t:
                box_of[id(item)] = next(parts[n]["box"] for n in forward_parts if parts[n]["box"] in inside)
        counted = set()
        for name in forward_parts:
            part = parts[name]
            own = [p for p in part["module"].parameters() if id(p) not in counted]
            part["shared"] = [p for p in part["module"].parameters() if id(p) in counted]
            part["own"] = sum(p.size for p in own)
            counted.update(id(p) for p in own)
    names = leaf_labels(t)
    for name, part in parts.items():
        module = part["module"]
        ops = f"{part['ops']} op{'s' if part['ops'] > 1 else ''}"
        shared = ", ".join(names.get(id(p)) or "a parameter" for p in part["shared"])
        part["box"].text = (f"{name}: {type(module).__name__} -> {part['shape']}\n"
                            f"{ops}, {part['own']:,} parameters" + (f" (shares {shared})" if shared else ""))
    for item in order:
        if id(item) not in box_of:
            if isinstance(item, Context):
                box = _Box(_node_text(item), "op")
            else:
                box = _Box(_leaf_text(item, labels), "leaf")
            box_of[id(item)] = box
            boxes.append(box)
    box_edges = []
    for source, consumer in edges:
        pair = (box_of[id(source)], box_of[id(consumer)])
        if pair[0] is not pair[1] and pair not in box_edges:
            box_edges.append(pair)
    return boxes, box_edges, list(reversed(parts))  # the parts in forward order


def _layers(boxes, edges):
    """A layer per box: ops by their longest path from the inputs; each leaf one layer below
    the first op that uses it (next to its consumer, not on a bottom row of its own)."""
    inputs = {id(b): [] for b in boxes}
    for source, consumer in edges:
        inputs[id(consumer)].append(source)
    level = {}

    def height(box):  # iterative longest path, so deep graphs do not recurse
        stack = [box]
        while stack:
            top = stack[-1]
            pending = [b for b in inputs[id(top)] if id(b) not in level]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if id(top) not in level:
                level[id(top)] = 1 + max((level[id(b)] for b in inputs[id(top)]), default=-1)

    for box in boxes:
        if box.kind != "leaf":
            height(box)
    for box in boxes:
        if box.kind == "leaf":
            users = [level[id(c)] for s, c in edges if s is box and id(c) in level]
            level[id(box)] = min(users) - 1 if users else 0
    return level


def draw(t, ax=None, fold="auto"):
    """A matplotlib figure of the graph that made t: ops as boxes with their output shapes,
    leaves with their names, shapes and gradient norms, arrows from inputs to the ops that use
    them, the output at the top. fold="auto" folds each part of a model (a submodule such as
    attn or mlp) into one box when there are more than FIT boxes; fold=True always, False never.
    What was folded is written above the picture."""
    import matplotlib.pyplot as plt

    _, _, order = _walk(t)
    fold = len(order) > FIT if fold == "auto" else bool(fold)
    boxes, edges, folded = _boxes(t, fold)
    level = _layers(boxes, edges)
    rows = {}
    for box in boxes:
        rows.setdefault(level[id(box)], []).append(box)
    low = min(rows)
    widest = max(len(members) for members in rows.values())
    depth = max(rows) - low + 1
    fontsize = 9 if widest <= 4 else 8 if widest <= 6 else 7
    position = {}
    if fold:  # at most a dozen boxes: evenly spaced, at notebook width
        for row, members in rows.items():
            for i, box in enumerate(members):
                position[id(box)] = (i - (len(members) - 1) / 2, row - low)
        row_height, unit = 1.0, 1.0
    else:
        # every op: each box as wide as its text, side by side, so no two labels overlap; x in inches
        char = fontsize * 0.62 / 72
        for row, members in rows.items():
            widths = [max(len(line) for line in b.text.split("\n")) * char + 0.4 for b in members]
            total = sum(widths) + 0.25 * (len(members) - 1)
            x = -total / 2
            for box, w in zip(members, widths):
                position[id(box)] = (x + w / 2, (row - low) * 0.9)
                x += w + 0.25
        row_height, unit = 0.9, 0.9
    xs = [p[0] for p in position.values()]
    long_edges = [(s, c) for s, c in edges if position[id(c)][1] - position[id(s)][1] > row_height * 1.01]
    if ax is None:
        if fold:
            width, height = WIDTH, min(max(3.0, 0.8 * depth + 1), 14.0)
        else:
            width = max(WIDTH, max(xs) - min(xs) + 2.0 + 0.15 * len(long_edges))
            height = max(3.0, unit * depth + 1.2)
        fig, ax = plt.subplots(figsize=(width, height))
    else:
        fig = ax.figure
    right = max(xs) + (0.6 if fold else 1.0)
    for source, consumer in edges:
        (x0, y0), (x1, y1) = position[id(source)], position[id(consumer)]
        if (source, consumer) in long_edges:
            # a residual connection or a tied weight: up through the gaps between rows, along a
            # lane of its own right of every box, so it crosses none
            lane = right + 0.12 * long_edges.index((source, consumer))
            gap0, gap1 = y0 + row_height / 2, y1 - row_height / 2
            ax.plot([x0, x0, lane, lane, x1], [y0 + 0.2 * unit, gap0, gap0, gap1, gap1],
                    color="gray", linewidth=1, zorder=1)
            ax.annotate("", xy=(x1, y1 - 0.2 * unit), xytext=(x1, gap1),
                        arrowprops=dict(arrowstyle="->", color="gray", shrinkA=0, shrinkB=0))
            continue
        ax.annotate("", xy=(x1, y1 - 0.2 * unit), xytext=(x0, y0 + 0.2 * unit),
                    arrowprops=dict(arrowstyle="->", color="gray", shrinkA=0, shrinkB=0))
    colours = {"op": "lightsteelblue", "leaf": "lightyellow", "part": "thistle"}
    for box in boxes:
        x, y = position[id(box)]
        ax.text(x, y, box.text, ha="center", va="center", fontsize=fontsize,
                bbox=dict(boxstyle="round", facecolor=colours[box.kind]))
    ax.set_xlim(min(xs) - (0.7 if fold else 1.0), right + 0.12 * len(long_edges) + 0.1)
    ax.set_ylim(-0.6 * unit, (depth - 0.4) * unit)
    ax.axis("off")
    if folded:
        ax.set_title(f"folded into one box each: {', '.join(folded)} "
                     f"(mt.viz.draw(loss, fold=False) draws every op)", fontsize=9)
    elif len(boxes) > FIT:
        ax.set_title(f"every op: {len(boxes)} boxes, each as wide as its label. To pan and zoom, let Graphviz "
                     f"lay it out: open('graph.dot', 'w').write(mt.viz.to_dot(loss)); dot -Tsvg graph.dot > graph.svg",
                     fontsize=9, loc="left")
    return fig
