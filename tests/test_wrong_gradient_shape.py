"""A backward that returns a gradient of the wrong shape is named where it happens (issue 31): the
op, the module, the input and where it comes from, both shapes, and a hint when one is the other
transposed. Every tool reports it as that op's error; none falls over with a broadcasting error."""

import io
import json
import re

import numpy as np
import pytest

import minitensor as mt
from minitensor import autograd
from minitensor.autograd_errors import GradientShapeError, UnbroadcastError


class TransposedMatMul(mt.Function):
    """x @ w whose backward gives w's gradient transposed: a student's slip on a non-square weight."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight.T, (x.T @ grad).T


class Layer(mt.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = mt.nn.Parameter(mt.tensor(np.random.default_rng(0).standard_normal((3, 5))))

    def forward(self, x):
        return TransposedMatMul.apply(x, self.weight)


def setup():
    net = Layer()
    x = mt.tensor(np.random.default_rng(1).standard_normal((4, 3)), requires_grad=True)

    def loss_of(x):
        return net(x).tanh().sum()

    return net, x, loss_of


NAMED = [r"TransposedMatMul\.backward returned a gradient of shape \(5, 3\) for its input weight",
         r"the leaf net\.weight", r"which has shape \(3, 5\)", r"\(5, 3\) is \(3, 5\) transposed"]


def _names_it(text, module=True):
    for pattern in NAMED:
        assert re.search(pattern, text), (pattern, text)
    assert "cannot be summed down" not in text
    if module:
        assert "in module net" in text


def test_backward_names_the_op_the_input_the_module_and_the_transpose():
    net, x, loss_of = setup()
    with pytest.raises(GradientShapeError) as info:
        loss_of(x).backward()
    _names_it(str(info.value))
    assert info.value.returned == (5, 3) and info.value.expected == (3, 5) and info.value.node.name == "TransposedMatMul"


def test_gradcheck_reports_it_as_a_failure_of_that_op():
    net, x, loss_of = setup()
    with pytest.raises(mt.GradcheckError) as info:
        mt.gradcheck(loss_of, x)
    _names_it(str(info.value))


def test_find_wrong_op_names_the_op_and_its_module():
    net, x, loss_of = setup()
    wrong = mt.debug.find_wrong_op(loss_of, x)
    assert wrong.op == "TransposedMatMul" and wrong.module == "net"
    assert "returned a gradient of shape (5, 3)" in wrong.report and "transposed" in wrong.report


def test_detect_anomaly_and_trace_stop_with_the_ops_error():
    net, x, loss_of = setup()
    with pytest.raises(GradientShapeError) as info:
        with mt.debug.detect_anomaly():
            loss_of(x).backward()
    _names_it(str(info.value))
    printed = io.StringIO()
    with pytest.raises(GradientShapeError):
        with mt.debug.trace(file=printed):
            loss_of(x).backward()
    assert "Tanh" in printed.getvalue()  # the steps before it were traced


def test_the_page_shows_the_steps_that_ran_and_the_op_that_stopped_backward(tmp_path):
    net, x, loss_of = setup()
    path = mt.viz.html(None, tmp_path / "check.html", check=(loss_of, x))
    text = path.read_text()
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1))
    assert data["stopped"]["op"] == "TransposedMatMul" and data["stopped"]["step"] == len(data["steps"]) == 2
    _names_it(data["stopped"]["message"])
    checked = [n for n in data["nodes"] if n.get("check")]
    assert [n["op"] for n in checked if not n["check"]["passed"]] == ["TransposedMatMul"]


def test_an_unbroadcast_that_forgets_the_leading_axes_is_not_blamed_on_add(monkeypatch):
    def forgets_leading_axes(grad_shape, shape):  # a student's summed_axes, here (2, 3) -> (3,): no axis at all
        return ()

    monkeypatch.setattr(autograd, "summed_axes", forgets_leading_axes)
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    b = mt.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(UnbroadcastError) as info:
        (x + b).sum().backward()
    message = str(info.value)
    assert "summed_axes" in message and "(2, 3)" in message and "(3,)" in message
    assert "Add.backward" not in message and "reshape" not in message


def test_a_right_broadcast_gradient_still_passes():
    x = mt.tensor(np.ones((2, 3)), requires_grad=True)
    b = mt.tensor(np.ones((1, 3)), requires_grad=True)
    (x * b).sum().backward()
    assert b.grad.shape == (1, 3) and np.all(b.grad == 2)


def test_break_on_nan_meets_a_wrong_shape_and_the_engine_names_it(monkeypatch):
    net, x, loss_of = setup()
    monkeypatch.setattr("sys.breakpointhook", lambda *a, **k: None)
    with pytest.raises(GradientShapeError, match=r"TransposedMatMul\.backward returned a gradient of shape \(5, 3\)"):
        with mt.debug.break_on(nan=True):
            loss_of(x).backward()


def test_a_gradient_with_leading_axes_the_output_never_had_is_a_wrong_shape():
    """A (3, 4, 5) gradient for a (4, 5) input whose output is (4, 5) would be summed down without
    a word (and be 3x too large); no broadcasting in forward made that axis, so it is refused."""
    class Wide(mt.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return np.broadcast_to(grad * 2 / 3, (3,) + grad.shape)  # the right total, the wrong shape

    x = mt.tensor(np.ones((4, 5)), requires_grad=True)
    with pytest.raises(GradientShapeError, match=r"gradient of shape \(3, 4, 5\) .* leading axes \(3,\) are not the output's \(4, 5\)"):
        Wide.apply(x).sum().backward()
    a, b = mt.tensor(np.ones((3, 4)), requires_grad=True), mt.tensor(np.ones((2, 4, 5)), requires_grad=True)
    (a @ b).sum().backward()  # batch axes added by broadcasting in forward: summed down, as before
    assert a.grad.shape == (3, 4) and np.all(a.grad == 10.0)
