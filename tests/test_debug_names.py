"""Debugging that names everything (issue 22): saved arrays and inputs by name, nodes and
parameters by their path in the model, break_on watching what a node produces, one relative
error, a hint that works when pasted, and the tools' own one-line bugs caught."""

import inspect
import sys

import numpy as np
import pytest
from wrong_ops import WrongCube, WrongDouble, WrongSquare

import minitensor as mt
from minitensor.gradcheck import GradcheckError, measure
from models.transformer import GPT, Block


def two_layer_gpt():
    mt.manual_seed(0)
    gpt = GPT(vocab=11, context=8, d=8, heads=2, layers=2)
    gpt.to(np.float64)
    idx = np.random.default_rng(0).integers(0, 11, size=(1, 6))
    return gpt, idx


# ----------------------------------------------------------------------------
# 1. Saved arrays and inputs have names, shown where a student looks
# ----------------------------------------------------------------------------


class ScaledSwish(mt.Function):
    """y = x * sigmoid(beta x), saved by name; beta an input too."""

    @staticmethod
    def forward(ctx, x, beta):
        s = 1 / (1 + np.exp(-beta * x))
        ctx.save_for_backward(x=x, beta=beta, s=s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, beta, s = ctx.saved_tensors
        ds = s * (1 - s)
        return grad * (s + x * beta * ds), grad * x * x * ds


class PositionalSave(mt.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


def test_saved_arrays_and_inputs_are_named_in_the_repr_pdb_shows():
    x = mt.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True, name="x")
    beta = mt.tensor(np.full((1, 3), 1.5), requires_grad=True, name="beta")
    y = ScaledSwish.apply(x, beta)  # the line the node names
    node = y.grad_fn
    assert node.saved_names == ("x", "beta", "s") and node.input_names == ("x", "beta")
    assert len(node.saved_tensors) == 3 and node.saved_tensors[2].shape == (2, 3)  # unchanged: a tuple
    text = repr(node)  # what `p ctx` prints in pdb
    assert text.startswith("<ScaledSwish node -> (2, 3)")
    assert "made at tests/test_debug_names.py:" in text and "y = ScaledSwish.apply(x, beta)" in text
    assert "input   x (2, 3) from x" in text and "input   beta (1, 3) from beta" in text
    assert "saved   x (2, 3)" in text and "saved   beta (1, 3)" in text and "saved   s (2, 3)" in text
    assert mt.gradcheck(lambda x, beta: ScaledSwish.apply(x, beta).sum(), x, beta)


def test_the_positional_form_is_named_by_the_arguments_of_the_call():
    a = mt.tensor([1.0, 2.0], requires_grad=True)
    b = mt.tensor([3.0, 4.0], requires_grad=True)
    out = PositionalSave.apply(a, b)  # forward calls ctx.save_for_backward(a, b)
    assert out.grad_fn.saved_names == ("a", "b") and out.grad_fn.input_names == ("a", "b")
    assert "saved   b (2,)" in repr(out.grad_fn)
    out.sum().backward()
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])
    assert "saved   (freed by backward; retain_graph=True keeps them)" in repr(out.grad_fn)


WITHOUT_SOURCE = inspect.getsource(PositionalSave).replace("PositionalSave", "NoSource")  # the same op, made by exec


def test_an_op_whose_source_cannot_be_read_names_its_saved_arrays_by_position():
    scope = {"mt": mt}
    exec(compile(WITHOUT_SOURCE, "<made by exec>", "exec"), scope)
    a = mt.tensor([1.0, 2.0], requires_grad=True)
    out = scope["NoSource"].apply(a, a)
    assert out.grad_fn.saved_names == ("saved[0]", "saved[1]")
    out.sum().backward()
    np.testing.assert_array_equal(a.grad, [2.0, 4.0])


