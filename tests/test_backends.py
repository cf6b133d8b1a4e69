"""Every kernel of every available accelerator against the ops' own code (op_code.py), forward and
backward, float32 and float64, with and without masks, fully masked rows and extreme
logits; and the ops' own code against compositions of primitive ops.

The same suite runs for each backend; CuPy's cases skip with the reason where
there is no CuPy or no GPU, and run unchanged where there is."""

import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitensor as mt
import op_code as reference  # the ops' own code on arrays: what every accelerator's kernel is held against
from minitensor import backends
from models.attention import scaled_dot_product_attention as materialised_attention


def _load_or_skip(name):
    try:
        return backends.load(name)
    except ImportError as error:
        reason = "cupy not installed" if "needs CuPy" in str(error) else "no GPU"
        pytest.skip(f"{name} backend unavailable: {reason}")


@pytest.fixture(params=[name for name in backends.KNOWN if name != "numpy"], scope="module")
def backend(request):
    """Each accelerator ("numpy" is none: its ops run the code `reference` calls)."""
    return _load_or_skip(request.param)


def to_backend(backend, a):
    return None if a is None else backend.xp.asarray(a)


def to_numpy(a):
    if a is None:
        return None
    return np.asarray(a) if isinstance(a, (np.ndarray, np.generic)) else a.get()


TOLERANCE = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


def f64(a):
    """The truth a float32 result is judged against: the reference kernels on float64 copies."""
    return None if a is None else np.asarray(a, dtype=np.float64)


def assert_close(actual, expected, dtype):
    """`actual` (a backend's, in `dtype`) against `expected`, the reference computed in float64."""
    actual, expected = to_numpy(actual), np.asarray(expected, dtype=np.float64)
    assert actual.dtype == np.dtype(dtype)
    assert not np.isnan(actual).any()
    np.testing.assert_allclose(actual, expected, **TOLERANCE[dtype])


dtypes = st.sampled_from([np.float32, np.float64])


