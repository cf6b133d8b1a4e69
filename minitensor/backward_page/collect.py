"""What the page shows, gathered from one backward pass: the graph laid out in layers, and one
record per backward step (gradients, saved arrays, attention weights), as plain JSON-ready data."""

import numpy as np

from .. import debug
from ..autograd import Context, summed_axes, topological_order
from ..backends.numpy_backend import default_scale
from ..nn.module import Parameter

SMALL = 48  # arrays up to this many elements are shown as numbers, larger ones as heatmaps


def norm(array):
    return float(np.sqrt(np.sum(np.asarray(array, dtype=np.float64) ** 2)))


def encode(array, max_elements):
    """Shape, norm, min, max always; the values (5 significant digits) up to max_elements,
    a histogram above it. NaN and Inf become null in the values and are counted."""
    values = np.asarray(array)
    as_float = values.astype(np.float64)
    finite = np.isfinite(as_float)
    record = {"shape": list(values.shape), "dtype": str(values.dtype), "norm": norm(as_float),
              "nonfinite": int(values.size - finite.sum())}
    if finite.any():
        record["min"], record["max"] = float(as_float[finite].min()), float(as_float[finite].max())
    else:
        record["min"] = record["max"] = None
    if values.size <= max_elements:
        record["data"] = [float(f"{v:.5g}") if np.isfinite(v) else None for v in as_float.reshape(-1).tolist()]
    else:
        counts, edges = np.histogram(as_float[finite], bins=30) if finite.any() else (np.zeros(30), [0, 0])
        record["hist"] = {"lo": float(edges[0]), "hi": float(edges[-1]), "counts": [int(c) for c in counts]}
    return record


class _RawGradShapes(debug.Tool):
    """A debugging tool that notes the shape of each gradient an op's backward returned,
    before the engine summed it back to its input's shape (so the page can say which axes)."""

    def __init__(self):
        self.raw = {}

    def after_backward(self, node, grad_output, grad_inputs, summed=None, *more):
        self.raw[id(node)] = [None if g is None else tuple(np.shape(g)) for g in grad_inputs]


def layout(root):
    """Nodes (ops and leaves) in layers: the output at layer 0, every input below each of its
    consumers (longest path from the output); within a layer, ordered to shorten edges."""
    ops = topological_order(root)  # consumers before producers
    labels = debug.leaf_labels(root)  # t.name, else the parameter's name in its model
    ids, items = {}, []

    def add(item):
        if id(item) not in ids:
            ids[id(item)] = len(items)
            items.append(item)

    depth = {id(root): 0}
    edges = []
    for node in ops:
        add(node)
        for position, edge in enumerate(node.edges):
            if edge is None:
                continue
            add(edge)
            depth[id(edge)] = max(depth.get(id(edge), 0), depth[id(node)] + 1)
            edges.append((ids[id(edge)], ids[id(node)], position))
    levels = max(depth.values()) + 1
    layers = [[] for _ in range(levels)]
    for item in items:
        layers[depth[id(item)]].append(ids[id(item)])
    consumers = {i: [] for i in range(len(items))}
    inputs = {i: [] for i in range(len(items))}
    for source, consumer, _ in edges:
        consumers[source].append(consumer)
        inputs[consumer].append(source)
    place = {}
    for layer in layers:
        for x, i in enumerate(layer):
            place[i] = x - (len(layer) - 1) / 2
    for _ in range(4):  # barycentre sweeps: down by consumers, then up by inputs
        for neighbours, order in ((consumers, layers[1:]), (inputs, layers[-2::-1])):
            for layer in order:
                layer.sort(key=lambda i: np.mean([place[j] for j in neighbours[i]]) if neighbours[i] else place[i])
                for x, i in enumerate(layer):
                    place[i] = x - (len(layer) - 1) / 2
    nodes = []
    for i, item in enumerate(items):
        if isinstance(item, Context):
            nodes.append({"id": i, "kind": "op", "op": item.name, "label": item.label,
                          "shape": list(item.output_shape), "created_at": debug.created_at(item)})
        else:
            kind = "param" if isinstance(item, Parameter) else "leaf"
            nodes.append({"id": i, "kind": kind, "op": "Parameter" if kind == "param" else "leaf",
                          "label": labels.get(id(item)), "shape": list(item.shape), "created_at": None})
        nodes[-1]["layer"], nodes[-1]["x"] = depth[id(item)], place[i]
    return ids, nodes, [{"from": s, "to": c, "pos": p} for s, c, p in edges]


