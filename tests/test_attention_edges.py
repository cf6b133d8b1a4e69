"""Attention and softmax at their edges, on the numpy and numba backends (issue 15 §2, §3, §6):
scores so large that a log-sum-exp loses the weights, NaN that must not vanish, the one mask
rule, softmax over an empty axis and attention with d_k = 0. Each result is held against
PyTorch in float64 (or against the materialised softmax where PyTorch's policy differs)."""

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minitensor as mt
from minitensor import F, backends
from models.attention import MultiHeadAttention
from models.attention import scaled_dot_product_attention as attention_with_weights

# "numba-tiled": the numba backend with its short-sequence attention path turned off, so that
# the tiled kernels meet every edge here too (these sequences are all short).
BACKENDS = ["numpy", "numba", "numba-tiled"]


@contextlib.contextmanager
def on_backend(name):
    if name != "numba-tiled":
        with mt.use_backend(name):
            yield
        return
    numba_backend = backends.load("numba")
    saved, numba_backend.SHORT_KEYS = numba_backend.SHORT_KEYS, 0
    try:
        with mt.use_backend("numba"):
            yield
    finally:
        numba_backend.SHORT_KEYS = saved


@pytest.fixture(params=BACKENDS)
def backend(request):
    with on_backend(request.param):
        yield request.param


def ours_with_grads(q, k, v, mask=None, is_causal=False, upstream=None):
    """Output and (dq, dk, dv) of the fused op on the active backend."""
    tensors = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*tensors, mask=mask, is_causal=is_causal)
    out.backward(np.ones(out.shape, dtype=out.dtype) if upstream is None else upstream.astype(out.dtype))
    return out.data, [t.grad for t in tensors]


def torch_with_grads(q, k, v, mask=None, is_causal=False, upstream=None):
    """The same in PyTorch, float64, with the mask as PyTorch takes it (True = attend)."""
    tensors = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in (q, k, v)]
    if mask is not None:
        mask = torch.tensor(~mask) if mask.dtype == bool else torch.tensor(mask.astype(np.float64))
    out = torch.nn.functional.scaled_dot_product_attention(*tensors, attn_mask=mask, is_causal=is_causal)
    out.backward(torch.ones_like(out) if upstream is None else torch.tensor(upstream, dtype=torch.float64))
    return out.detach().numpy(), [t.grad.numpy() for t in tensors]


# ---------------------------------------------------------------------------
# §2: scores large enough that m + log(l) rounds to m
# ---------------------------------------------------------------------------

# (dtype, offset added to every score of the row): float32 holds integers exactly to 2**24,
# so near 1e7 a log-sum-exp is rounded to a whole number; float64 likewise near 1e30.
EXTREME = [
    (np.float32, 1e7),
    (np.float32, 2.0**23),
    (np.float32, -1e9),  # a row "fully hidden" by a float mask of -1e9: still uniform weights
    (np.float64, 1e30),
    (np.float64, -1e30),
    (np.float64, 1e300),
]


@pytest.mark.parametrize("dtype, offset", EXTREME)
@pytest.mark.parametrize("keys", [2, 3, 200])  # 200: more than one key tile
def test_extreme_scores_keep_their_weights(backend, dtype, offset, keys):
    rng = np.random.default_rng(keys)
    queries, d = 4, 3
    q = np.zeros((2, queries, d), dtype=dtype)  # scores q k^T = 0: the mask alone decides
    k = rng.standard_normal((2, keys, d)).astype(dtype)
    v = rng.standard_normal((2, keys, 2)).astype(dtype)
    mask = rng.standard_normal((queries, keys)).astype(dtype)
    mask[1:3] = offset  # rows 1 and 2 all at the extreme score: uniform weights 1 / keys
    if abs(offset) < 2**24:  # where the dtype can still tell neighbours apart, vary the row
        mask[2] = offset + rng.integers(0, 3, keys)
    upstream = rng.standard_normal((2, queries, 2))
    out, grads = ours_with_grads(q, k, v, mask, upstream=upstream)
    out_t, grads_t = torch_with_grads(q, k, v, mask, upstream=upstream)
    close = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, out_t, **close)
    for name, grad, grad_t in zip("qkv", grads, grads_t):
        assert grad.dtype == dtype, name
        np.testing.assert_allclose(grad, grad_t, err_msg=f"d{name}", **close)