@st.composite
def values(draw, shape, dtype, extreme=True):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(shape) * draw(st.sampled_from([1.0, 10.0]))
    if extreme and x.size and draw(st.booleans()):
        x.flat[rng.integers(0, x.size, size=max(1, x.size // 4))] = rng.choice([-1e4, 1e4], size=max(1, x.size // 4))
    return x.astype(dtype)


@st.composite
def gradients(draw, shape, dtype):
    """A gradient for an output of `shape`: a full array, or (as a sum's or a mean's backward
    gives one) a smaller array broadcast to the shape, read-only, with stride-0 axes."""
    if not draw(st.booleans()):
        return draw(values(shape, dtype, extreme=False))
    small = tuple(n if draw(st.booleans()) else 1 for n in shape)
    return np.broadcast_to(draw(values(small, dtype, extreme=False)), shape)


# ---------------------------------------------------------------------------
# softmax and log-softmax
# ---------------------------------------------------------------------------


@given(data=st.data())
def test_softmax_matches_reference(backend, data):
    dtype = data.draw(dtypes)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(values(shape, dtype))
    mask = None
    if data.draw(st.booleans()):
        # a shape that broadcasts *to* x's: drop leading axes, turn some axes to size 1
        dropped = data.draw(st.integers(0, len(shape)))
        mask_shape = tuple(n if data.draw(st.booleans()) else 1 for n in shape[dropped:])
        mask = data.draw(hnp.arrays(np.bool_, mask_shape))
    expected = reference.softmax(f64(x), axis, mask)
    y = backend.softmax(to_backend(backend, x), axis, to_backend(backend, mask))
    assert_close(y, expected, dtype)
    dy = data.draw(gradients(shape, dtype))
    y_in = expected.astype(dtype)  # backward's input in the backend's dtype; its truth in float64
    assert_close(
        backend.softmax_backward(to_backend(backend, y_in), to_backend(backend, dy), axis),
        reference.softmax_backward(f64(y_in), f64(dy), axis),
        dtype,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fully_masked_rows_are_zeros_not_nan(backend, dtype):
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(dtype)
    mask = np.zeros((3, 5), dtype=bool)
    mask[1] = True
    y = to_numpy(backend.softmax(to_backend(backend, x), -1, to_backend(backend, mask)))
    np.testing.assert_array_equal(y[1], 0)
    np.testing.assert_allclose(y[[0, 2]].sum(axis=1), 1, rtol=1e-6)
    dx = to_numpy(backend.softmax_backward(to_backend(backend, y), to_backend(backend, np.ones_like(x)), -1))
    np.testing.assert_array_equal(dx[1], 0)


@given(data=st.data())
def test_log_softmax_matches_reference(backend, data):
    dtype = data.draw(dtypes)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(values(shape, dtype))
    expected = reference.log_softmax(f64(x), axis)
    assert_close(backend.log_softmax(to_backend(backend, x), axis), expected, dtype)
    dy = data.draw(gradients(shape, dtype))
    y_in = expected.astype(dtype)
    assert_close(
        backend.log_softmax_backward(to_backend(backend, y_in), to_backend(backend, dy), axis),
        reference.log_softmax_backward(f64(y_in), f64(dy), axis),
        dtype,
    )


# ---------------------------------------------------------------------------
# layer norm, GELU, matmul
# ---------------------------------------------------------------------------


@given(data=st.data())
def test_layer_norm_matches_reference(backend, data):
    dtype = data.draw(dtypes)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8))
    x = data.draw(values(shape, dtype, extreme=False))
    affine = data.draw(st.booleans())
    weight = data.draw(values(shape[-1:], dtype, extreme=False)) if affine else None
    bias = data.draw(values(shape[-1:], dtype, extreme=False)) if affine else None
    y, mean, rstd = reference.layer_norm(f64(x), f64(weight), f64(bias), 1e-5)
    got = backend.layer_norm(*(to_backend(backend, a) for a in (x, weight, bias)), 1e-5)
    for actual, expected in zip(got, (y, mean, rstd)):  # rstd included: judged against float64
        assert_close(actual, expected, dtype)
    dy = data.draw(values(shape, dtype, extreme=False))
    mean, rstd = mean.astype(dtype), rstd.astype(dtype)  # what forward saves, in the backend's dtype
    expected_grads = reference.layer_norm_backward(f64(dy), f64(x), f64(weight), f64(mean), f64(rstd))
    got_grads = backend.layer_norm_backward(*(to_backend(backend, a) for a in (dy, x, weight, mean, rstd)))
    for actual, expected in zip(got_grads, expected_grads):
        if expected is None:
            assert actual is None
        else:
            np.testing.assert_allclose(to_numpy(actual), expected, rtol=1e-3 if dtype == np.float32 else 1e-9, atol=1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@given(data=st.data())
def test_gelu_matches_reference(backend, approximate, data):
    dtype = data.draw(dtypes)
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
    x = data.draw(values(shape, dtype, extreme=False))
    assert_close(backend.gelu(to_backend(backend, x), approximate), reference.gelu(f64(x), approximate), dtype)
    dy = data.draw(values(shape, dtype, extreme=False))
    assert_close(
        backend.gelu_backward(to_backend(backend, x), to_backend(backend, dy), approximate),
        reference.gelu_backward(f64(x), f64(dy), approximate),
        dtype,
    )


@given(data=st.data())
def test_matmul_matches_reference(backend, data):
    dtype = data.draw(dtypes)
    n, k, m = (data.draw(st.integers(1, 5)) for _ in range(3))
    (batch_a, batch_b), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    if data.draw(st.booleans()):
        batch_b = ()  # a batch of matrices times one matrix (the Linear layer case)
    a = data.draw(values(batch_a + (n, k), dtype, extreme=False))
    b = data.draw(values(batch_b + (k, m), dtype, extreme=False))
    if data.draw(st.booleans()):
        b = np.swapaxes(np.swapaxes(b, -1, -2).copy(), -1, -2)  # a transposed (non-contiguous) operand
    assert_close(backend.matmul(to_backend(backend, a), to_backend(backend, b)), np.matmul(a, b), dtype)


# ---------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------


def naive_attention(q, k, v, mask, is_causal):
    """The materialised definition, softmax(q k^T / sqrt(d) + mask) v with every score at once:
    models/attention.py's op-by-op path (the one that returns the weights), on the reference backend."""
    with mt.use_backend("numpy"), mt.no_grad():
        out, _ = materialised_attention(*map(mt.tensor, (q, k, v)), mask=mask, is_causal=is_causal, return_weights=True)
    return out.data


@st.composite
def attention_case(draw):
    dtype = draw(dtypes)
    batch = draw(st.sampled_from([(), (2,), (2, 3)]))
    tq = draw(st.integers(1, 140))
    tk = draw(st.sampled_from([tq, draw(st.integers(1, 300))]))  # up to 3 key tiles
    d, dv = draw(st.integers(1, 16)), draw(st.integers(1, 8))
    q = draw(values(batch + (tq, d), dtype, extreme=False))
    k = draw(values(batch + (tk, d), dtype, extreme=False))
    v = draw(values(batch + (tk, dv), dtype, extreme=False))
    kind = draw(st.sampled_from(["none", "bool", "bool_shared", "float"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    mask = None
    if kind == "bool":
        mask = rng.random(batch + (tq, tk)) < 0.3
        mask[..., 0, :] = True  # a fully masked row
    elif kind == "bool_shared":
        mask = rng.random((tq, tk)) < 0.3
    elif kind == "float":
        mask = rng.standard_normal((tq, tk)).astype(dtype)
    is_causal = draw(st.booleans())
    return dtype, q, k, v, mask, is_causal


@contextlib.contextmanager
def short_keys(backend, keys):
    """The numba backend's threshold between its short-sequence attention path (every score of a
    head at once) and its tiled kernels, set to `keys` for a while (None: as it is)."""
    if keys is None or not hasattr(backend, "SHORT_KEYS"):
        yield
        return
    saved, backend.SHORT_KEYS = backend.SHORT_KEYS, keys
    try:
        yield
    finally:
        backend.SHORT_KEYS = saved


@given(case=attention_case(), threshold=st.sampled_from([None, -1, 0]))
def test_attention_matches_reference(backend, case, threshold):
    """threshold: the short path's limit as it is, or just below the key count (the tiled
    kernels run), or at it (the short path runs)."""
    dtype, q, k, v, mask, is_causal = case
    with short_keys(backend, None if threshold is None else k.shape[-2] + threshold):
        _attention_matches_reference(backend, dtype, q, k, v, mask, is_causal)


def _attention_matches_reference(backend, dtype, q, k, v, mask, is_causal):
    # the truth in float64 (the softmax statistics included); the backward's inputs in dtype
    out, stats = reference.attention(f64(q), f64(k), f64(v), mask if mask is None or mask.dtype == bool else f64(mask),
                                     None, is_causal)
    got_out, got_stats = backend.attention(*(to_backend(backend, a) for a in (q, k, v, mask)), None, is_causal)
    # An output is a weighted mean of values: in float32 it is exact to a few ulps of
    # the largest value, not of itself (weights summing values of both signs cancel).
    value_scale = max(1.0, float(np.abs(v).max()))
    close = dict(rtol=2e-4, atol=2e-5 * value_scale) if dtype == np.float32 else TOLERANCE[dtype]
    np.testing.assert_allclose(to_numpy(got_out), out, **close)
    for got_part, part in zip(got_stats, stats):  # row max (-inf where fully masked) and row sum (0)
        np.testing.assert_allclose(to_numpy(got_part), part, **TOLERANCE[dtype])
    dout = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
    out, stats = out.astype(dtype), tuple(part.astype(dtype) for part in stats)
    expected = reference.attention_backward(f64(q), f64(k), f64(v), f64(out), tuple(map(f64, stats)), f64(dout),
                                            mask if mask is None or mask.dtype == bool else f64(mask), None, is_causal)
    got = backend.attention_backward(
        *(to_backend(backend, a) for a in (q, k, v, out)), tuple(to_backend(backend, part) for part in stats),
        *(to_backend(backend, a) for a in (dout, mask)), None, is_causal
    )
    scale = max(1.0, float(np.abs(np.stack([np.abs(a).max() for a in (q, k, v)])).max())) ** 2
    loose = dict(rtol=2e-3, atol=2e-4 * scale) if dtype == np.float32 else TOLERANCE[dtype]
    for actual, wanted in zip(got, expected):
        actual = to_numpy(actual)
        assert not np.isnan(actual).any()
        np.testing.assert_allclose(actual, wanted, **loose)


@given(case=attention_case())
def test_numba_attention_backward_takes_either_paths_forward(case):
    """Both numba paths save the same (row max, row sum): a backward on one path after a
    forward on the other gives the reference's gradients."""
    nb = _load_or_skip("numba")
    dtype, q, k, v, mask, is_causal = case
    dout = np.random.default_rng(2).standard_normal(q.shape[:-1] + v.shape[-1:]).astype(dtype)
    out, stats = reference.attention(q, k, v, mask, None, is_causal)
    expected = reference.attention_backward(q, k, v, out, stats, dout, mask, None, is_causal)
    scale = max(1.0, float(max(np.abs(a).max() for a in (q, k, v)))) ** 2
    close = dict(rtol=2e-3, atol=2e-4 * scale) if dtype == np.float32 else TOLERANCE[dtype]
    for forward_keys, backward_keys in ((0, 10**9), (10**9, 0)):  # tiled then short; short then tiled
        with short_keys(nb, forward_keys):
            got_out, got_stats = nb.attention(q, k, v, mask, None, is_causal)
        with short_keys(nb, backward_keys):
            got = nb.attention_backward(q, k, v, got_out, got_stats, dout, mask, None, is_causal)
        for actual, wanted in zip(got, expected):
            np.testing.assert_allclose(actual, wanted, **close)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("short", [0, 10**9])  # the numba backend's tiled kernels, its short path
@pytest.mark.parametrize("tq, tk", [(300, 5), (140, 12), (200, 199)])
def test_numba_causal_attention_where_whole_blocks_of_queries_see_no_key(dtype, short, tq, tk):
    """Causal with Tq > Tk: the first Tq - Tk queries see nothing (zero output, no gradient),
    which for (300, 5) is more than a whole block of queries on either path."""
    nb = _load_or_skip("numba")
    rng = np.random.default_rng(tq)
    q = rng.standard_normal((2, tq, 8)).astype(dtype)
    k, v = (rng.standard_normal((2, tk, 8)).astype(dtype) for _ in range(2))
    dout = rng.standard_normal((2, tq, 8)).astype(dtype)
    out, stats = reference.attention(q, k, v, None, None, True)
    expected = reference.attention_backward(q, k, v, out, stats, dout, None, None, True)
    with short_keys(nb, short):
        got_out, got_stats = nb.attention(q, k, v, None, None, True)
        got = nb.attention_backward(q, k, v, got_out, got_stats, dout, None, None, True)
    close = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else TOLERANCE[dtype]
    for actual, wanted in zip((got_out, *got_stats, *got), (out, *stats, *expected)):
        np.testing.assert_allclose(actual, wanted, **close)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy says so when NaN appears
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("keys", [0, 10**9])  # the numba backend's tiled kernels, its short path
def test_numba_attention_saves_the_references_statistics_for_nan_and_hidden_rows(dtype, keys):
    """Row max and row sum where a query sees a NaN (NaN, NaN), only NaN (NaN, NaN), an
    infinite score, or nothing at all (-inf, 0): what backward reads must mean the same."""
    nb = _load_or_skip("numba")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 6, 3)).astype(dtype) for _ in range(3))
    mask = rng.standard_normal((6, 6)).astype(dtype)
    mask[1, 2] = np.nan  # one NaN score
    mask[2, :] = np.nan  # nothing but NaN
    mask[3, 4] = np.inf
    mask[4, :] = -np.inf  # nothing visible
    expected = reference.attention(q, k, v, mask, None, False)[1]
    with short_keys(nb, keys):
        got = nb.attention(q, k, v, mask, None, False)[1]
    for got_part, part in zip(got, expected):
        np.testing.assert_array_equal(np.isnan(got_part), np.isnan(part))
        np.testing.assert_allclose(got_part, part, **TOLERANCE[dtype])


@given(case=attention_case())
def test_reference_attention_equals_the_materialised_definition(case):
    dtype, q, k, v, mask, is_causal = case
    out, _ = reference.attention(q, k, v, mask, None, is_causal)
    np.testing.assert_allclose(out, naive_attention(q, k, v, mask, is_causal), **TOLERANCE[dtype])


@pytest.mark.parametrize("name", ["numpy", "numba"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_backward_passes_gradcheck(name, is_causal):
    rng = np.random.default_rng(0)
    q, k, v = (mt.tensor(rng.standard_normal((2, 5, 3)), requires_grad=True) for _ in range(3))
    mask = rng.random((5, 5)) < 0.3
    with mt.use_backend(name):
        assert mt.gradcheck(lambda q, k, v: mt.F.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=is_causal), q, k, v)


def test_attention_backward_equals_autograd_through_the_materialised_graph():
    """The fused op's hand-written backward against the engine differentiating the
    definition op by op (matmul, masked_fill, softmax, matmul)."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 3, 150, 8)) for _ in range(3)]
    mask = rng.random((150, 150)) < 0.2
    upstream = rng.standard_normal((2, 3, 150, 8))
    grads = []
    for fused in (True, False):
        q, k, v = (mt.tensor(a, requires_grad=True) for a in arrays)
        if fused:
            out = mt.F.scaled_dot_product_attention(q, k, v, mask=mask)
        else:
            out, _ = materialised_attention(q, k, v, mask=mask, return_weights=True)
        out.backward(upstream)
        grads.append([t.grad for t in (q, k, v)])
    for fused_grad, composed_grad in zip(*grads):
        np.testing.assert_allclose(fused_grad, composed_grad, rtol=1e-9, atol=1e-11)


# ---------------------------------------------------------------------------
# The reference against compositions of primitives
# ---------------------------------------------------------------------------


def test_reference_layer_norm_backward_equals_autograd_of_primitives():
    rng = np.random.default_rng(0)
    x_array, w_array, b_array = rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    dy = rng.standard_normal((4, 6))
    x, w, b = (mt.tensor(a, requires_grad=True) for a in (x_array, w_array, b_array))
    y = mt.nn.layer_norm_composed(x, w, b, 1e-5)
    y.backward(dy)
    y_ref, mu, rstd = reference.layer_norm(x_array, w_array, b_array, 1e-5)
    np.testing.assert_allclose(y_ref, y.data, rtol=1e-12)
    for ours, composed in zip(reference.layer_norm_backward(dy, x_array, w_array, mu, rstd), (x.grad, w.grad, b.grad)):
        np.testing.assert_allclose(ours, composed, rtol=1e-9, atol=1e-12)


def test_reference_gelu_backward_equals_finite_differences():
    x = np.linspace(-5, 5, 101)
    for approximate in ("none", "tanh"):
        numeric = (reference.gelu(x + 1e-6, approximate) - reference.gelu(x - 1e-6, approximate)) / 2e-6
        np.testing.assert_allclose(reference.gelu_backward(x, np.ones_like(x), approximate), numeric, atol=1e-8)


# ---------------------------------------------------------------------------
# Choosing a backend
# ---------------------------------------------------------------------------


def test_set_get_and_use_backend():
    assert mt.get_backend() == "numpy"
    with mt.use_backend("numba"):
        assert mt.get_backend() == "numba"
        y = mt.tensor([[1.0, 2.0, 3.0]]).softmax()
    assert mt.get_backend() == "numpy"
    np.testing.assert_allclose(y.data.sum(), 1.0, rtol=1e-6)


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'jax'; the known backends are 'numpy', 'numba', 'cupy'"):
        mt.set_backend("jax")


def test_environment_variable_chooses_the_backend():
    import subprocess
    import sys

    code = "import minitensor as mt; print(mt.get_backend())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**__import__("os").environ, "MINITENSOR_BACKEND": "numba"}
    )
    assert result.stdout.strip() == "numba", result.stderr


def test_cupy_backend_without_cupy_says_how_to_install_it():
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed here")
    except ImportError:
        pass
    with pytest.raises(ImportError, match=r"pip install cupy-cuda12x"):
        mt.set_backend("cupy")
    assert mt.get_backend() == "numpy"  # nothing changed
    with pytest.raises(ImportError, match=r"pip install cupy-cuda12x"):
        mt.randn(2).to("cupy")


def test_tensor_to_cupy_and_back_is_differentiable():
    _load_or_skip("cupy")
    x = mt.randn(3, 4, requires_grad=True)
    y = x.to("cupy")
    assert not isinstance(y.data, np.ndarray)
    (y * y).sum().to("numpy").backward()
    np.testing.assert_allclose(x.grad, 2 * x.data, rtol=1e-6)


def test_numba_fast_exp_is_within_one_ulp_of_numpy_over_the_float32_range():
    """The vectorised float32 exp replaces np.exp inside the kernels: bound its error
    over every value it can see (the softmax feeds it x - max <= 0; GELU and tanh up to +88)."""
    nb = _load_or_skip("numba")
    x = np.concatenate([np.linspace(-87.3, 88.7, 2_000_001, dtype=np.float32), np.float32([0.0, -0.0, 1e-30, -1e-30])])
    exact = np.exp(x.astype(np.float64))
    relative = np.abs(nb.exp(x).astype(np.float64) - exact) / exact
    assert relative.max() < 1.2e-7  # float32's ulp is 1.19e-7 relative
    below = np.float32([-87.31, -100.0, -1e4, -np.inf])
    np.testing.assert_array_equal(nb.exp(below), 0.0)  # float32 has only denormals there
    np.testing.assert_array_equal(nb.exp(np.float64([-1e4, 0.0, 1.0])), np.exp([-1e4, 0.0, 1.0]))  # float64: math.exp


def test_numba_kernels_run_as_plain_python_with_jit_disabled():
    """NUMBA_DISABLE_JIT=1 turns every kernel into a Python function a student can step
    into with pdb; they must still compute the same numbers."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, sys\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import op_code as ref\n"
        "from minitensor.backends import numba_backend as nb\n"
        "rng = np.random.default_rng(0)\n"
        "x = rng.standard_normal((3, 6)).astype(np.float32)\n"
        "mask = rng.random((3, 6)) < 0.3\n"
        "np.testing.assert_allclose(nb.softmax(x, -1, mask), ref.softmax(x, -1, mask), rtol=1e-5, atol=1e-7)\n"
        "np.testing.assert_allclose(nb.gelu(x, 'tanh'), ref.gelu(x, 'tanh'), rtol=1e-5, atol=1e-6)\n"
        "np.testing.assert_allclose(nb.gelu_backward(x, x), ref.gelu_backward(x, x), rtol=1e-5, atol=1e-6)\n"
        "q = rng.standard_normal((2, 5, 4))\n"
        "np.testing.assert_allclose(nb.attention(q, q, q, None, None, True)[0], ref.attention(q, q, q, None, None, True)[0])\n"
        "hide = rng.random((5, 5)) < 0.3\n"
        "out, stats = ref.attention(q, q, q, hide, None, False)\n"
        "for got, wanted in zip(nb.attention_backward(q, q, q, out, stats, q, hide, None, False),\n"
        "                       ref.attention_backward(q, q, q, out, stats, q, hide, None, False)):\n"
        "    np.testing.assert_allclose(got, wanted)\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "NUMBA_DISABLE_JIT": "1"}
    )
    assert result.stdout.strip() == "ok", result.stderr


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernels_stay_finite_and_accurate_far_out(backend, approximate):
    """Large |x|: 1 + tanh(u) cancels, exp(-2u) overflows; the kernels must avoid both."""
    x = np.linspace(-60, 60, 2001).astype(np.float32)
    dy = np.ones_like(x)
    y = to_numpy(backend.gelu(to_backend(backend, x), approximate))
    dx = to_numpy(backend.gelu_backward(to_backend(backend, x), to_backend(backend, dy), approximate))
    assert np.isfinite(y).all() and np.isfinite(dx).all()
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, reference.gelu(x64, approximate), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, reference.gelu_backward(x64, np.ones_like(x64), approximate), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask_shape, axis", [((5, 7), -1), ((1, 3, 5, 7), -1), ((2, 1, 5, 7), -1), ((5, 1), -1),
                                              ((5, 7), -2), ((7,), 3), ((), -1)])
def test_masked_softmax_with_a_shared_mask_matches_reference(backend, dtype, mask_shape, axis):
    """A mask shared by the leading axes is used in place by the numba kernel (row r reads mask
    row r % rows); one broadcast over a middle axis, or along another axis, is copied."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 7)).astype(dtype)
    mask = rng.random(mask_shape) < 0.4
    if mask.ndim >= 2:
        mask[..., 1, :] = True  # fully masked rows (along the last axis)
    expected = reference.softmax(x, axis, mask)
    assert_close(backend.softmax(to_backend(backend, x), axis, to_backend(backend, mask)), expected, dtype)


# ---------------------------------------------------------------------------
# One answer on every backend (issue 21, item 6)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [1e14, -1e14, 1e300])
def test_log_softmax_at_huge_values_matches_torch_on_every_backend(backend, offset):
    """(x - max) - log sum, the reference's order: x - (max + log sum) gave [0, 0, 0] and a
    gradient of [-2, -2, -2] on numba at |x| ~ 1e14."""
    import torch

    x = np.array([[offset, offset, offset], [offset - 1, offset, offset + 1]])
    y = backend.log_softmax(to_backend(backend, x), -1)
    dy = np.ones_like(x)
    dx = backend.log_softmax_backward(y, to_backend(backend, dy), -1)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.log_softmax(xt, -1)
    yt.backward(torch.tensor(dy))
    np.testing.assert_allclose(to_numpy(y), yt.detach().numpy(), rtol=1e-12)  # -log 3 = -1.0986
    np.testing.assert_allclose(to_numpy(dx), xt.grad.numpy(), atol=1e-12)  # 0


@pytest.mark.parametrize("dtypes_", [(np.float32, np.float64, np.float64), (np.float64, np.float32, np.float32),
                                     (np.float32, np.float32, np.float64)], ids=str)
def test_attention_with_mixed_dtypes_promotes_as_numpy_on_every_backend(backend, dtypes_):
    """q float32 with k, v float64 died in a Numba TypingError; numpy promoted to float64."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 4)).astype(dtype) for dtype in dtypes_)
    mask = rng.random((3, 3)) < 0.3
    with mt.use_backend(backend.name):
        tensors = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = mt.F.scaled_dot_product_attention(*tensors, mask=mask)
        out.backward(np.ones(out.shape))
    with mt.use_backend("numpy"):
        ref_tensors = [mt.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v)]
        ref = mt.F.scaled_dot_product_attention(*ref_tensors, mask=mask)
        ref.backward(np.ones(ref.shape))
    assert out.dtype == np.float64
    np.testing.assert_allclose(to_numpy(out.data), ref.data, rtol=1e-10, atol=1e-12)
    for t, r in zip(tensors, ref_tensors):
        assert t.grad.dtype == t.dtype  # each gradient in its input's dtype
        np.testing.assert_allclose(to_numpy(t.grad), r.grad.astype(t.dtype), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtypes_", [(np.float32, np.float64, np.float64), (np.float64, np.float32, np.float32),
                                     (np.float32, np.float32, np.float64)], ids=str)
