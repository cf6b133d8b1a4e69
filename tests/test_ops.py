"""Every op: its backward against central finite differences (float64) and its
values and gradients against PyTorch on the same arrays, over hypothesis-drawn
shapes: broadcasting pairs, size-1 and empty axes, non-contiguous layouts."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitensor as mt
from minitensor import F
from minitensor.testing import assert_matches_torch

from strategies import arrays, broadcast_pairs, nonempty_shapes, shapes

torch.set_num_threads(1)


def check(mt_fn, torch_fn, *arrays_):
    """Both checks on one case: finite differences, then PyTorch."""
    tensors = [mt.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in arrays_]
    assert mt.gradcheck(mt_fn, *tensors)
    assert_matches_torch(mt_fn, torch_fn, *arrays_, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------------------
# Unary elementwise ops over any shape (including 0-d and empty)
# ---------------------------------------------------------------------------

UNARY = {
    "neg": (lambda x: -x, lambda x: -x, None),
    "exp": (lambda x: x.exp(), torch.exp, None),
    "log": (lambda x: x.log(), torch.log, (0.3, 3.0)),
    "sqrt": (lambda x: x.sqrt(), torch.sqrt, (0.3, 3.0)),
    "tanh": (lambda x: x.tanh(), torch.tanh, None),
    "sigmoid": (lambda x: x.sigmoid(), torch.sigmoid, None),
    "relu": (lambda x: x.relu(), torch.relu, None),
    "abs": (lambda x: x.abs(), torch.abs, None),
    "gelu": (F.gelu, torch.nn.functional.gelu, None),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: torch.nn.functional.gelu(x, approximate="tanh"), None),
    "silu": (F.silu, torch.nn.functional.silu, None),
    "clip": (lambda x: x.clip(-0.5, 0.7), lambda x: torch.clamp(x, -0.5, 0.7), None),
    "clip_low": (lambda x: x.clip(min=0.1), lambda x: torch.clamp(x, min=0.1), None),
    "pow_int": (lambda x: x**3, lambda x: x**3, None),
    "pow_fraction": (lambda x: x**1.5, lambda x: x**1.5, (0.3, 3.0)),
    "rpow": (lambda x: 2.0**x, lambda x: 2.0**x, None),
    "scalar_left_sub": (lambda x: 1.0 - x, lambda x: 1.0 - x, None),
    "scalar_left_div": (lambda x: 2.0 / x, lambda x: 2.0 / x, (0.5, 2.0)),
    "scalar_mul_add": (lambda x: 3 * x + 1, lambda x: 3 * x + 1, None),
    "clone": (lambda x: x.clone(), lambda x: x.clone(), None),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary(name, data):
    mt_fn, torch_fn, domain = UNARY[name]
    shape = data.draw(shapes)
    x = data.draw(arrays(shape, *(domain or (None, None))))
    check(mt_fn, torch_fn, x)


# ---------------------------------------------------------------------------
# Binary ops over broadcasting pairs, Python scalars on either side
# ---------------------------------------------------------------------------

BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, None),
    "sub": (lambda a, b: a - b, lambda a, b: a - b, None),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, None),
    "div": (lambda a, b: a / b, lambda a, b: a / b, (0.5, 2.0)),
    "pow": (lambda a, b: a**b, lambda a, b: a**b, (0.5, 2.0)),
    "maximum": (mt.maximum, torch.maximum, None),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_broadcasting(name, data):
    mt_fn, torch_fn, domain = BINARY[name]
    (shape_a, shape_b), _ = data.draw(broadcast_pairs)
    a = data.draw(arrays(shape_a, *(domain or (None, None))))
    b = data.draw(arrays(shape_b, *(domain or (None, None))))
    check(mt_fn, torch_fn, a, b)


@given(data=st.data())
def test_where_broadcasting(data):
    (shape_c, shape_a, shape_b), _ = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3)
    )
    condition = data.draw(hnp.arrays(np.bool_, shape_c))
    a, b = data.draw(arrays(shape_a)), data.draw(arrays(shape_b))
    check(
        lambda a, b: mt.where(condition, a, b),
        lambda a, b: torch.where(torch.from_numpy(condition), a, b),
        a,
        b,
    )


def test_python_scalars_keep_the_tensor_dtype():
    x = mt.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    for y in (x + 1.5, 1.5 + x, x * 2, 2 / x, x**2, 2.0**x, x - 1, 1 - x):
        assert y.dtype == np.float32


def test_maximum_splits_ties_like_torch():
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 5.0, 3.0])
    check(mt.maximum, torch.maximum, a, b)
    x, y = mt.tensor(a, requires_grad=True), mt.tensor(b, requires_grad=True)
    mt.maximum(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(y.grad, [0.5, 1.0, 0.5])


# ---------------------------------------------------------------------------
# matmul: batch broadcasting and 1-D operands, as NumPy
# ---------------------------------------------------------------------------


@st.composite
def matmul_shapes(draw):
    n, k, m = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    (batch_a, batch_b), _ = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    a_vector, b_vector = draw(st.booleans()), draw(st.booleans())
    shape_a = (k,) if a_vector else batch_a + (n, k)
    shape_b = (k,) if b_vector else batch_b + (k, m)
    return shape_a, shape_b


@given(data=st.data())
def test_matmul(data):
    shape_a, shape_b = data.draw(matmul_shapes())
    a, b = data.draw(arrays(shape_a)), data.draw(arrays(shape_b))
    check(lambda a, b: a @ b, torch.matmul, a, b)


def test_matmul_with_an_array_on_the_left():
    w = mt.tensor(np.eye(3), requires_grad=True)
    y = np.ones((2, 3)) @ w
    assert isinstance(y, mt.Tensor) and y.shape == (2, 3)


# ---------------------------------------------------------------------------
# Reductions with axis (int or tuple) and keepdims
# ---------------------------------------------------------------------------


@st.composite
def shape_and_axis(draw, allow_empty):
    shape = draw(shapes if allow_empty else nonempty_shapes)
    if draw(st.booleans()) or len(shape) == 0:
        return shape, None
    axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    axes = [a - len(shape) if draw(st.booleans()) else a for a in axes]  # negative axes too
    return shape, axes[0] if len(axes) == 1 else tuple(axes)


def _torch_dims(axis, ndim):
    return tuple(range(ndim)) if axis is None else axis


REDUCTIONS = {
    "sum": (True, lambda x, axis, k: x.sum(axis=axis, keepdims=k), lambda x, axis, k: x.sum(dim=_torch_dims(axis, x.ndim), keepdim=k)),
    "mean": (False, lambda x, axis, k: x.mean(axis=axis, keepdims=k), lambda x, axis, k: x.mean(dim=_torch_dims(axis, x.ndim), keepdim=k)),
    "var": (False, lambda x, axis, k: x.var(axis=axis, keepdims=k), lambda x, axis, k: x.var(dim=_torch_dims(axis, x.ndim), keepdim=k, correction=0)),
    "var_ddof1": (False, lambda x, axis, k: x.var(axis=axis, keepdims=k, ddof=1), lambda x, axis, k: x.var(dim=_torch_dims(axis, x.ndim), keepdim=k, correction=1)),
    "max": (False, lambda x, axis, k: x.max(axis=axis, keepdims=k), lambda x, axis, k: x.amax(dim=_torch_dims(axis, x.ndim), keepdim=k)),
    "min": (False, lambda x, axis, k: x.min(axis=axis, keepdims=k), lambda x, axis, k: x.amin(dim=_torch_dims(axis, x.ndim), keepdim=k)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(data=st.data())
def test_reduction(name, data):
    allow_empty, mt_fn, torch_fn = REDUCTIONS[name]
    shape, axis = data.draw(shape_and_axis(allow_empty))
    keepdims = data.draw(st.booleans())
    if name == "var_ddof1":
        counted = np.prod([shape[a] for a in np.atleast_1d(axis)] if axis is not None else shape)
        if counted < 2:
            return  # one element: the unbiased variance divides by zero
    x = data.draw(arrays(shape))
    check(lambda t: mt_fn(t, axis, keepdims), lambda t: torch_fn(t, axis, keepdims), x)


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("shape, axis", [((3, 3), 1), ((3, 3), -1), ((2, 3, 4), (0, 2)), ((3, 3), 0)])
def test_a_reductions_gradient_goes_back_along_its_reduced_axes(op, shape, axis):
    """keepdims=False drops the reduced axes; backward must put them back before broadcasting, or
    a gradient of shape (3,) for a (3, 3) input reduced over axis 1 spreads along the wrong axis
    (NumPy broadcasts it as a row) with no shape error to show it. The truth is the upstream
    gradient (distinct integers) with the axes restored, divided by the count in float64: one
    rounding, the same as the op's, so the comparison is exact."""
    x = mt.tensor(np.arange(np.prod(shape), dtype=np.float64).reshape(shape), requires_grad=True)
    for keepdims in (False, True):
        y = getattr(x, op)(axis=axis, keepdims=keepdims)
        upstream = np.arange(1.0, y.size + 1).reshape(y.shape)
        x.grad = None
        y.backward(upstream)
        count = 1 if op == "sum" else int(np.prod([shape[a] for a in np.atleast_1d(axis)]))
        restored = upstream if keepdims else np.expand_dims(upstream, axis)
        np.testing.assert_array_equal(x.grad, np.broadcast_to(restored / count, shape))


