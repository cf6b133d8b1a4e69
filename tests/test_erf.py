"""The Numba backend's float32 erf and the GELU built on it.

The erf is a polynomial approximation (backends/numba_backend/elementwise.py), so its error is
bounded here in float32 ulps against scipy's erf computed in float64, over the whole float32
range: a sweep of bit patterns, every float around the switch-over points, edge values and
hypothesis floats. The GELU kernels built on it are held against the NumPy reference and
PyTorch (float32 and float64), against finite differences (float64), and must give the
reference's NaN, inf and zero wherever it gives them.
"""

import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.differentiate import derivative

import op_code as reference  # GELU's own code, on arrays

nb = pytest.importorskip("minitensor.backends.numba_backend")

ERF_MAX_ULPS = 1.25  # measured: 1.08, near the switch-over (the fit alone: 1.06; the inlined exp adds a little)
SWITCH, CLAMP = 0.875, 4.0  # where the erf changes formula, and where it becomes exactly +-1


def float32_ulp(exact):
    """The spacing of float32 numbers at |exact| (a float64): 2**(e - 23) in the binade
    [2**e, 2**(e+1)) holding |exact|, and 2**-149 among the subnormals."""
    exponent = np.floor(np.log2(np.maximum(np.abs(exact), 2.0**-126)))
    return 2.0 ** (exponent - 23)


def erf_error_in_ulps(x):
    x = np.asarray(x, dtype=np.float32)
    exact = scipy.special.erf(x.astype(np.float64))
    return np.abs(nb.erf(x).astype(np.float64) - exact) / float32_ulp(exact)


def finite_float32(bit_patterns):
    """The positive finite float32 numbers with these bit patterns, and their negatives."""
    positive = np.asarray(bit_patterns, dtype=np.uint32).view(np.float32)
    return np.concatenate([positive, -positive])


def around(value, count=2000):
    """The `count` float32 numbers on each side of value (and value)."""
    bits = np.array([value], dtype=np.float32).view(np.int32)[0]
    return finite_float32(np.arange(bits - count, bits + count + 1))


def test_float32_erf_error_is_bounded_over_the_whole_float32_range():
    every_1021st = finite_float32(np.arange(0, 0x7F800000, 1021))  # 0 up to the largest float, 2.1M of each sign
    errors = erf_error_in_ulps(every_1021st)
    worst = np.argmax(errors)
    assert errors[worst] <= ERF_MAX_ULPS, f"erf({every_1021st[worst]!r}) is {errors[worst]:.2f} ulps off"


@pytest.mark.parametrize("point", [SWITCH, CLAMP, 1e-30, 1e-3, 0.5, 2.0])
def test_float32_erf_error_is_bounded_at_every_float_near_the_switch_points(point):
    x = around(point)
    errors = erf_error_in_ulps(x)
    worst = np.argmax(errors)
    assert errors[worst] <= ERF_MAX_ULPS, f"erf({x[worst]!r}) is {errors[worst]:.2f} ulps off"


@given(hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(width=32, allow_nan=False)))
def test_float32_erf_error_is_bounded_for_hypothesis_floats(x):
    assert erf_error_in_ulps(x).max() <= ERF_MAX_ULPS


