"""The fused ops (Softmax, LogSoftmax, GELU, LayerNormFunction, Attention, CrossEntropy): each holds
its own derivative, and each is held against a composition of primitive ops, values AND gradients
of every input, in float64, with no accelerator and with Numba's."""

import ast
import inspect
import math
import pathlib
import sys
import textwrap
import types

import numpy as np
import pytest

import minitensor as mt
from minitensor import F, backends
from minitensor.ops import GELU, Attention, CrossEntropy, LayerNormFunction, LogSoftmax, Softmax
from minitensor.testing import assert_matches_torch
from models.attention import scaled_dot_product_attention as materialised_attention

BACKENDS = pytest.mark.parametrize("backend", ["numpy", "numba"])
FUSED = [Softmax, LogSoftmax, GELU, LayerNormFunction, Attention, CrossEntropy]
BACKENDS_FOLDER = str(pathlib.Path(backends.__file__).parent)


# ---------------------------------------------------------------------------
# Each op computes with its own lines; a backend only accelerates
# ---------------------------------------------------------------------------


def _lines_run(function, run):
    """(lines of `function` that ran, files of every function called) while run() runs."""
    lines, files = set(), set()

    def tracer(frame, event, arg):
        if event == "call":
            files.add(frame.f_code.co_filename)
        if event == "line" and frame.f_code is function.__code__:
            lines.add(frame.f_lineno)
        return tracer

    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
    return lines, files


def test_softmax_backward_computes_its_gradient_in_its_own_lines_under_the_default_settings():
    """A student who stops in Softmax.backward with the default settings reads the formula (the
    docstring) and the line that computes dx from y and grad: an expression, not a backend call,
    and that line is the one that runs."""
    assert mt.get_backend() == "numpy"
    source = textwrap.dedent(inspect.getsource(Softmax.backward))
    function = ast.parse(source).body[0]
    assert "Jacobian" in ast.get_docstring(function)
    computed = [node for node in ast.walk(function) if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["dx"] and not isinstance(node.value, ast.Call)]
    assert computed, f"no `dx = <an expression>` in Softmax.backward:\n{source}"
    x = mt.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    y = x.softmax(axis=-1)
    assert backends.accelerator_for("softmax_backward", y.data, y.data) is None  # no accelerator by default
    lines, files = _lines_run(Softmax.backward, lambda: y.backward(np.ones((3, 4))))
    first = Softmax.backward.__code__.co_firstlineno
    assert first + computed[0].lineno - 1 in lines  # the expression is the line that ran
    assert not [f for f in files if f.startswith(BACKENDS_FOLDER) and not f.endswith("__init__.py")], files


def _every_fused_op_once():
    rng = np.random.default_rng(1)
    x = mt.tensor(rng.standard_normal((2, 3, 5)), requires_grad=True)
    w, b = (mt.tensor(rng.standard_normal(5), requires_grad=True) for _ in range(2))
    losses = [x.softmax(axis=-1, mask=rng.random((3, 5)) < 0.3), x.log_softmax(axis=1), F.gelu(x),
              F.gelu(x, approximate="tanh"), F.layer_norm(x, (5,), w, b),
              F.scaled_dot_product_attention(x, x, x, is_causal=True),
              F.cross_entropy(x.reshape(6, 5), np.array([0, 1, 2, 3, 4, 0]), label_smoothing=0.1)]
    for loss in losses:
        loss.sum().backward()


def test_no_fused_op_calls_into_a_backend_under_the_default_settings():
    """Forward and backward of every fused op run the op's own code: nothing in backends/ but the
    question (accelerator_for, in backends/__init__.py), the shared rules (conventions.py: a dtype, a
    scale, numpy or cupy) and the BLAS product (numpy_backend.matmul)."""
    _, files = _lines_run(Softmax.backward, _every_fused_op_once)
    called = {pathlib.Path(f).name for f in files if f.startswith(BACKENDS_FOLDER)}
    assert called <= {"__init__.py", "conventions.py", "numpy_backend.py", "blas_threads.py", "machine_load.py"}, called
    assert not hasattr(backends.load("numpy"), "softmax_backward")  # "numpy": no accelerator, no kernel


