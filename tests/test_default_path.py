"""What the default path ("numpy", no accelerator) computes once, and the float32 erf it uses (issue 36).

GELU's forward keeps Phi(x) for its backward (the erf is the op's dearest step), and a float32
input takes erf_float32, a rational fit, instead of scipy's erf, which computes each float32 in
float64. The fit's error is bounded here against scipy in float64, and GELU against PyTorch.
"""

import numpy as np
import pytest
import scipy.special

import minitensor as mt
from minitensor import nn
from minitensor.ops import activations

F = nn.functional

torch = pytest.importorskip("torch")


def float32_sweep():
    """Every 4099th positive float32 up to 8 (and their negatives), and a fine grid over [-12, 12]."""
    positive = np.arange(0, np.float32(8).view(np.int32), 4099, dtype=np.int32).view(np.float32)
    return np.concatenate([positive, -positive, np.linspace(-12, 12, 200_001, dtype=np.float32)])


def test_gelu_computes_phi_once_per_forward_and_backward(monkeypatch):
    calls = []
    real = activations.normal_cdf
    monkeypatch.setattr(activations, "normal_cdf", lambda x: calls.append(x.shape) or real(x))
    x = mt.tensor(np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32), requires_grad=True)
    with mt.use_backend("numpy"):
        y = mt.nn.functional.gelu(x)
        saved = dict(y.grad_fn.saved)
        y.sum().backward()
    assert calls == [(64, 32)], f"Phi(x) computed {len(calls)} times (forward and backward each?)"
    np.testing.assert_allclose(saved["cdf"], scipy.special.ndtr(x.data.astype(np.float64)), atol=2.3e-7)


def test_float32_gelu_does_not_call_scipys_erf(monkeypatch):
    def refuse(*args):
        raise AssertionError("scipy.special.erf was called on the float32 path")

    monkeypatch.setattr(scipy.special, "erf", refuse)
    x = mt.tensor(np.linspace(-4, 4, 1000, dtype=np.float32), requires_grad=True)
    with mt.use_backend("numpy"):
        mt.nn.functional.gelu(x).sum().backward()
    assert x.grad.dtype == np.float32


def test_float32_erf_is_within_its_bound_of_scipys_float64_erf():
    z = np.concatenate([float32_sweep(), np.float32([4, -4, 3.9999998, 1e-30, -1e-30, 0, -0.0, 3e38, -3e38])])
    error = np.abs(activations.erf_float32(z).astype(np.float64) - scipy.special.erf(z.astype(np.float64)))
    worst = np.argmax(error)
    assert error[worst] <= 4.5e-7, f"erf_float32({z[worst]!r}) is {error[worst]:.3g} off"
    assert np.abs(activations.erf_float32(z)).max() <= 1  # the clip: the fit alone passes 1


def test_float32_phi_is_within_its_bound_and_exact_in_the_left_tail():
    x = float32_sweep()
    cdf = activations.normal_cdf(x)
    exact = scipy.special.ndtr(x.astype(np.float64))
    assert cdf.dtype == np.float32
    np.testing.assert_allclose(cdf, exact, rtol=0, atol=2.3e-7)
    left = x < activations.FAR_LEFT  # where the fit's absolute error would be a large part of Phi
    np.testing.assert_allclose(cdf[left], exact[left], rtol=1e-6, atol=1e-40)


@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, 3e38, -3e38])
def test_float32_phi_at_special_values_is_scipys(special):
    x = np.full(3, special, dtype=np.float32)
    np.testing.assert_array_equal(activations.normal_cdf(x), scipy.special.ndtr(x))


def test_float32_gelu_and_its_gradient_match_pytorch_over_a_wide_range():
    x = float32_sweep()
    ours = mt.tensor(x, requires_grad=True)
    theirs = torch.from_numpy(x.copy()).requires_grad_()
    dy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    with mt.use_backend("numpy"):
        y = mt.nn.functional.gelu(ours)
        y.backward(mt.tensor(dy))
    y_torch = torch.nn.functional.gelu(theirs)
    y_torch.backward(torch.from_numpy(dy))
    np.testing.assert_allclose(y.data, y_torch.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-5, atol=1e-6)