def test_a_score_of_1e30_gives_half_and_half(backend):
    """The issue's own example: two equal scores of 1e30 weigh each value 1/2."""
    q = np.array([[1e15]])
    k = np.array([[1e15], [1e15]])
    v = np.array([[1.0], [3.0]])
    out, (_, _, dv) = ours_with_grads(q, k, v)
    np.testing.assert_allclose(out, [[2.0]])
    np.testing.assert_allclose(dv, [[0.5], [0.5]])


# ---------------------------------------------------------------------------
# §2: NaN never vanishes, and every backend agrees where it goes
# ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy says so when NaN appears
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("where", ["q", "k", "v", "mask"])
def test_attention_propagates_nan_like_pytorch(backend, dtype, where):
    rng = np.random.default_rng(0)
    arrays = {name: rng.standard_normal((2, 5, 3)).astype(dtype) for name in "qkv"}
    arrays["mask"] = rng.standard_normal((5, 5)).astype(dtype)
    if where == "mask":
        arrays["mask"][1, 2] = np.nan  # one score of query 1
    else:
        arrays[where][..., 1, :] = np.nan  # query 1, or key / value 1 (seen by every query)
    upstream = rng.standard_normal((2, 5, 3))
    out, grads = ours_with_grads(arrays["q"], arrays["k"], arrays["v"], arrays["mask"], upstream=upstream)
    out_t, grads_t = torch_with_grads(arrays["q"], arrays["k"], arrays["v"], arrays["mask"], upstream=upstream)
    assert np.isnan(out).any()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(out_t))
    for name, grad, grad_t in zip("qkv", grads, grads_t):
        np.testing.assert_array_equal(np.isnan(grad), np.isnan(grad_t), err_msg=f"d{name}")
        close = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(grad[~np.isnan(grad)], grad_t[~np.isnan(grad_t)], err_msg=f"d{name}", **close)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy says so when NaN appears
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_propagates_nan_like_pytorch(backend, dtype, op):
    x = np.random.default_rng(1).standard_normal((5, 6)).astype(dtype)
    x[1, 3] = np.nan
    x[2, 0] = np.inf  # softmax(+inf) is inf / inf: NaN in PyTorch too
    x[3] = np.nan  # a row of nothing but NaN
    ours = getattr(mt.tensor(x, requires_grad=True), op)(axis=-1).data
    theirs = getattr(torch.tensor(x), op)(dim=-1).numpy()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_allclose(ours[[0, 4]], theirs[[0, 4]], rtol=1e-5)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_a_boolean_mask_removes_what_it_hides_and_nothing_else(backend):
    """The documented policy, kept: a hidden NaN is gone, a fully hidden row is zeros; but a
    visible NaN, even the only visible entry of its row, makes its row's visible entries NaN
    (the hidden ones stay 0, with no gradient: issue 32)."""
    x = np.random.default_rng(2).standard_normal((4, 4))
    x[0, 1] = x[2, 3] = x[3, 2] = np.nan
    mask = np.zeros((4, 4), dtype=bool)
    mask[0, 1] = True  # hides row 0's NaN
    mask[2] = True  # hides all of row 2, its NaN too
    mask[3] = [True, True, False, True]  # leaves row 3 only its NaN
    y = mt.tensor(x).softmax(axis=-1, mask=mask).data
    np.testing.assert_allclose(y[:2].sum(axis=-1), 1)
    np.testing.assert_array_equal(y[2], 0)
    assert np.isnan(y[3][~mask[3]]).all() and (y[3][mask[3]] == 0).all()


# ---------------------------------------------------------------------------
# §3: one mask rule
# ---------------------------------------------------------------------------


def _qkv(dtype=np.float64, keys=4, queries=3, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((2, t, 4)).astype(dtype) for t in (queries, keys, keys))


@pytest.mark.parametrize("mask_dtype", [np.int64, np.int8, np.uint8, np.complex128, object])
@pytest.mark.parametrize("entry", ["F", "models", "models_weights", "MultiHeadAttention"])
def test_a_mask_that_is_neither_boolean_nor_float_is_refused(backend, mask_dtype, entry):
    q, k, v = (mt.tensor(a) for a in _qkv())
    mask = np.array([[0, 1, 0, 0]] * 3).astype(mask_dtype)
    calls = {
        "F": lambda: F.scaled_dot_product_attention(q, k, v, mask=mask),
        "models": lambda: attention_with_weights(q, k, v, mask=mask),
        "models_weights": lambda: attention_with_weights(q, k, v, mask=mask, return_weights=True),
        "MultiHeadAttention": lambda: MultiHeadAttention(4, 2)(mt.tensor(np.ones((2, 4, 4))), mask=np.ones((4, 4), dtype=mask_dtype)),
    }
    with pytest.raises(TypeError, match=rf"must be boolean .* or floating point .*, got dtype {np.dtype(mask_dtype)}"):
        calls[entry]()