@pytest.mark.parametrize("op", FUSED, ids=lambda op: op.__name__)
def test_each_fused_op_asks_for_an_accelerator_and_keeps_its_own_code(op):
    """The forward and backward of each fused op ask accelerator_for (or are the cross-entropy, which
    asks for log-softmax's kernel), and never call backends.active() for their math."""
    for method in (op.forward, op.backward):
        source = inspect.getsource(method)
        assert "backends.active()" not in source, f"{op.__name__}.{method.__name__} calls a backend for its math"
    asks = inspect.getsource(op) if op is not CrossEntropy else inspect.getsource(LogSoftmax.of)  # its first step
    assert "accelerator_for(" in asks
    if op is CrossEntropy:
        assert "LogSoftmax.of(" in inspect.getsource(op.forward)


def test_a_users_accelerator_supplies_one_kernel_and_the_ops_compute_the_rest():
    calls = []

    def softmax_backward(y, grad, axis):
        calls.append(y.shape)
        return y * 0 + 7.0

    mine = types.SimpleNamespace(name="mine", matmul=np.matmul, softmax_backward=softmax_backward)
    x = mt.tensor(np.zeros((2, 3)), requires_grad=True)
    with mt.use_backend(mine):
        assert mt.get_backend() == "mine"
        (x.softmax(axis=-1).sum() + F.gelu(x).sum()).backward()  # GELU: its own code
    assert calls == [(2, 3)]
    np.testing.assert_allclose(x.grad, 7.0 + 0.5)  # the kernel's 7, plus GELU's slope 1/2 at 0
    assert mt.get_backend() == "numpy"


def test_set_backend_teaches_what_an_accelerator_is():
    with pytest.raises(ValueError, match=r"is not an accelerator; it lacks name, matmul\. An accelerator has a "
                                         r"`name`, a `matmul` .* each op computes the ones it lacks"):
        mt.set_backend(object())
    assert mt.get_backend() == "numpy"


@BACKENDS
def test_float16_computes_in_the_ops_own_code_where_numba_has_no_kernel(backend):
    x = mt.tensor(np.linspace(-3, 3, 12).reshape(3, 4).astype(np.float16), requires_grad=True)
    with mt.use_backend(backend):
        assert backends.accelerator_for("softmax", x.data) is None
        y = x.softmax(axis=-1)
        y.backward(np.ones((3, 4), np.float16))
    assert y.dtype == np.float16 and x.grad.dtype == np.float16
    np.testing.assert_allclose(y.data.sum(axis=-1), 1, rtol=2e-3)


# ---------------------------------------------------------------------------
# Fused against composed: values and gradients
# ---------------------------------------------------------------------------


def _compare(fused, composed, arrays, backend, upstream_seed=0, rtol=1e-9, atol=1e-11):
    """fused(*tensors) and composed(*tensors) on the same float64 arrays: values, then every
    input's gradient for one upstream gradient (None on one side only is a difference)."""
    results = []
    for function in (fused, composed):
        tensors = [mt.tensor(a.copy(), requires_grad=a.dtype.kind == "f") for a in arrays]
        with mt.use_backend(backend if function is fused else "numpy"):
            out = function(*tensors)
            upstream = np.random.default_rng(upstream_seed).standard_normal(out.shape)
            out.backward(upstream)
        results.append((out.data, [t.grad for t in tensors]))
    (fused_out, fused_grads), (composed_out, composed_grads) = results
    np.testing.assert_allclose(fused_out, composed_out, rtol=rtol, atol=atol, err_msg="values differ")
    for k, (g_fused, g_composed) in enumerate(zip(fused_grads, composed_grads)):
        assert (g_fused is None) == (g_composed is None), f"input {k}: a gradient on one side only"
        if g_fused is not None:
            np.testing.assert_allclose(g_fused, g_composed, rtol=rtol, atol=atol, err_msg=f"gradient of input {k}")


def composed_softmax(x, hidden):
    e = (x - x.data.max(axis=-1, keepdims=True)).exp() * mt.tensor((~hidden).astype(x.dtype))  # a shift: no gradient
    return e / e.sum(axis=-1, keepdims=True)


def composed_log_softmax(x, axis):
    shifted = x - x.data.max(axis=axis, keepdims=True)
    return shifted - shifted.exp().sum(axis=axis, keepdims=True).log()


def composed_gelu_tanh(x):
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1 + u.tanh())


def composed_cross_entropy(logits, target, label_smoothing, ignore_index=-100):
    """-sum_c q_c log_softmax(logits)_c, averaged over the rows not ignored: log-softmax and the
    smoothed one-hot target q, each written with primitive ops."""
    log_p = composed_log_softmax(logits, 1)
    classes = logits.shape[1]
    counted = target != ignore_index
    q = np.zeros(logits.shape)
    q[np.flatnonzero(counted), target[counted]] = 1 - label_smoothing
    q[counted] += label_smoothing / classes
    return -(log_p * mt.tensor(q)).sum() / int(counted.sum())


