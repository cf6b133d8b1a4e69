"""What the page shows, gathered from one backward pass: the graph laid out in layers, and one
record per backward step (gradients, saved arrays, attention weights), as plain JSON-ready data."""

import numpy as np

from .. import debug
from ..autograd import Context, summed_axes, topological_order
from ..autograd_errors import GradientShapeError
from ..backends.conventions import default_scale
from ..debug import grad_norm
from ..nn.module import Parameter
from ..ops.attention import tile_scores
from ..ops.softmax import Softmax
from ..sites import module_of
from ..views import saved_sources

SMALL = 48  # arrays up to this many elements are shown as numbers, larger ones as heatmaps


def encode(array, max_elements):
    """Shape, norm, min, max always; the values (5 significant digits) up to max_elements,
    a histogram above it. NaN and Inf become null in the values and are counted."""
    values = np.asarray(array)
    as_float = values.astype(np.float64)
    finite = np.isfinite(as_float)
    record = {"shape": list(values.shape), "dtype": str(values.dtype), "norm": grad_norm(as_float),
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


def summary(array):
    """A forward value as the graph's boxes show it: the numbers when small, else the statistics."""
    values = np.asarray(array)
    if values.dtype.kind not in "biuf":
        return None
    if values.size <= SMALL:
        return encode(values, SMALL)
    as_float = values.astype(np.float64)
    finite = np.isfinite(as_float)
    some = finite.any()
    return {"shape": list(values.shape), "dtype": str(values.dtype), "norm": grad_norm(as_float),
            "nonfinite": int(values.size - finite.sum()),
            "min": float(as_float[finite].min()) if some else None,
            "max": float(as_float[finite].max()) if some else None,
            "mean": float(as_float[finite].mean()) if some else None}


def forward_values(ops):
    """id(node) -> its output's value, for every node whose output some node saved: itself (Exp
    saves y), or a consumer that saved it as an input (MatMul saves a and b). The graph keeps no
    other forward values, so the others are not shown."""
    values = {}
    for node in ops:
        for position, array in saved_sources(node):
            owner = node if position is None else node.edges[position]
            if type(owner) is Context:
                values.setdefault(id(owner), array)
    return values


def layout(root, output=None):
    """Nodes (ops, leaves, and the inputs that need no gradient, greyed) in layers: the output at
    layer 0, every input below each of its consumers (longest path from the output); within a
    layer, ordered to shorten edges."""
    ops = topological_order(root)  # consumers before producers
    labels = debug.leaf_labels(root)  # t.name, else the parameter's name in its model
    values = forward_values(ops)
    if output is not None:
        values[id(root)] = output  # the loss itself
    ids, items = {}, []

    def add(key, item):
        if key not in ids:
            ids[key] = len(items)
            items.append(item)

    depth = {0: 0}
    edges = []
    for node in ops:
        add(id(node), node)
        for position, edge in enumerate(node.edges):
            # an input that needs no gradient has no edge: it gets a greyed box of its own
            key = id(edge) if edge is not None else ("constant", id(node), position)
            add(key, edge if edge is not None else (node, position))
            depth[ids[key]] = max(depth.get(ids[key], 0), depth[ids[id(node)]] + 1)
            edges.append((ids[key], ids[id(node)], position))
    levels = max(depth.values()) + 1
    layers = [[] for _ in range(levels)]
    for i in range(len(items)):
        layers[depth[i]].append(i)
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
            module = module_of(item)
            value = values.get(id(item))
            nodes.append({"id": i, "kind": "op", "op": item.name, "label": item.label,
                          "shape": list(item.output_shape), "created_at": debug.created_at(item),
                          "module": debug.module_path(item),
                          "module_class": type(module).__name__ if module is not None else None,
                          "input_names": list(item.input_names),
                          "value": summary(value) if value is not None else None})
        elif isinstance(item, tuple):  # (consumer, position): an input that needs no gradient
            node, position = item
            nodes.append({"id": i, "kind": "const", "op": "constant", "label": node.input_names[position],
                          "shape": list(node.input_shapes[position]), "created_at": None, "value": None})
        else:
            kind = "param" if isinstance(item, Parameter) else "leaf"
            nodes.append({"id": i, "kind": kind, "op": "Parameter" if kind == "param" else "leaf",
                          "label": labels.get(id(item)), "shape": list(item.shape), "created_at": None,
                          "value": summary(item.data)})
        nodes[-1]["layer"], nodes[-1]["x"] = depth[i], place[i]
    return ids, nodes, [{"from": s, "to": c, "pos": p} for s, c, p in edges]


MAX_SLICES = 16  # (batch, head) slices of the attention maps kept per node; the page says so above it
MAX_CELLS = 1 << 18  # cells of each map kept per node, at full resolution (T = 256: four slices)
MAX_SIDE = 512  # past it, the first MAX_SIDE queries and keys of a slice are kept


def _map_values(plane):
    return [float(f"{v:.4g}") if np.isfinite(v) else None for v in plane.reshape(-1).tolist()]


def attention_view(step, max_elements):
    """For a fused Attention node: the weights P and dL/dS (S the scaled, masked scores) of each
    (batch, head) slice, recomputed in NumPy from what the node saved, the hidden cells, and the
    queries that see no key (fully hidden rows). The leading axes are kept as they are
    (MultiHeadAttention's 5-D (batch, kv head, group, T, T)), each slice stored on its own at full
    resolution, never averaged (an average over blocks hides a mask error on the diagonal): as
    many slices as MAX_CELLS allows (at least one, at most MAX_SLICES), each cut to its first
    MAX_SIDE queries and keys."""
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
        # The cells the causal rule hides, as the op applies it: -inf scores, every key one tile.
        tq, tk = scores.shape[-2:]
        hidden |= np.isneginf(tile_scores(np.zeros((tq, 1)), np.zeros((tk, 1)), tk, 1.0, 0, None, True))
    scores = np.where(hidden, -np.inf, scores)
    visible = row_sum != 0  # a fully hidden row has no weights
    with np.errstate(invalid="ignore", over="ignore"):
        weights = np.where(visible, np.exp(scores - np.where(visible, row_max, 0)) / np.where(visible, row_sum, 1),
                           0.0)
    grad_out = np.asarray(step.grad_output, dtype=np.float64)
    d_weights = np.matmul(grad_out, np.swapaxes(v, -1, -2))
    softmax = Context(Softmax, (True,))  # the scores' softmax, backward: the op's own backward
    softmax.save_for_backward(weights)
    softmax.axis, softmax.mask = -1, None
    d_scores = Softmax.backward(softmax, d_weights)
    lead = weights.shape[:-2]
    tq, tk = weights.shape[-2:]
    hidden = np.broadcast_to(hidden, weights.shape)
    empty = np.broadcast_to(~visible[..., 0], weights.shape[:-1])  # (..., Tq): queries that see no key
    rows, cols = min(tq, MAX_SIDE), min(tk, MAX_SIDE)
    kept = max(1, min(MAX_SLICES, MAX_CELLS // max(rows * cols, 1)))
    slices = []
    for flat in range(min(int(np.prod(lead, dtype=int)), kept)):
        at = np.unravel_index(flat, lead) if lead else ()
        w, ds, h = weights[at][:rows, :cols], d_scores[at][:rows, :cols], hidden[at][:rows, :cols]
        slices.append({"index": [int(i) for i in at], "weights": _map_values(w), "d_scores": _map_values(ds),
                       "hidden": "".join("1" if x else "0" for x in h.reshape(-1)), "rows": int(rows),
                       "cols": int(cols), "empty_rows": [int(i) for i in np.flatnonzero(empty[at])],
                       "block": [1, 1]})
    return {"lead": [int(n) for n in lead], "tq": int(tq), "tk": int(tk), "slices": slices,
            "stored": len(slices), "q_shape": list(q.shape), "out_shape": list(out.shape)}


def _stacked(saved):
    """A saved array as one array: a tuple of arrays of one shape (attention's softmax statistics,
    the row maxima and sums) stacked on a new first axis; None for anything else."""
    if hasattr(saved, "shape"):
        return saved
    if isinstance(saved, tuple) and saved and all(hasattr(a, "shape") for a in saved):
        try:
            return np.stack(saved)
        except ValueError:
            return None
    return None


def _predict_targets(index, names, grad_inputs):
    """One element of each gradient the op sends on, for the student to compute; the page asks
    about one input at a time and lets the student pick which."""
    targets = []
    rng = np.random.default_rng(index)
    for position, (name, grad) in enumerate(zip(names, grad_inputs)):
        if grad is not None and grad.size:
            element = np.unravel_index(rng.integers(grad.size), grad.shape)
            value = float(grad[element])
            targets.append({"input": position, "name": name, "index": [int(i) for i in element],
                            "value": value if np.isfinite(value) else None})
    return targets


def steps(loss, ids, max_elements, retain_graph):
    """Run backward one node at a time (mt.debug.backward_steps) and keep what each step shows.
    Returns the records; per node id, (norm and summary of the gradient it received, the step
    after which that gradient is complete): its own step for an op, the last contribution for a
    leaf, whose gradient is the sum of its contributions; and per node id the steps that sent
    it a gradient (what predict mode must have asked before it shows that gradient)."""
    records, received, leaf_sums, senders = [], {}, {}, {}
    stopped = None
    with _RawGradShapes() as raw_shapes:
        try:
            for step in debug.backward_steps(loss, retain_graph=retain_graph):
                _step_record(step, ids, max_elements, raw_shapes, records, received, leaf_sums, senders)
        except GradientShapeError as error:  # the page shows the steps that ran and the op that stopped it
            stopped = {"step": len(records), "node": ids.get(id(error.node)), "op": error.node.name,
                       "message": str(error)}
    for leaf, total in leaf_sums.items():
        received[leaf] = (grad_norm(total), summary(total), received[leaf][2])
    return records, received, senders, stopped


def _step_record(step, ids, max_elements, raw_shapes, records, received, leaf_sums, senders):
    """Keep what one backward step shows (steps' loop body)."""
    node = step.node
    raw = raw_shapes.raw.get(id(node)) or [None] * len(step.grad_inputs)
    inputs = []
    for position, grad in enumerate(step.grad_inputs):
        edge = node.edges[position]
        to = ids[id(edge)] if edge is not None else ids[("constant", id(node), position)]
        entry = {"to": to, "name": step.input_names[position],
                 "shape": list(node.input_shapes[position])}
        if grad is not None:
            entry["grad"] = encode(grad, max_elements)
            senders.setdefault(to, []).append(step.index)
            if type(edge) is not Context:
                previous = leaf_sums.get(to)
                leaf_sums[to] = grad if previous is None else previous + grad
                received[to] = (None, None, step.index)
            if raw[position] is not None and raw[position] != grad.shape:
                entry["raw_shape"] = list(raw[position])
                entry["summed_axes"] = list(summed_axes(raw[position], grad.shape))
        inputs.append(entry)
    saved = [dict(encode(_stacked(a), max_elements), name=name)
             for name, a in zip(step.saved_names, step.saved) if _stacked(a) is not None]
    record = {"index": step.index, "node": ids[id(node)], "op": step.op, "label": step.label,
              "created_at": step.created_at, "module": step.module,
              "grad_output": encode(step.grad_output, max_elements), "grad_inputs": inputs, "saved": saved,
              "predict": _predict_targets(step.index, step.input_names, step.grad_inputs)}
    if step.op == "Attention" and len(step.saved) >= 5:
        record["attention"] = attention_view(step, max_elements)
    records.append(record)
    received[ids[id(node)]] = (grad_norm(step.grad_output), summary(step.grad_output), step.index)