def test_every_builtin_op_names_what_it_saves():
    """No op of the library saves by position: each saved array is named where it is saved."""
    x = mt.tensor(np.random.default_rng(0).random((3, 4)) + 0.5, requires_grad=True)
    w = mt.tensor(np.random.default_rng(1).random((4, 2)), requires_grad=True)
    made = [x * w.T[0], x / 2.0, x ** 2.0, x.exp(), x.log(), x.sqrt(), x.tanh(), x.sigmoid(), x.relu(), x.abs(),
            x.clip(0.6, 1.0), x @ w, x.softmax(), x.log_softmax(), x.var(), x.max(), mt.maximum(x, x * 0.5),
            mt.nn.functional.gelu(x), mt.nn.functional.silu(x), mt.nn.functional.mse_loss(x, x.detach() * 0),
            mt.nn.functional.cross_entropy(x, np.array([0, 1, 2]))]
    for t in made:
        names = t.grad_fn.saved_names
        assert names and not any(n.startswith("saved[") for n in names), (t.grad_fn.name, names)


def test_attention_names_q_k_v_in_trace_and_steps(capsys):
    mt.manual_seed(0)
    block = Block(8, 2)
    x = mt.randn(1, 4, 8, requires_grad=True)
    loss = block(x, is_causal=True).sum()
    with mt.debug.trace():
        loss.backward()
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line[5:].startswith("Attention"))
    attention = "\n".join(lines[at:at + 3])
    assert "  in block.attn  [models/attention.py" in attention
    assert "grad in q (1, 2, 1, 4, 4)" in attention and ", k (1, 2, 1, 4, 4)" in attention and ", v (1, 2, 1, 4, 4)" in attention
    assert "saved q (1, 2, 1, 4, 4), k (1, 2, 1, 4, 4), v (1, 2, 1, 4, 4), out (1, 2, 1, 4, 4), softmax_stats" in attention
    steps = list(mt.debug.backward_steps(block(x, is_causal=True).sum()))
    step = next(s for s in steps if s.op == "Attention")
    assert step.input_names == ("q", "k", "v") and step.saved_names[:4] == ("q", "k", "v", "out")
    assert step.module == "block.attn"


def test_dot_shows_saved_names_module_and_leaf_names():
    mt.manual_seed(0)
    block = Block(8, 2)
    x = mt.randn(1, 4, 8, requires_grad=True)
    x.name = "x"
    dot = mt.viz.to_dot(block(x, is_causal=True).sum())
    attention = next(line for line in dot.splitlines() if "label=\"Attention" in line)
    assert "block.attn" in attention and "saved: q (1, 2, 1, 4, 4), k" in attention
    assert "inputs: q, k, v" in attention
    assert "block.attn.w_q.weight" in dot and "'x'" in dot


# ----------------------------------------------------------------------------
# 2. Nodes and parameters by their path in the model
# ----------------------------------------------------------------------------


def test_two_blocks_of_a_gpt_are_told_apart_in_trace(capsys):
    gpt, idx = two_layer_gpt()
    loss = gpt(idx).sum()
    with mt.debug.trace():
        loss.backward()
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if line[5:].startswith("Attention")]
    assert len(heads) == 2
    assert "in gpt.blocks.1.attn" in heads[0] and "in gpt.blocks.0.attn" in heads[1]
    assert "to gpt.blocks.1.attn.w_q.bias" in out and "to gpt.blocks.0.attn.w_q.bias" in out
    nodes = mt.autograd.topological_order(gpt(idx).sum().grad_fn)
    assert {mt.debug.module_path(n) for n in nodes if n.name == "LayerNormFunction"} == {
        "gpt.blocks.0.ln1", "gpt.blocks.0.ln2", "gpt.blocks.1.ln1", "gpt.blocks.1.ln2", "gpt.ln"}


class Net:  # a plain object holding layers, as a student writes one
    def __init__(self):
        mt.manual_seed(0)
        self.fc1, self.fc2 = mt.nn.Linear(3, 4), mt.nn.Linear(4, 1)