@BACKENDS
def test_softmax_gradients_equal_the_composed_softmax(backend):
    rng = np.random.default_rng(2)
    hidden = rng.random((4, 6)) < 0.3
    _compare(lambda x: x.softmax(axis=-1, mask=hidden), lambda x: composed_softmax(x, hidden),
             [rng.standard_normal((2, 4, 6)) * 3], backend)


@BACKENDS
@pytest.mark.parametrize("axis", [-1, 0])
def test_log_softmax_gradients_equal_the_composed_log_softmax(backend, axis):
    rng = np.random.default_rng(3)
    _compare(lambda x: x.log_softmax(axis=axis), lambda x: composed_log_softmax(x, axis),
             [rng.standard_normal((5, 7)) * 4], backend)


@BACKENDS
def test_gelu_tanh_gradients_equal_the_composed_gelu(backend):
    x = np.linspace(-6, 6, 97).reshape(97, 1) * np.ones((1, 2))
    _compare(lambda x: F.gelu(x, approximate="tanh"), composed_gelu_tanh, [x], backend, rtol=1e-8, atol=1e-12)


@BACKENDS
def test_exact_gelu_gradients_equal_pytorchs_composed_gelu(backend):
    """x * Phi(x) composed in PyTorch (erf is no minitensor primitive): values and gradients."""
    import torch

    with mt.use_backend(backend):
        assert_matches_torch(F.gelu, lambda x: x * 0.5 * (1 + torch.erf(x / math.sqrt(2))),
                             np.linspace(-6, 6, 61).reshape(61, 1) * np.ones((1, 3)), rtol=1e-9, atol=1e-12)


@BACKENDS
def test_layer_norm_gradients_equal_the_composed_layer_norm(backend):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((3, 4, 9)) * 2 + 1, rng.standard_normal(9), rng.standard_normal(9)]
    _compare(lambda x, w, b: F.layer_norm(x, (9,), w, b), mt.nn.layer_norm_composed, arrays, backend)
    _compare(lambda x: F.layer_norm(x, (9,)), mt.nn.layer_norm_composed, arrays[:1], backend)


@BACKENDS
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_gradients_equal_the_materialised_attention(backend, is_causal):
    rng = np.random.default_rng(5)
    hidden = rng.random((1, 140, 140)) < 0.2  # more keys than one tile (KEY_TILE = 128)
    arrays = [rng.standard_normal((2, 140, 8)) for _ in range(3)]
    _compare(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=hidden, is_causal=is_causal),
             lambda q, k, v: materialised_attention(q, k, v, mask=hidden, is_causal=is_causal, return_weights=True)[0],
             arrays, backend)


@BACKENDS
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_gradients_equal_the_composed_loss(backend, label_smoothing):
    rng = np.random.default_rng(6)
    logits, target = rng.standard_normal((8, 5)) * 3, np.array([0, 4, 2, -100, 1, 1, -100, 3])
    _compare(lambda x: F.cross_entropy(x, target, label_smoothing=label_smoothing),
             lambda x: composed_cross_entropy(x, target, label_smoothing), [logits], backend)


def test_cross_entropy_with_probability_targets_equals_the_composed_loss_for_both_inputs():
    rng = np.random.default_rng(7)
    logits, probabilities = rng.standard_normal((4, 6)), rng.dirichlet(np.ones(6), 4)
    _compare(lambda x, t: F.cross_entropy(x, t), lambda x, t: -(composed_log_softmax(x, 1) * t).sum() / 4,
             [logits, probabilities], "numpy")


def test_assert_matches_torch_fails_when_only_one_side_has_a_gradient():
    """A None gradient is no zero: minitensor's detached input against PyTorch's zero gradient."""
    with pytest.raises(AssertionError, match=r"input 0 \(shape \(3,\)\): torch gives it a gradient, minitensor none"):
        assert_matches_torch(lambda a, b: a.detach() * 0 + b, lambda a, b: a * 0 + b, np.ones(3), np.ones(3))
    with pytest.raises(AssertionError, match=r"input 0 \(shape \(3,\)\): minitensor gives it a gradient, torch none"):
        assert_matches_torch(lambda a, b: a * 0 + b, lambda a, b: a.detach() * 0 + b, np.ones(3), np.ones(3))
    assert_matches_torch(lambda a, b: a.detach() + b, lambda a, b: a.detach() + b, np.ones(3), np.ones(3))