@pytest.mark.parametrize("mask_dtype", [np.float64, np.float16])
def test_a_float_mask_takes_the_scores_dtype(backend, mask_dtype):
    q, k, v = _qkv(np.float32)
    mask = np.random.default_rng(3).standard_normal((3, 4)).astype(mask_dtype)
    out, grads = ours_with_grads(q, k, v, mask)
    assert out.dtype == np.float32 and all(g.dtype == np.float32 for g in grads)
    out_t, grads_t = torch_with_grads(q, k, v, mask.astype(np.float32))
    np.testing.assert_allclose(out, out_t, rtol=1e-5, atol=1e-6)
    weighted, weights = attention_with_weights(mt.tensor(q), mt.tensor(k), mt.tensor(v), mask=mask, return_weights=True)
    assert weighted.dtype == np.float32 and weights.dtype == np.float32


def _materialised(q, k, v, mask, is_causal=False):
    """The definition op by op (matmul, softmax with its mask policy, matmul) on the numpy
    backend, in float64: fully hidden rows are zeros here, where PyTorch gives NaN."""
    with mt.use_backend("numpy"):
        tensors = [mt.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v)]
        out, _ = attention_with_weights(*tensors, mask=mask, is_causal=is_causal, return_weights=True)
        out.backward(np.ones(out.shape))
    return out.data, [t.grad for t in tensors]


MASK_SHAPES = [(), (1,), (300,), (5, 1), (1, 300), (2, 5, 1), (2, 1, 300), (1, 1, 1)]


@pytest.mark.parametrize("shape", MASK_SHAPES)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_every_broadcasting_mask_is_taken_over_many_key_tiles(backend, shape, kind):
    """(Tq, 1) and 0-d masks over 300 keys (three tiles) once failed on the reference."""
    q, k, v = _qkv(keys=300, queries=5, seed=4)
    rng = np.random.default_rng(5)
    mask = rng.random(shape) < 0.3 if kind == "bool" else rng.standard_normal(shape)
    mask = np.asarray(mask)
    out, grads = ours_with_grads(q, k, v, mask)
    out_ref, grads_ref = _materialised(q, k, v, mask)
    np.testing.assert_allclose(out, out_ref, rtol=1e-10, atol=1e-12)
    for grad, grad_ref in zip(grads, grads_ref):
        np.testing.assert_allclose(grad, grad_ref, rtol=1e-9, atol=1e-11)
    if kind == "float":
        np.testing.assert_allclose(out, torch_with_grads(q, k, v, mask)[0], rtol=1e-10, atol=1e-12)