def test_float32_erf_at_the_edges():
    tiny = np.float32(2.0**-149)  # the smallest subnormal
    x = np.float32([0.0, -0.0, tiny, -tiny, 1e-38, np.inf, -np.inf, 3.4e38, -3.4e38, CLAMP, -CLAMP, 10.0, -10.0])
    expected = scipy.special.erf(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(nb.erf(x)[:4], expected[:4])  # 0, -0 and the subnormals exactly
    np.testing.assert_array_equal(nb.erf(x)[5:], expected[5:])  # +-1 exactly from the clamp on
    assert np.signbit(nb.erf(np.float32([-0.0]))[0])  # erf is odd: -0 stays -0
    assert np.isnan(nb.erf(np.float32([np.nan, -np.nan]))).all()


def test_float32_exp_inside_the_kernels_keeps_inf_nan_and_underflow():
    x = np.float32([88.8, 1e30, np.inf, -87.4, -np.inf, np.nan])
    np.testing.assert_array_equal(nb.exp(x), np.float32([np.inf, np.inf, np.inf, 0.0, 0.0, np.nan]))


def test_float64_erf_is_math_erf():
    x = np.linspace(-6, 6, 10001)
    np.testing.assert_allclose(nb.erf(x), scipy.special.erf(x), rtol=1e-15, atol=1e-16)


# ---------------------------------------------------------------------------
# GELU on the erf
# ---------------------------------------------------------------------------

# float32: against the float64 value of the op's own code at the same points (exact to float64
# rounding), within the kernels' stated bound (tests/test_default_path.py measures it:
# |error| <= rtol |exact| + 1e-9, the gradient's absolute term 1.2e-7 |dy|); float64: 1e-12 relative.
GELU_RTOL_32 = {"none": 6e-5, "tanh": 4e-6}


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_matches_reference_and_torch_over_a_wide_range(dtype, approximate):
    torch = pytest.importorskip("torch")
    x = np.concatenate([np.linspace(-12, 12, 24001), around(SWITCH * np.sqrt(2), 50), around(CLAMP * np.sqrt(2), 50)])
    x = x.astype(dtype)
    dy = np.random.default_rng(0).standard_normal(x.shape).astype(dtype)
    y, dx = nb.gelu(x, approximate), nb.gelu_backward(x, dy, approximate)
    assert y.dtype == dx.dtype == dtype
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    exact_y, exact_dx = reference.gelu(x64, approximate), reference.gelu_backward(x64, dy64, approximate)
    if dtype == np.float32:
        rtol = GELU_RTOL_32[approximate]
        np.testing.assert_allclose(y, exact_y, rtol=rtol, atol=1e-9)
        assert (np.abs(dx - exact_dx) <= rtol * np.abs(exact_dx) + 1.2e-7 * np.maximum(np.abs(dy64), 1e-3)).all()
        return  # PyTorch's float32 GELU is less accurate than this (0.22 relative in its left tail): no reference
    np.testing.assert_allclose(y, exact_y, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dx, exact_dx, rtol=1e-12, atol=1e-14)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx, approximate=approximate)
    ty.backward(torch.tensor(dy))
    # PyTorch's tanh-form derivative goes through tanh(u) and cancels where tanh(u) ~ -1
    # and leaves an absolute error of a few ulps of 1 there (the reference avoids it)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-13 if approximate == "tanh" else 1e-14)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_equals_finite_differences_in_float64(approximate):
    x = np.concatenate([np.linspace(-9, 9, 1801), [-0.3, 1e-3, 0.6]])
    numeric = derivative(lambda z: nb.gelu(z, approximate), x).df  # scipy's adaptive finite differences
    np.testing.assert_allclose(nb.gelu_backward(x, np.ones_like(x), approximate), numeric, rtol=1e-7, atol=1e-9)


@given(data=st.data())
def test_gelu_matches_reference_for_hypothesis_shapes_and_layouts(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    approximate = data.draw(st.sampled_from(["none", "tanh"]))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=9))
    x = data.draw(hnp.arrays(dtype, shape, elements=st.floats(-20, 20, width=32)))
    if x.ndim >= 2 and data.draw(st.booleans()):
        x = np.asfortranarray(x)
    dy = np.ones_like(x)
    x64 = x.astype(np.float64)  # the truth: the op's own code in float64 at the same points
    rtol, atol = (GELU_RTOL_32[approximate], 1.2e-7) if dtype == np.float32 else (1e-12, 1e-14)
    np.testing.assert_allclose(nb.gelu(x, approximate), reference.gelu(x64, approximate), rtol=rtol, atol=atol)
    np.testing.assert_allclose(nb.gelu_backward(x, dy, approximate), reference.gelu_backward(x64, np.ones_like(x64), approximate),
                               rtol=rtol, atol=atol)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_gives_the_references_nan_inf_and_zero_far_out(dtype, approximate):
    """Where exp(-2u) or x**3 overflows, the kernels must not invent values: the tanh form
    once gave gelu(-inf) = -inf and, in float64, a derivative of -3.9e54 at x = -1e30."""
    x = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -1e30, 1e30, -1e10, 1e10, -40.0, 40.0, -12.0], dtype=dtype)
    dy = np.ones_like(x)
    with np.errstate(all="ignore"):
        expected_y, expected_dx = reference.gelu(x, approximate), reference.gelu_backward(x, dy, approximate)
    y, dx = nb.gelu(x, approximate), nb.gelu_backward(x, dy, approximate)
    for got, expected in ((y, expected_y), (dx, expected_dx)):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
        finite = np.isfinite(expected)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-30)