class ForwardOnly:
    """An accelerator with GELU's forward only (as a student's might be): its forward saves no
    Phi, so the op's own backward computes it."""

    name = "forward-only"
    matmul = staticmethod(np.matmul)

    @staticmethod
    def gelu(x, approximate):
        if approximate == "tanh":
            return x * scipy.special.expit(2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))
        return x * scipy.special.ndtr(x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_computes_phi_itself_after_an_accelerated_forward(approximate):
    x = np.random.default_rng(2).standard_normal(200)  # float64: the gradient is exact
    ours = mt.tensor(x, requires_grad=True)
    with mt.use_backend(ForwardOnly()):
        y = mt.nn.functional.gelu(ours, approximate=approximate)
    assert list(y.grad_fn.saved) == ["x"]
    with mt.use_backend("numpy"):
        y.sum().backward()
        by_x_alone = mt.testing.op_backward(activations.GELU, np.ones_like(x), (x,), approximate=approximate)
    np.testing.assert_array_equal(by_x_alone, ours.grad)  # (x,): what op_backward's callers pass
    theirs = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.gelu(theirs, approximate=approximate).sum().backward()
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("layout", ["transposed", "strided", "empty", "one element"])
def test_float32_phi_is_the_same_in_any_layout(layout):
    base = np.random.default_rng(3).standard_normal((40, 30)).astype(np.float32) * 3
    x = {"transposed": base.T, "strided": base[::3, ::-2], "empty": base[:0], "one element": base[:1, :1]}[layout]
    cdf = activations.normal_cdf(x)
    assert cdf.shape == x.shape and cdf.dtype == np.float32
    np.testing.assert_array_equal(cdf, activations.normal_cdf(np.ascontiguousarray(x)))
    np.testing.assert_allclose(cdf, scipy.special.ndtr(x.astype(np.float64)), rtol=0, atol=2.3e-7)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_gelu_of_other_dtypes_keeps_scipys_erf(dtype):
    x = mt.tensor(np.linspace(-6, 6, 101).astype(dtype), requires_grad=True)
    with mt.use_backend("numpy"):
        y = mt.nn.functional.gelu(x)
        y.sum().backward()
    exact = x.data.astype(np.float64) * scipy.special.ndtr(x.data.astype(np.float64))
    assert y.dtype == dtype and x.grad.dtype == dtype
    np.testing.assert_allclose(y.data, exact, rtol=1e-3 if dtype == np.float16 else 1e-14, atol=1e-3 if dtype == np.float16 else 1e-15)


def test_float32_gelu_is_within_two_millionths_relative_of_the_exact_value_everywhere():
    """Near the cut to ndtr the fit's absolute error is the largest part of Phi: a blind fuzzer found
    2e-5 relative at x = -2.48 with the cut at -2.5 (PyTorch's worst there is 5e-6)."""
    x = np.linspace(-8, 8, 400_001).astype(np.float32)
    y = F.gelu(mt.tensor(x)).data.astype(np.float64)
    exact = x.astype(np.float64) * scipy.special.ndtr(x.astype(np.float64))
    nonzero = exact != 0
    relative = np.abs(y - exact)[nonzero] / np.abs(exact[nonzero])
    assert relative.max() < 2e-6, f"{relative.max():.2e} relative at x = {x[nonzero][relative.argmax()]}"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_tanh_gelu_gradient_where_x_squared_overflows_is_pytorchs(dtype):
    """float16 is computed in float32, as PyTorch does: its x * x overflowed at |x| = 256 and gave NaN
    where PyTorch gives the derivative's limits (1, 0). Past sqrt(max) of float32 and float64, both give NaN."""
    values = np.array([800.0, -800.0, 1000.0, -3.0, 0.5], dtype=dtype)
    if dtype != np.float16:
        values[:3] *= 1e17 if dtype == np.float32 else 1e153  # past sqrt(max)
    x = mt.tensor(values, requires_grad=True)
    F.gelu(x, approximate="tanh").sum().backward()
    theirs = torch.tensor(values, requires_grad=True)
    torch.nn.functional.gelu(theirs, approximate="tanh").sum().backward()
    if dtype == np.float16:
        np.testing.assert_array_equal(x.grad[:3], [1.0, 0.0, 1.0])
    np.testing.assert_allclose(x.grad.astype(np.float64), theirs.grad.numpy().astype(np.float64), rtol=2e-3)