def test_max_ties_share_the_gradient():
    x = mt.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], requires_grad=True)
    x.max(axis=1).sum().backward()
    np.testing.assert_array_equal(x.grad, [[0, 0.5, 0.5], [0.5, 0, 0.5]])
    x.grad = None
    x.max().backward()  # as torch.max() / torch.amax: the tie is split
    np.testing.assert_array_equal(x.grad, [[0, 0.5, 0.5], [0, 0, 0]])


# ---------------------------------------------------------------------------
# softmax and log_softmax
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@given(data=st.data())
def test_softmax(op, data):
    shape = data.draw(nonempty_shapes)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(arrays(shape))
    torch_op = getattr(torch, op)
    check(lambda t: getattr(t, op)(axis=axis), lambda t: torch_op(t, dim=axis), x)


def test_softmax_is_stable_for_huge_logits():
    x = mt.tensor([[1000.0, 0.0, -1000.0]], dtype=np.float32, requires_grad=True)
    y = x.softmax(axis=-1)
    assert np.all(np.isfinite(y.data)) and y.data[0, 0] == 1.0
    log_y = x.log_softmax(axis=-1)
    assert np.all(np.isfinite(log_y.data))
    log_y.sum().backward()
    assert np.all(np.isfinite(x.grad))


# ---------------------------------------------------------------------------
# Shape ops
# ---------------------------------------------------------------------------