def attention_view(step, max_elements):
    """For a fused Attention node: the weights P and dL/dS (S the scaled, masked scores) as
    (..., Tq, Tk) arrays, recomputed in NumPy from what the node saved, and the hidden cells."""
    node = step.node
    q, k, v, out = (np.asarray(a, dtype=np.float64) for a in step.saved[:4])
    row_max, row_sum = (np.asarray(a, dtype=np.float64)[..., None] for a in step.saved[4])  # (..., Tq, 1)
    scale = default_scale(q.shape[-1]) if node.scale is None else node.scale
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale  # (..., Tq, Tk)
    hidden = np.zeros(scores.shape, dtype=bool)
    if node.mask is not None:
        mask = np.asarray(node.mask)
        if mask.dtype == bool:
            hidden |= mask
        else:
            scores = scores + mask
            hidden |= np.isneginf(mask)
    if node.is_causal:
        tq, tk = scores.shape[-2:]
        hidden |= np.arange(tk)[None, :] > np.arange(tq)[:, None] + (tk - tq)
    scores = np.where(hidden, -np.inf, scores)
    visible = row_sum != 0  # a fully hidden row has no weights
    weights = np.where(visible, np.exp(scores - np.where(visible, row_max, 0)) / np.where(visible, row_sum, 1), 0.0)
    grad_out = np.asarray(step.grad_output, dtype=np.float64)
    d_weights = np.matmul(grad_out, np.swapaxes(v, -1, -2))
    d_scores = weights * (d_weights - (grad_out * out).sum(axis=-1, keepdims=True))
    return {"weights": encode(weights, max_elements), "d_scores": encode(d_scores, max_elements),
            "hidden": "".join("1" if h else "0" for h in hidden.reshape(-1))}


def _predict_target(index, grad_inputs):
    """One element of the first gradient the op sends on, for the student to compute."""
    for position, grad in enumerate(grad_inputs):
        if grad is not None and grad.size:
            flat = np.random.default_rng(index).integers(grad.size)
            element = np.unravel_index(flat, grad.shape)
            return {"input": position, "index": [int(i) for i in element], "value": float(grad[element])}
    return None


def steps(loss, ids, max_elements, retain_graph):
    """Run backward one node at a time (mt.debug.backward_steps) and keep what each step shows.
    Returns the records and, per node id, (norm of the gradient it received, the step after
    which that gradient is complete): its own step for an op, the last contribution for a leaf."""
    records, received, leaf_sums = [], {}, {}
    with _RawGradShapes() as raw_shapes:
        for step in debug.backward_steps(loss, retain_graph=retain_graph):
            node = step.node
            raw = raw_shapes.raw.get(id(node)) or [None] * len(step.grad_inputs)
            inputs = []
            for position, grad in enumerate(step.grad_inputs):
                edge = node.edges[position]
                entry = {"to": None if edge is None else ids[id(edge)], "shape": list(node.input_shapes[position])}
                if grad is not None:
                    entry["grad"] = encode(grad, max_elements)
                    if type(edge) is not Context:
                        previous = leaf_sums.get(entry["to"])
                        leaf_sums[entry["to"]] = grad if previous is None else previous + grad
                        received[entry["to"]] = (None, step.index)
                    if raw[position] is not None and raw[position] != grad.shape:
                        entry["raw_shape"] = list(raw[position])
                        entry["summed_axes"] = list(summed_axes(raw[position], grad.shape))
                inputs.append(entry)
            record = {"index": step.index, "node": ids[id(node)], "op": step.op, "label": step.label,
                      "created_at": step.created_at, "grad_output": encode(step.grad_output, max_elements),
                      "grad_inputs": inputs,
                      "saved": [encode(a, max_elements) for a in step.saved if hasattr(a, "shape")],
                      "predict": _predict_target(step.index, [g for g in step.grad_inputs])}
            if step.op == "Attention" and len(step.saved) >= 5:
                record["attention"] = attention_view(step, max_elements)
            records.append(record)
            received[ids[id(node)]] = (norm(step.grad_output), step.index)
    for leaf, total in leaf_sums.items():
        received[leaf] = (norm(total), received[leaf][1])
    return records, received