def test_both_scaled_dot_product_attentions_take_the_same_arguments(backend):
    """models.attention's function is F's, plus return_weights: same arguments, same result, with
    is_causal aligned as a KV cache (F's causal_alignment="bottom_right"; F's default is PyTorch's)."""
    q, k, v = (mt.tensor(a) for a in _qkv(seed=6))
    mask = np.random.default_rng(7).random((3, 4)) < 0.3
    fused = F.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=True, scale=0.3,
                                           causal_alignment="bottom_right").data
    plain = attention_with_weights(q, k, v, mask=mask, is_causal=True, scale=0.3).data
    weighted, _ = attention_with_weights(q, k, v, mask=mask, is_causal=True, scale=0.3, return_weights=True)
    np.testing.assert_allclose(plain, fused, rtol=1e-12)
    np.testing.assert_allclose(weighted.data, fused, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# §6: empty axes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape, axis", [((3, 0), -1), ((2, 0, 4), 1), ((0,), 0), ((0, 3), 0)])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_over_an_empty_axis_is_empty_like_pytorch(backend, shape, axis, op):
    x = mt.tensor(np.zeros(shape), requires_grad=True)
    y = getattr(x, op)(axis=axis)
    assert y.shape == shape
    y.sum().backward()
    assert x.grad.shape == shape


@given(
    queries=st.integers(1, 6), keys=st.integers(1, 140), d_v=st.integers(0, 3),
    is_causal=st.booleans(), masked=st.booleans(),
)
def test_attention_with_d_k_zero_is_the_mean_of_the_values_like_pytorch(queries, keys, d_v, is_causal, masked):
    rng = np.random.default_rng(keys)
    keys = queries if is_causal else keys  # PyTorch aligns a causal mask top-left, we bottom-right
    q, k = np.zeros((2, queries, 0)), np.zeros((2, keys, 0))
    v = rng.standard_normal((2, keys, d_v))
    mask = rng.standard_normal((queries, keys)) if masked and not is_causal else None  # PyTorch: one or the other
    upstream = rng.standard_normal((2, queries, d_v))
    out_t, grads_t = torch_with_grads(q, k, v, mask, is_causal, upstream)
    for name in BACKENDS:
        with on_backend(name):
            out, grads = ours_with_grads(q, k, v, mask, is_causal, upstream)
        np.testing.assert_allclose(out, out_t, rtol=1e-10, atol=1e-12)
        for grad, grad_t in zip(grads, grads_t):
            assert grad.shape == grad_t.shape
            np.testing.assert_allclose(grad, grad_t, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# PyTorch's name, PyTorch's meaning (issue 21, item 5)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["F", "models"])
@pytest.mark.parametrize("how", ["positional", "attn_mask="])
def test_a_boolean_attn_mask_means_what_it_means_in_pytorch(entry, how):
    """PyTorch's scaled_dot_product_attention takes attn_mask with True = take part; ours took
    the same fourth argument with True = hide, so ported code silently attended to the wrong keys."""
    q, k, v = _qkv(np.float64, seed=8)
    keep = np.random.default_rng(9).random((3, 4)) < 0.6
    keep[:, 0] = True  # every query sees a key (PyTorch gives NaN for a row with none)
    function = F.scaled_dot_product_attention if entry == "F" else attention_with_weights
    tensors = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = function(*tensors, keep) if how == "positional" else function(*tensors, attn_mask=keep)
    torch_tensors = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(*torch_tensors, torch.from_numpy(keep))
    np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    upstream = np.random.default_rng(10).standard_normal(out.shape)
    out.backward(upstream)
    expected.backward(torch.from_numpy(upstream))
    for mine, theirs in zip(tensors, torch_tensors):
        np.testing.assert_allclose(mine.grad, theirs.grad.numpy(), rtol=1e-10, atol=1e-12)
    # minitensor's own keyword keeps the seeds' meaning (True hides): the same call, spelled so
    np.testing.assert_allclose(function(*tensors, mask=~keep).data, out.data, rtol=1e-12)


@pytest.mark.parametrize("entry", ["F", "models"])
def test_an_ambiguous_or_unsupported_attention_call_is_refused(entry):
    q, k, v = (mt.tensor(a) for a in _qkv(np.float64))
    mask = np.zeros((3, 4), dtype=bool)
    function = F.scaled_dot_product_attention if entry == "F" else attention_with_weights
    with pytest.raises(ValueError, match=r"give attn_mask \(PyTorch's: True takes part\) or mask \(minitensor's: True hides\), not both"):
        function(q, k, v, attn_mask=mask, mask=mask)
    with pytest.raises(ValueError, match="dropout_p=True: minitensor's attention has no dropout"):
        function(q, k, v, None, True)  # (is_causal in the place PyTorch puts dropout_p)
    np.testing.assert_allclose(function(q, k, v, None, 0.0, True).data,
                               function(q, k, v, is_causal=True).data)  # PyTorch's positions


# ---------------------------------------------------------------------------
# Documented decision: saturated attention's gradient error (issue 21)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("magnitude", [1e9, 1e12])
def test_saturated_attention_gradients_carry_an_error_of_about_eps_q_v(backend, magnitude):
    """With |q|, |k| >= 1e9 the weights are one-hot, and the scores' gradient (the tiled_attention
    task) subtracts two numbers of size |dO| |v| that agree to rounding: the gradients of q and k carry
    an absolute error of about eps * |q| * |v| (eps of float64), as PyTorch's fused kernels do.
    Kept (README, "Backends"), and held here: no worse than that, and the output exact."""
    rng = np.random.default_rng(11)
    q, k = (rng.standard_normal((2, 3, 4)) * magnitude for _ in range(2))
    v = rng.standard_normal((2, 3, 4))
    upstream = rng.standard_normal((2, 3, 4))
    out, grads = ours_with_grads(q, k, v, upstream=upstream)
    out_t, grads_t = torch_with_grads(q, k, v, upstream=upstream)
    np.testing.assert_allclose(out, out_t, rtol=1e-12, atol=1e-12)
    bound = 16 * np.finfo(np.float64).eps * np.abs(q).max() * np.abs(v).max() * np.abs(upstream).max()
    for grad, grad_t in zip(grads, grads_t):
        assert np.abs(grad - grad_t).max() <= bound
