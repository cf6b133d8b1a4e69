"""Compare mode: mt.viz.html(None, path, compare=(model, reference, *inputs)) runs mt.debug.compare
and draws the model's graph with each node coloured by its verdict (the culprit, the nodes that only
inherited its error, the agreeing ones, those with no counterpart); the culprit's panel shows its
worst element. The graph drawn is the model's own run on the same inputs, then (output * upstream).sum(),
so that its backward starts from compare's upstream gradient (the last two nodes have no verdict)."""

import numpy as np

from .. import grad_mode
from ..debug.compare_graphs import compare as compare_graphs
from ..debug.compare_record import fresh_leaf
from ..debug.compare_report import first_text, worst_text
from ..debug.observer import Tool
from ..tensor import Tensor


class _Nodes(Tool):
    """The nodes forward records, in the order compare's recording sees them."""

    def __init__(self):
        self.nodes = []

    def after_forward(self, function, ctx, arrays, options, output):
        if True in ctx.needs_input_grad and grad_mode.is_grad_enabled():
            self.nodes.append(ctx)


def run(compare):
    """(loss, {id(node): its verdict for the page}, the banner's text) for compare=(model, reference, *inputs)."""
    if not isinstance(compare, (tuple, list)) or len(compare) < 2 or not callable(compare[0]) \
            or not callable(compare[1]):
        raise TypeError("viz.html: compare must be a tuple (model, reference, *inputs) with model and reference "
                        "callable, e.g. compare=(block, reference_block, x)")
    model, reference, inputs = compare[0], compare[1], compare[2:]
    comparison = compare_graphs(model, reference, *inputs)
    seen = _Nodes()
    with seen:
        output = model(*[fresh_leaf(a) for a in inputs])
    loss = (output * Tensor(np.asarray(comparison.upstream, dtype=output.dtype))).sum()
    if [n.name for n in seen.nodes] != [row.op for row in comparison.rows]:
        raise ValueError("viz.html(compare=...): the model built a different graph on its second run; "
                         "compare a model whose graph does not change from call to call")
    first = comparison.first
    verdicts = {}
    for node, row in zip(seen.nodes, comparison.rows):
        verdicts[id(node)] = {"verdict": row.verdict, "where": row.where, "first": row is first,
                              "worst": worst_text(row) if row.worst is not None else None}
    return loss, verdicts, first_text(comparison)
