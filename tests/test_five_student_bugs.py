"""Issue 31's five planted student bugs: each is named by at least one tool within two steps, and
no tool falls over on any (a tool may stop with the op's own, named error)."""

import types

import numpy as np
import pytest

import minitensor as mt
from minitensor.autograd_errors import GradientShapeError
import op_code
from models.layernorm import LayerNorm
from test_gradcheck_strict import BiasedLayer
from test_viz_html_edges import attention_loss, diagonal_too_mask
from test_wrong_gradient_shape import setup as transposed_setup


def _every_tool(fn, x, tmp_path):
    """Run each tool on fn(x): what it said, per tool (an exception it raised counts as what it said,
    if it is a clear one: GradcheckError, AnomalyError or GradientShapeError)."""
    said = {}
    for name, call in (("gradcheck", lambda: mt.gradcheck(fn, x, leaves="all")),
                       ("find_wrong_op", lambda: mt.debug.find_wrong_op(fn, x)),
                       ("page", lambda: mt.viz.html(None, tmp_path / "check.html", check=(fn, x)))):
        try:
            said[name] = str(call())
        except (mt.GradcheckError, GradientShapeError) as error:
            said[name] = str(error)
    try:
        with mt.debug.detect_anomaly():
            fn(x).sum().backward()
        said["detect_anomaly"] = "passed"
    except (mt.debug.AnomalyError, GradientShapeError) as error:
        said["detect_anomaly"] = str(error)
    return said


def test_softmax_without_the_subtraction_is_named_by_detect_anomaly(tmp_path):
    def softmax(x, axis=-1, mask=None):  # a student's forward: exp overflows for large scores
        e = np.exp(np.where(mask, -np.inf, x) if mask is not None else x)
        return e / e.sum(axis=axis, keepdims=True)

    accelerator = types.SimpleNamespace(name="student", matmul=np.matmul, softmax=softmax)  # the student's kernel
    x = mt.tensor((np.random.default_rng(0).standard_normal((3, 5)) * 200).astype(np.float32), requires_grad=True)
    with mt.use_backend(accelerator), np.errstate(over="ignore", invalid="ignore"):
        said = _every_tool(lambda x: (x.softmax(axis=-1) * 2.0).sum(), x, tmp_path)
    assert "Softmax's forward produced nan" in said["detect_anomaly"]
    assert "gradcheck failed" in said["gradcheck"]  # in float32 its backward disagrees with float64


def test_layer_norm_without_the_mean_term_is_named_by_find_wrong_op(tmp_path):
    def layer_norm_backward(dy, x, weight, mean, rstd):  # a per-row shift, as a forgotten mean term leaves
        dx, dweight, dbias = op_code.layer_norm_backward(dy, x, weight, mean, rstd)
        return dx + 0.1 * np.abs(dx).mean(axis=-1, keepdims=True), dweight, dbias

    accelerator = types.SimpleNamespace(name="student", matmul=np.matmul, layer_norm_backward=layer_norm_backward)
    norm = LayerNorm(6)
    x = mt.tensor(np.random.default_rng(0).standard_normal((2, 3, 6)), requires_grad=True)
    with mt.use_backend(accelerator):
        said = _every_tool(lambda x: norm(x).tanh().sum(), x, tmp_path)
    assert "LayerNormFunction" in said["find_wrong_op"] and "which calls tests/test_five_student_bugs.py" in \
        said["find_wrong_op"]
    assert "gradcheck failed for input 0" in said["gradcheck"]


def test_a_transposed_weight_gradient_is_named_by_every_tool(tmp_path):
    net, x, loss_of = transposed_setup()
    said = _every_tool(lambda x: net(x).sum(), x, tmp_path)
    for tool in ("gradcheck", "find_wrong_op", "detect_anomaly"):
        assert "TransposedMatMul.backward returned a gradient of shape (5, 3)" in said[tool], tool


def test_a_mask_hiding_the_diagonal_is_named_by_detect_anomaly():
    with pytest.raises(mt.debug.AnomalyError, match=r"that hides the diagonal too"):
        with mt.debug.detect_anomaly():
            attention_loss(8, diagonal_too_mask(8)).backward()


def test_a_bias_averaged_is_named_by_gradcheck(tmp_path):
    layer = BiasedLayer()
    x = mt.randn(4, 3, requires_grad=True)
    said = _every_tool(lambda x: layer(x).sum(), x, tmp_path)
    assert "gradcheck failed for layer.bias" in said["gradcheck"]
    assert "AveragedBias" in said["find_wrong_op"]