@given(data=st.data())
def test_reshape_and_view(data):
    shape = data.draw(shapes)
    x = data.draw(arrays(shape))
    target = (-1,) if x.size else (0,)
    check(lambda t: t.reshape(target) * 2, lambda t: t.reshape(target) * 2, x)
    if x.ndim >= 1 and x.size:
        check(lambda t: t.view(1, -1), lambda t: t.reshape(1, -1), x)


@given(data=st.data())
def test_permute_transpose_swapaxes(data):
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=3))
    x = data.draw(arrays(shape))
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    check(lambda t: t.permute(*perm), lambda t: t.permute(*perm), x)
    check(lambda t: t.transpose(-2, -1), lambda t: t.transpose(-2, -1), x)
    check(lambda t: t.swapaxes(0, -1), lambda t: t.transpose(0, -1), x)
    check(lambda t: t.T, lambda t: t.permute(*reversed(range(t.ndim))), x)


@given(data=st.data())
def test_expand(data):
    (small, big), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    target = np.broadcast_shapes(small, big)
    x = data.draw(arrays(small))
    check(lambda t: t.expand(tuple(target)), lambda t: t.expand(tuple(target)), x)


def test_expand_minus_one_keeps_an_axis():
    x = mt.tensor(np.ones((3, 1)), requires_grad=True)
    assert x.expand(2, -1, 4).shape == (2, 3, 4)


@given(data=st.data())
def test_unsqueeze_squeeze(data):
    shape = data.draw(shapes)
    x = data.draw(arrays(shape))
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check(lambda t: t.unsqueeze(axis), lambda t: t.unsqueeze(axis), x)
    check(lambda t: t.unsqueeze(axis).squeeze(axis), lambda t: t.unsqueeze(axis).squeeze(axis), x)
    check(lambda t: t.squeeze(), lambda t: t.squeeze(), x)


@given(data=st.data())
def test_basic_indexing(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    x = mt.tensor(data.draw(arrays(shape)), requires_grad=True)
    assert mt.gradcheck(lambda t: t[index], x)
    np.testing.assert_array_equal(x[index].data, x.data[index])


@given(data=st.data())
def test_integer_array_indexing_accumulates_repeats(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    index = data.draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=5)))
    x = data.draw(arrays(shape))
    check(
        lambda t: t[index],
        lambda t: t[tuple(torch.from_numpy(np.asarray(i)) for i in index)],
        x,
    )


