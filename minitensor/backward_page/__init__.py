"""mt.viz.html(loss, path): one self-contained HTML page that steps through the backward pass.

    mt.viz.html(loss, "backward.html")                         # open it in any browser, from disk
    mt.viz.html(loss, "homework.html", predict=True)           # guess a gradient before it is shown
    mt.viz.html(None, "check.html", check=(fn, x))             # each node coloured by its op's gradcheck
    mt.viz.html(None, "compare.html", compare=(model, ref, x)) # each node coloured by mt.debug.compare's verdict

The page is one file: the data (JSON), the script (page.js) and the styles (page.css) are read
here and inlined, so it needs no network, no server and no library, opens from file:// and can
be mailed. The script is plain hand-written JavaScript: nothing to pin, fetch or trust, and a
student can read it with "view source".
"""

import base64
import json
import os
import pathlib
import re
import tempfile

import numpy as np

from ..autograd import topological_order
from ..tensor import Tensor
from . import check as checking
from . import collect
from . import compare_mode

_HERE = pathlib.Path(__file__).resolve().parent


def html(loss, path, predict=False, check=None, max_elements=4096, retain_graph=False, tokens=None, compare=None):
    """Run loss's backward pass (as loss.backward() would: leaves get their .grad) one node at a
    time, in mt.debug.backward_steps order, and write a page that steps through it.

    loss          a Tensor that requires grad, made by at least one op (None with check: fn(*inputs))
    path          where to write the page; an existing file is replaced atomically
    predict       hide each node's gradients until the student guesses one element or reveals it
    check         (fn, *inputs): re-check every op of fn(*inputs) alone against finite differences
                  (what mt.debug.find_wrong_op does) and colour each node by its relative error
    max_elements  arrays with more elements are summarised (norm, min, max, histogram), not embedded;
                  attention maps are stored one (batch, head) slice at a time, at any T
    tokens        the tokens of the sequence (strings), to label the query and key axes of attention
    compare       (model, reference, *inputs): mt.debug.compare's verdict on every node of model(*inputs)
                  (loss None): the culprit red, the nodes that only inherited its error orange, the
                  agreeing ones green; the culprit's panel shows its worst element
    Returns the path written.
    """
    path = pathlib.Path(path)
    folder = path.parent  # pathlib.Path("page.html").parent is Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"viz.html: the folder {str(folder)!r} of {str(path)!r} does not exist; "
                                f"create it first (os.makedirs) or write the page elsewhere")
    if path.is_dir():
        raise IsADirectoryError(f"viz.html: {str(path)!r} is a folder; give a file name such as page.html")
    if not isinstance(max_elements, int) or max_elements < 1:
        raise ValueError(f"viz.html: max_elements must be a positive integer, got {max_elements!r}")
    if tokens is not None and (isinstance(tokens, str) or not hasattr(tokens, "__len__")):
        raise TypeError(f"viz.html: tokens must be a list of strings, one per position, got {tokens!r}")
    if check is not None:
        if not isinstance(check, (tuple, list)) or not check or not callable(check[0]):
            raise TypeError("viz.html: check must be a tuple (fn, *inputs) with fn callable, e.g. check=(f, x, w)")
    verdicts = summary = None
    if compare is not None:
        if loss is not None or check is not None:
            raise TypeError("viz.html: compare=(model, reference, *inputs) draws the model's own graph; "
                            "pass loss=None and no check")
        loss, verdicts, summary = compare_mode.run(compare)
    if loss is None:
        if check is None:
            raise TypeError("viz.html: give the loss tensor (or check=(fn, *inputs) to build it)")
        loss = check[0](*check[1:])
    _check_loss(loss)

    checks = None
    if check is not None:
        checked_output, results = checking.per_op_errors(check[0], check[1:])
        checks = _match(loss, checked_output, results)

    ids, nodes, edges = collect.layout(loss.grad_fn, loss.data)
    if checks is not None:
        for node, result in zip(topological_order(loss.grad_fn), checks):
            nodes[ids[id(node)]]["check"] = result
    if verdicts is not None:
        for node in topological_order(loss.grad_fn):
            if id(node) in verdicts:
                nodes[ids[id(node)]]["compare"] = verdicts[id(node)]
    records, received, senders, stopped = collect.steps(loss, ids, max_elements, retain_graph)
    for node_id, (grad_norm, grad, done_at) in received.items():
        nodes[node_id].update(grad_norm=grad_norm, grad=grad, done_at=done_at)
    for node_id, sent_by in senders.items():
        nodes[node_id]["senders"] = sent_by
    data = {"nodes": nodes, "edges": edges, "loss": collect.encode(loss.data, max_elements), "steps": records,
            "predict": bool(predict), "checked": checks is not None, "max_elements": max_elements,
            "tokens": None if tokens is None else [str(t) for t in tokens], "stopped": stopped,
            "compared": summary}
    _write_atomically(path, _page(data))
    return path


