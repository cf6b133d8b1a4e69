"""The debugging tools' smaller promises of issue 31: break_on by module, the file and function of a
faulty backward, a leaf whose error may be inherited, one numbering for mt.viz.text and the page,
progress on a long check, and detect_anomaly's hint at a causal mask that hides the diagonal."""

import io
import re
import sys
import types

import numpy as np
import pytest
from wrong_ops import WrongTanh

import minitensor as mt
import op_code
from models.transformer import GPT


def test_break_on_a_module_stops_only_in_it(monkeypatch):
    stops = []

    def fake_breakpoint(*args, **kwargs):
        frame = sys._getframe(1)
        stops.append((frame.f_locals["op"], frame.f_locals["module"]))

    monkeypatch.setattr(sys, "breakpointhook", fake_breakpoint)
    mt.manual_seed(0)
    gpt = GPT(vocab=11, context=4, d=8, heads=2, layers=2)
    idx = np.array([[1, 2, 3, 4]])
    with mt.debug.break_on(op="LayerNormFunction", module="blocks.1.ln1"):
        gpt(idx).sum().backward()
    assert stops == [("LayerNormFunction", "gpt.blocks.1.ln1")]  # one stop, not four
    stops.clear()
    with mt.debug.break_on(module="gpt.blocks.0.attn"):
        gpt(idx).sum().backward()
    assert stops and all(module.startswith("gpt.blocks.0.attn") for _, module in stops)
    with pytest.raises(ValueError, match="module must be a module path"):
        mt.debug.break_on(module="")


def test_find_wrong_op_names_the_file_and_function_of_the_faulty_backward():
    def softmax_backward(y, grad, axis):  # a student's kernel, off by 10%, in an accelerator of their own
        return op_code.softmax_backward(y, grad, axis) * 1.1

    accelerator = types.SimpleNamespace(name="student", matmul=np.matmul, softmax_backward=softmax_backward)
    x = mt.randn(3, 4, requires_grad=True)
    weights = mt.randn(3, 4)
    with mt.use_backend(accelerator):
        wrong = mt.debug.find_wrong_op(lambda x: (x.softmax(axis=-1) * weights).sum(), x)
    assert wrong.op == "Softmax"
    assert re.match(r"minitensor/ops/softmax\.py:\d+: Softmax\.backward, which calls "
                    r"tests/test_debug_reports\.py: softmax_backward", wrong.backward_at), wrong.backward_at
    assert "its backward: minitensor/ops/softmax.py" in str(wrong)


def test_a_parameter_blamed_by_leaves_all_says_an_op_upstream_fails_too():
    net = mt.nn.Linear(3, 4)
    x = mt.randn(2, 3, requires_grad=True)
    with pytest.raises(mt.GradcheckError) as info:
        mt.gradcheck(lambda x: WrongTanh.apply(net(x)).sum(), x, leaves="all", seed=0)
    message = str(info.value)
    assert re.search(r"gradcheck failed for net\.(weight|bias)", message)
    assert "an op upstream of net." in message and "fix WrongTanh first" in message
    # a parameter whose own op is wrong gets no such line
    from test_gradcheck_strict import BiasedLayer
    layer = BiasedLayer()
    with pytest.raises(mt.GradcheckError) as info:
        mt.gradcheck(lambda x: layer(x), mt.randn(4, 3, requires_grad=True), leaves="all")
    assert "upstream" not in str(info.value)


def test_viz_text_numbers_nodes_as_the_page_and_backward_steps_do():
    x = mt.randn(3, 4, requires_grad=True)

    def build():  # a tanh used twice: the tree reaches it before backward does
        a = x.tanh()
        return (a * x.exp() + a.relu()).sum()

    loss = build()
    steps = list(mt.debug.backward_steps(build()))
    numbered = dict(re.findall(r"#(\d+) (\w+)", mt.viz.text(loss)))
    assert {int(k): op for k, op in numbered.items()} == {s.index + 1: s.op for s in steps}


def test_a_long_check_prints_progress(monkeypatch):
    monkeypatch.setattr(sys.modules["minitensor.gradcheck"].Progress, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(sys.modules["minitensor.gradcheck"].Progress, "EVERY", 0.0)
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stderr", printed)
    x = mt.randn(30, 30, requires_grad=True)
    assert mt.gradcheck(lambda x: x.tanh(), x)
    assert re.search(r"gradcheck of <lambda>: \d+ of \d+ forward evaluations, \d+ s \(about \d+ s left\)",
                     printed.getvalue())
    printed.truncate(0)
    assert mt.debug.find_wrong_op(lambda x: x.tanh().sum(), x) is None
    assert "find_wrong_op: 1 of 2 ops checked (now Tanh)" in printed.getvalue()


def test_a_quick_check_prints_nothing(capsys):
    assert mt.gradcheck(lambda x: x.tanh(), mt.randn(3, requires_grad=True))
    assert capsys.readouterr().err == ""


def test_detect_anomaly_names_a_causal_mask_that_hides_the_diagonal():
    T = 4
    rng = np.random.default_rng(0)
    q, k, v = (mt.tensor(rng.standard_normal((1, T, 8)), requires_grad=True) for _ in range(3))
    hides_diagonal_too = np.arange(T)[None, :] >= np.arange(T)[:, None]
    with pytest.raises(mt.debug.AnomalyError, match=r"is_causal=True, that hides the diagonal too"):
        with mt.debug.detect_anomaly():
            mt.F.scaled_dot_product_attention(q, k, v, mask=hides_diagonal_too).sum().backward()


def test_a_per_op_check_at_a_kink_judges_only_what_a_difference_can_judge():
    """find_wrong_op meets each op at the inputs it was given: the outer relu of relu(relu(x)) at
    the inner one's exact zeros, a kink. Any slope between the one-sided ones is right there (a
    subgradient); one outside them is still a wrong backward."""
    x = mt.tensor(np.random.default_rng(5).standard_normal((4, 6)), requires_grad=True)
    assert mt.debug.find_wrong_op(lambda x: x.relu().relu().sum(), x) is None
    assert mt.debug.find_wrong_op(lambda x: (x.relu() * x).sum(), x) is None

    class SteepAtZero(mt.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return np.maximum(a, 0)

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            return grad * np.where(a == 0, 5.0, a > 0)  # 5 at the kink: outside [0, 1]

    found = mt.debug.find_wrong_op(lambda x: SteepAtZero.apply(x.relu()).sum(), x)
    assert found is not None and "SteepAtZero" in str(found)