def test_layer_norm_with_mixed_dtypes_follows_one_rule_on_every_backend(backend, dtypes_):
    """float32 x with a float64 weight was float32 on numba and float64 on numpy: now every
    backend casts x, weight and bias to their common dtype (NumPy's promotion) first."""
    from models.layernorm import layer_norm

    rng = np.random.default_rng(1)
    x, weight, bias = (rng.standard_normal(shape).astype(dtype) for shape, dtype in zip([(3, 5), (5,), (5,)], dtypes_))
    y, mean, rstd = backend.layer_norm(*(to_backend(backend, a) for a in (x, weight, bias)))
    expected, expected_mean, expected_rstd = reference.layer_norm(*(a.astype(np.float64) for a in (x, weight, bias)))
    assert to_numpy(y).dtype == np.float64
    np.testing.assert_allclose(to_numpy(y), expected, rtol=1e-10, atol=1e-12)
    with mt.use_backend(backend.name):
        tensors = [mt.tensor(a, requires_grad=True) for a in (x, weight, bias)]
        out = layer_norm(*tensors)
        out.backward(np.ones(out.shape))
    import torch

    torch_tensors = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, weight, bias)]
    torch.nn.functional.layer_norm(torch_tensors[0], (5,), *torch_tensors[1:]).sum().backward()
    assert out.dtype == np.float64
    for t, r in zip(tensors, torch_tensors):
        assert t.grad.dtype == t.dtype
        np.testing.assert_allclose(to_numpy(t.grad), r.grad.numpy().astype(t.dtype), rtol=1e-5, atol=1e-5)