def test_layers_called_directly_get_their_path_and_no_duplicates():
    model = mt.nn.Sequential(mt.nn.Linear(3, 4), mt.nn.Linear(4, 2))
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    loss = model[1](model[0](x)).sum()
    labels = sorted(v for v in mt.debug.leaf_labels(loss).values() if v)
    assert labels == ["model.0.bias", "model.0.weight", "model.1.bias", "model.1.weight"]
    net = Net()
    out = net.fc2(net.fc1(x).relu()).sum()
    assert sorted(v for v in mt.debug.leaf_labels(out).values() if v) == [
        "net.fc1.bias", "net.fc1.weight", "net.fc2.bias", "net.fc2.weight"]
    assert {mt.debug.module_path(n) for n in mt.autograd.topological_order(out.grad_fn)} >= {"net.fc1", "net.fc2"}
    with pytest.raises(GradcheckError) as info:  # fails on WrongDouble, and lists the layers' parameters once each
        mt.gradcheck(lambda x: net.fc2(net.fc1(x).relu()).sum() + WrongDouble.apply(x).sum(), x)
    report = str(info.value)
    assert "not checked" in report
    listed = report.split("not checked (leaves fn uses besides its inputs; leaves=\"all\" checks them): ")[1].split("\n")[0]
    assert sorted(listed.split(", ")) == ["net.fc1.bias", "net.fc1.weight", "net.fc2.bias", "net.fc2.weight"]


def test_ops_inside_a_sequential_show_which_layer_made_them():
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(3, 4), mt.nn.Linear(4, 2))
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    steps = list(mt.debug.backward_steps(model(x).sum()))
    assert [s.module for s in steps if s.op == "MatMul"] == ["model.1", "model.0"]


def test_a_model_without_a_name_in_your_code_still_gets_a_unique_one():
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    layers = [mt.nn.Linear(3, 1), mt.nn.Linear(3, 1)]  # a list: no variable and no Module names them
    out = (layers[0](x) + layers[1](x)).sum()
    names = sorted(v for v in mt.debug.leaf_labels(out).values() if v)
    assert len(names) == 4 and len(set(names)) == 4, names


def test_anomaly_report_names_the_module():
    gpt, idx = two_layer_gpt()
    gpt.blocks[1].ln2.eps = -100.0  # var + eps < 0: the square root in ln2 makes a NaN from finite inputs
    with pytest.raises(mt.debug.AnomalyError, match=r"LayerNormFunction's forward produced nan[^\n]*\n"
                       r"  made at [^\n]*\n  in module gpt\.blocks\.1\.ln2$"):
        with mt.debug.detect_anomaly(), np.errstate(invalid="ignore"):
            gpt(idx).sum().backward()


# ----------------------------------------------------------------------------
# 4. One relative error; a hint that works when pasted
# ----------------------------------------------------------------------------


def test_the_report_states_one_relative_error_and_its_definition():
    x = mt.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    with pytest.raises(AssertionError) as info:
        mt.gradcheck(lambda x: WrongDouble.apply(x).sum(), x)
    report = str(info.value)
    expected = 0.5 / (2.0 + 1e-5 / 1e-3)  # |2.5 - 2| / (|2| + atol/rtol)
    line = next(line for line in report.splitlines() if "relative error" in line)
    assert f"relative error {expected:.3g} = |analytic - numeric| / (|numeric| + atol/rtol)" in line
    measured = measure(lambda x: WrongDouble.apply(x).sum(), x)
    assert measured.relative_error == pytest.approx(expected) and not measured.passed


def test_the_hint_runs_when_pasted():
    x = mt.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)

    def loss_of(x):
        return (WrongDouble.apply(x) * 3).sum()

    with pytest.raises(AssertionError) as info:
        mt.gradcheck(loss_of, x)
    hint = str(info.value).splitlines()[-1]
    call = hint.split("run: ")[1]
    assert call == "mt.debug.find_wrong_op(loss_of, x)"
    found = eval(call, {"mt": mt}, {"loss_of": loss_of, "x": x})
    assert found.op == "WrongDouble"
    with pytest.raises(AssertionError) as info:  # a lambda has no name to paste: the hint says so
        mt.gradcheck(lambda x: WrongDouble.apply(x).sum(), x)
    assert "find_wrong_op(fn, x), with the function and the inputs you gave gradcheck" in str(info.value)