def test_indexing_cases_against_torch(rng):
    x = rng.standard_normal((4, 5, 6))
    cases = [
        (lambda t: t[1], lambda t: t[1]),
        (lambda t: t[:, 1:4], lambda t: t[:, 1:4]),
        (lambda t: t[..., ::2], lambda t: t[..., ::2]),
        (lambda t: t[None, 2, :, -1], lambda t: t[None, 2, :, -1]),
        (lambda t: t[[0, 0, 3]], lambda t: t[torch.tensor([0, 0, 3])]),
        (lambda t: t[mt.tensor([1, 1]), :, mt.tensor([2, 5])], lambda t: t[torch.tensor([1, 1]), :, torch.tensor([2, 5])]),
        (lambda t: t[x > 0], lambda t: t[torch.from_numpy(x > 0)]),
        (lambda t: t[:, x[0, :, 0] > 0], lambda t: t[:, torch.from_numpy(x[0, :, 0] > 0)]),
    ]
    for mt_fn, torch_fn in cases:
        check(mt_fn, torch_fn, x)


def test_repeated_index_accumulates():
    x = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 0, 0, 2]].sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 0.0, 1.0])


@given(data=st.data())
def test_cat_and_stack(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    pieces = []
    for size in sizes:
        piece_shape = list(shape)
        piece_shape[axis] = size
        pieces.append(data.draw(arrays(tuple(piece_shape))))
    check(lambda *ts: mt.cat(ts, axis=axis), lambda *ts: torch.cat(ts, dim=axis), *pieces)
    same = [data.draw(arrays(shape)) for _ in sizes]
    new_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check(lambda *ts: mt.stack(ts, axis=new_axis), lambda *ts: torch.stack(ts, dim=new_axis), *same)


@given(data=st.data())
def test_masked_fill(data):
    (shape, mask_shape), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    shape = np.broadcast_shapes(shape, mask_shape)
    mask = data.draw(hnp.arrays(np.bool_, mask_shape))
    x = data.draw(arrays(shape))
    check(
        lambda t: t.masked_fill(mask, -1e4),
        lambda t: t.masked_fill(torch.from_numpy(mask), -1e4),
        x,
    )


def test_cast_is_differentiable():
    x = mt.tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = x.to(np.float64)
    assert y.dtype == np.float64
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


# ---------------------------------------------------------------------------
# Losses and nn.functional
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("logit_shape", [(5,), (6, 4), (3, 4, 5)])
def test_cross_entropy(reduction, label_smoothing, logit_shape, rng):
    logits = rng.standard_normal(logit_shape)
    class_axis = 0 if len(logit_shape) == 1 else 1
    target_shape = logit_shape[:class_axis] + logit_shape[class_axis + 1 :]
    target = rng.integers(0, logit_shape[class_axis], size=target_shape)
    options = dict(reduction=reduction, label_smoothing=label_smoothing)
    check(
        lambda z: F.cross_entropy(z, target, **options),
        lambda z: torch.nn.functional.cross_entropy(z, torch.from_numpy(target), **options),
        logits,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_ignore_index(reduction, rng):
    logits = rng.standard_normal((7, 5))
    target = np.array([0, -100, 4, 2, -100, 1, 3])
    check(
        lambda z: F.cross_entropy(z, target, reduction=reduction, label_smoothing=0.2),
        lambda z: torch.nn.functional.cross_entropy(z, torch.from_numpy(target), reduction=reduction, label_smoothing=0.2),
        logits,
    )


def test_cross_entropy_soft_targets(rng):
    logits = rng.standard_normal((4, 3))
    probabilities = rng.dirichlet(np.ones(3), size=4)
    check(
        lambda z: F.cross_entropy(z, mt.tensor(probabilities), label_smoothing=0.1),
        lambda z: torch.nn.functional.cross_entropy(z, torch.from_numpy(probabilities), label_smoothing=0.1),
        logits,
    )


def test_cross_entropy_is_stable_for_huge_logits():
    logits = mt.tensor([[1e4, -1e4, 0.0]], dtype=np.float32, requires_grad=True)
    loss = F.cross_entropy(logits, [1])
    loss.backward()
    assert np.isfinite(loss.item()) and np.all(np.isfinite(logits.grad))
    assert loss.item() == pytest.approx(2e4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction, rng):
    check(
        lambda p, t: F.mse_loss(p, t, reduction=reduction),
        lambda p, t: torch.nn.functional.mse_loss(p, t, reduction=reduction),
        rng.standard_normal((3, 4)),
        rng.standard_normal((3, 4)),
    )


def test_linear_and_functional_softmax(rng):
    check(
        lambda x, w, b: F.softmax(F.linear(x, w, b), axis=-1),
        lambda x, w, b: torch.softmax(torch.nn.functional.linear(x, w, b), dim=-1),
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((5, 4)),
        rng.standard_normal(5),
    )
    check(
        lambda x: F.log_softmax(F.relu(x), axis=0),
        lambda x: torch.log_softmax(torch.relu(x), dim=0),
        rng.standard_normal((3, 4)),
    )


def test_embedding(rng):
    weight = rng.standard_normal((10, 4))
    indices = np.array([[1, 2, 2], [9, 0, 1]])
    check(
        lambda w: F.embedding(indices, w),
        lambda w: torch.nn.functional.embedding(torch.from_numpy(indices), w),
        weight,
    )


def test_dropout_is_seeded_scaled_and_differentiable():
    x = mt.ones(1000, 100, requires_grad=True)
    mt.manual_seed(3)
    y = F.dropout(x, p=0.25)
    mt.manual_seed(3)
    y_again = F.dropout(x, p=0.25)
    np.testing.assert_array_equal(y.data, y_again.data)
    kept = y.data != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y.data[kept], 1 / 0.75, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, y.data)  # d/dx of x * mask / (1 - p) is mask / (1 - p)
    assert F.dropout(x, p=0.25, training=False) is x


# ---------------------------------------------------------------------------
# No argument silently dropped (issue 21, item 4)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("in_place", [False, True])
def test_masked_fill_with_a_tensor_value_gives_the_value_a_gradient_as_pytorch(rng, in_place):
    x, value = rng.standard_normal((3, 4)), np.array(0.7)
    mask = rng.random((3, 4)) < 0.4

    def ours(x, value):
        if not in_place:
            return x.masked_fill(mask, value) * x
        y = x * 1.0
        y.masked_fill_(mask, value)
        return y * x

    def theirs(x, value):
        if not in_place:
            return x.masked_fill(torch.from_numpy(mask), value) * x
        y = x * 1.0
        y.masked_fill_(torch.from_numpy(mask), value)
        return y * x

    check(ours, theirs, x, value)
    value_tensor = mt.tensor(value, requires_grad=True)
    ours(mt.tensor(x), value_tensor).sum().backward()
    np.testing.assert_allclose(value_tensor.grad, x[mask].sum())  # (was None)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gives_probability_targets_a_gradient_as_pytorch(rng, reduction, label_smoothing):
    logits = rng.standard_normal((4, 3, 2))
    target = rng.random((4, 3, 2))
    target /= target.sum(axis=1, keepdims=True)
    check(
        lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=label_smoothing),
        lambda x, t: torch.nn.functional.cross_entropy(x, t, reduction=reduction, label_smoothing=label_smoothing),
        logits, target,
    )