def _check_loss(loss):
    if not isinstance(loss, Tensor):
        raise TypeError(f"viz.html: loss must be a minitensor Tensor, got a {type(loss).__name__}")
    if not loss.requires_grad:
        raise ValueError(f"viz.html: the tensor (shape {loss.shape}) does not require grad, so it has no "
                         f"backward pass to show; make its inputs with requires_grad=True, outside mt.no_grad()")
    if loss.grad_fn is None:
        raise ValueError(f"viz.html: the tensor (shape {loss.shape}) is a leaf: its graph has no nodes to "
                         f"step through; pass the result of an op (e.g. loss = (x * x).sum())")
    if loss.data.size != 1:
        raise ValueError(f"viz.html: loss must have one element (its backward starts from dL/dL = 1), "
                         f"got shape {loss.shape}; reduce it first, e.g. loss.sum()")


def _match(loss, checked_output, results):
    """The check ran fn on float64 copies; its graph must be loss's, node for node."""
    ours = topological_order(loss.grad_fn)
    theirs = topological_order(checked_output.grad_fn)
    if len(ours) != len(theirs) or any(a.name != b.name for a, b in zip(ours, theirs)):
        raise ValueError(
            f"viz.html: check's fn(*inputs) builds a different graph ({len(theirs)} nodes: "
            f"{', '.join(n.name for n in theirs[:6])}...) from loss's ({len(ours)} nodes: "
            f"{', '.join(n.name for n in ours[:6])}...); pass loss=None to show fn(*inputs) itself")
    return results


POOLED = 48  # value lists longer than this go to the pool, once each, as base64 float32


def _pooled(data):
    """Move every long list of values (an array's "data", an attention slice's "weights" and
    "d_scores") into one pool, each distinct list once, as base64 of its float32 bytes: the
    gradient a node receives is the one its consumer sent, so half the arrays repeat, and base64
    of float32 is half the size of the numbers written out. The page's script puts them back."""
    pool, index = [], {}

    def visit(item):
        if isinstance(item, dict):
            for key, value in item.items():
                if key in ("data", "weights", "d_scores") and isinstance(value, list) and len(value) > POOLED:
                    raw = np.array([np.nan if v is None else v for v in value], dtype="<f4").tobytes()
                    if raw not in index:
                        index[raw] = len(pool)
                        pool.append(base64.b64encode(raw).decode("ascii"))
                    item[key] = {"pool": index[raw]}
                else:
                    visit(value)
        elif isinstance(item, list):
            for value in item:
                visit(value)

    visit(data)
    data["pool"] = pool
    return data


NONFINITE = {"inf": "__inf__", "-inf": "__-inf__", "nan": "__nan__"}  # page.js's reviver reads them back


def _finite_json(item):
    """item with every float NaN, inf or -inf written as a NONFINITE string: JSON has no infinity,
    and a graph holds them by design (the -inf a mask saves, the inf norm of a gradient that holds one)."""
    if isinstance(item, dict):
        return {key: _finite_json(value) for key, value in item.items()}
    if isinstance(item, list):
        return [_finite_json(value) for value in item]
    if isinstance(item, float) and not np.isfinite(item):
        return NONFINITE[str(item)]
    return item


def _page(data):
    data = _finite_json(_pooled(data))
    script = (_HERE / "page.js").read_text()
    style = (_HERE / "page.css").read_text()
    # "<" only occurs inside JSON strings, where \u003c means the same: no source line that
    # reads "</script>" or "<!--" can end the data block early.
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    parts = {"STYLE": style, "DATA": payload, "SCRIPT": script}
    return re.sub(r"/\*(STYLE|DATA|SCRIPT)\*/", lambda match: parts[match.group(1)], _TEMPLATE)


def _write_atomically(path, text):
    """Write beside the target, then rename over it: a reader never sees half a page."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes it private; a page is for sharing
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>minitensor: the backward pass, node by node</title>
<style>/*STYLE*/</style>
</head>
<body>
<header>
  <h1>Backward pass</h1>
  <div id="controls">
    <button id="first" title="Home">&laquo; start</button>
    <button id="prev" title="Left arrow">&#x25C0; prev</button>
    <input id="slider" type="range" min="0" value="0" aria-label="step">
    <button id="next" title="Right arrow">next &#x25B6;</button>
    <button id="last" title="End">end &raquo;</button>
    <span id="counter"></span>
    <span id="score"></span>
  </div>
</header>
<div id="banner"></div>
<main>
  <section id="graph-pane"><svg id="graph" xmlns="http://www.w3.org/2000/svg"></svg></section>
  <section id="panel"></section>
</main>
<script id="data" type="application/json">/*DATA*/</script>
<script>/*SCRIPT*/</script>
</body>
</html>
"""