# ----------------------------------------------------------------------------
# 5. break_on watches what each node produces
# ----------------------------------------------------------------------------


def _stops(monkeypatch):
    stops = []

    def fake_breakpoint(*args, **kwargs):
        frame = sys._getframe(1)
        stops.append((frame.f_locals["op"], frame.f_locals["reason"]))

    monkeypatch.setattr(sys, "breakpointhook", fake_breakpoint)
    return stops


def test_break_on_nan_stops_where_sqrt_of_a_negative_flows_into_a_leaf(monkeypatch):
    stops = _stops(monkeypatch)
    x = mt.tensor([-1.0, 4.0], requires_grad=True)
    with mt.debug.break_on(nan=True), np.errstate(invalid="ignore"):
        (x.sqrt() * 2).sum().backward()  # Sqrt gets a finite gradient and sends nan to the leaf x
    assert [op for op, _ in stops] == ["Sqrt"]
    assert stops[0][1] == "Sqrt.backward produces a gradient for x that holds nan (1 of 2 values)"


def test_break_on_grad_norm_stops_where_log_of_a_tiny_value_flows_into_a_leaf(monkeypatch):
    stops = _stops(monkeypatch)
    x = mt.tensor([1e-8, 1.0], requires_grad=True)
    with mt.debug.break_on(grad_norm_above=1e6):
        x.log().sum().backward()  # dlog/dx = 1/x = 1e8 goes straight into the leaf x
    assert [op for op, _ in stops] == ["Log"]
    assert stops[0][1].startswith("Log.backward produces a gradient for x that has norm 1e+08 > 1e+06")
    np.testing.assert_allclose(x.grad, [1e8, 1.0])  # the backward ran once for real: the gradients are right


# ----------------------------------------------------------------------------
# 8. The tools' one-line bugs, each caught
# ----------------------------------------------------------------------------


def test_detect_anomaly_around_backward_names_the_first_op_that_saved_a_nan():
    """The first in forward order (log of a negative), not the last op that saved a NaN."""
    x = mt.tensor([-1.0, 2.0], requires_grad=True)
    with np.errstate(invalid="ignore"):
        h = x.log()  # log(-1) = NaN (Log saves x, which holds none)
        t = h.tanh()  # the first op that saves a NaN: its output
        y = t.exp()  # saves a NaN too, and its backward is the first to make one
    with pytest.raises(mt.debug.AnomalyError) as info:
        with mt.debug.detect_anomaly(), np.errstate(invalid="ignore"):
            y.sum().backward()
    message = str(info.value)
    assert message.startswith("detect_anomaly: Exp.backward produced nan")
    first = message.split("The first op (in forward order) whose saved values hold NaN: ")[1]
    assert first.startswith("Tanh,") and "t = h.tanh()" in first.split("\n")[0]


def test_find_wrong_op_names_the_first_wrong_op_in_forward_order():
    x = mt.tensor(np.array([0.5, 1.5, -2.0]), requires_grad=True)
    wrong = mt.debug.find_wrong_op(lambda x: WrongSquare.apply(WrongCube.apply(x)).sum(), x)
    assert wrong.op == "WrongCube"  # made first; WrongSquare, made after it, is wrong too
    wrong = mt.debug.find_wrong_op(lambda x: WrongCube.apply(WrongSquare.apply(x)).sum(), x)
    assert wrong.op == "WrongSquare"