def test_cross_entropy_refuses_ignore_index_with_probability_targets_as_pytorch(rng):
    logits, target = rng.standard_normal((2, 3)), np.full((2, 3), 1 / 3)
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point target"):
        torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target), ignore_index=0)
    with pytest.raises(ValueError, match=r"cross_entropy: ignore_index=0 needs class-index targets, but the targets are probabilities \(dtype float64, shape \(2, 3\)\)"):
        F.cross_entropy(mt.tensor(logits), mt.tensor(target), ignore_index=0)
    F.cross_entropy(mt.tensor(logits), mt.tensor(target), ignore_index=-5)  # negative: no class, as in PyTorch


def test_tensor_of_tensors_in_the_graph_is_refused_with_the_fix_named():
    """mt.tensor([t1, t2]) copied the values, cut the graph and cast float64 to float32."""
    t1 = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    t2 = t1 * 3.0
    with pytest.raises(TypeError, match=r"tensor\(\): the list holds a tensor that requires grad \(shape \(2,\), dtype float64\).*mt\.stack"):
        mt.tensor([t1, t2])
    with pytest.raises(TypeError, match="mt.stack"):
        mt.tensor([[1.0, 2.0], (t2, [3.0])])  # found at any depth
    stacked = mt.stack([t1, t2])  # the fix the message names: the graph and the dtype kept
    assert stacked.dtype == np.float64
    stacked.sum().backward()
    np.testing.assert_array_equal(t1.grad, [4.0, 4.0])
    copied = mt.tensor([t1.detach(), t2.detach()])  # on purpose: a copy of the values
    np.testing.assert_array_equal(copied.data, [[1.0, 2.0], [3.0, 6.0]])