class NanBackward(mt.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        return grad * np.nan


@pytest.mark.parametrize("size", [3, 5000])  # the full Jacobian, and the projected check
def test_gradcheck_fails_on_a_nan_analytic_gradient(size):
    x = mt.tensor(np.linspace(0.1, 1, size), requires_grad=True)
    with pytest.raises(AssertionError, match=r"relative error inf"):
        mt.gradcheck(lambda x: NanBackward.apply(x).sum(), x)


# ----------------------------------------------------------------------------
# 7. Pictures that do not mislead
# ----------------------------------------------------------------------------


def _overlapping_texts(figure):
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in figure.axes[0].texts if t.get_text()]
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


def test_draw_of_every_op_of_a_block_has_no_overlapping_labels_and_points_to_dot():
    import matplotlib

    matplotlib.use("Agg")
    mt.manual_seed(0)
    block = Block(16, 4)
    x = mt.randn(2, 5, 16, requires_grad=True)
    figure = mt.viz.draw(block(x, is_causal=True).sum(), fold=False)
    assert _overlapping_texts(figure) == []
    assert "mt.viz.to_dot(loss)" in figure.axes[0].get_title(loc="left")


def test_draw_of_a_gpt_counts_the_tied_embedding_once_and_routes_its_edge_around_the_boxes():
    import matplotlib

    matplotlib.use("Agg")
    gpt, idx = two_layer_gpt()
    figure = mt.viz.draw(gpt(idx).sum())
    ax = figure.axes[0]
    texts = {t.get_text().split(":")[0]: t for t in ax.texts if ":" in t.get_text()}
    assert texts["tok"].get_text().endswith(f"{gpt.tok.weight.size:,} parameters")
    assert texts["head"].get_text().endswith("0 parameters (shares gpt.tok.weight)")
    counts = [int(t.get_text().rsplit(", ", 1)[1].split(" ")[0].replace(",", "")) for t in texts.values()]
    assert sum(counts) == gpt.num_parameters()
    # the tok -> head edge: every segment of it lies right of every box, or in a gap between rows
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in ax.texts if t.get_text()]
    tok_x = texts["tok"].get_position()[0]
    tied = [line for line in ax.lines if line.get_data()[0][0] == tok_x]
    assert len(tied) == 1  # the tok -> head edge is drawn routed, not as a straight arrow
    for line in ax.lines:
        points = ax.transData.transform(np.column_stack(line.get_data()))[1:]  # after leaving its own box
        for (x0, y0), (x1, y1) in zip(points[:-1], points[1:]):
            for box in boxes:
                crosses_x = min(x0, x1) < box.x1 - 1 and max(x0, x1) > box.x0 + 1
                crosses_y = min(y0, y1) < box.y1 - 1 and max(y0, y1) > box.y0 + 1
                assert not (crosses_x and crosses_y), "a routed edge runs through a box"


def test_the_readme_trace_excerpt_is_what_trace_prints(capsys, monkeypatch):
    import linecache
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", readme, flags=re.S | re.M)
    excerpt = next(body for lang, body in blocks if body.startswith("  14 Attention"))
    snippet = next(body for lang, body in blocks if lang == "python" and "backward_steps" in body)
    at = next(i for i, line in enumerate(snippet.splitlines()) if "loss = block(x, is_causal=True).sum()" in line)
    head = snippet.splitlines()[: at - 1]  # the imports, the block and x, as the README's snippet makes them
    source = "\n".join(head + ["if True:", "    loss = block(x, is_causal=True).sum()"])  # on its line there
    assert f"README.md:{at + 1}: loss = block(x, is_causal=True).sum()" in excerpt
    scope = {}
    # the tools quote the snippet's own line (loss = ...), as when the snippet runs from a file
    lines = [line + "\n" for line in snippet.splitlines()]
    monkeypatch.setitem(linecache.cache, "README.md", (len(snippet), None, lines, "README.md"))
    exec(compile(source, "README.md", "exec"), scope)
    with mt.debug.trace():
        scope["loss"].backward()
    printed = capsys.readouterr().out.splitlines()
    at = next((i for i, line in enumerate(printed) if line == excerpt.splitlines()[0]), None)
    assert at is not None, [line for line in printed if "Attention  in" in line]
    assert printed[at:at + 3] == excerpt.splitlines()
