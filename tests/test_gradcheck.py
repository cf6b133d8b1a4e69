"""The checkers are tested too: a wrong backward must fail, and say where."""

import numpy as np
import pytest
from wrong_ops import WrongExp

import minitensor as mt
from minitensor.testing import assert_matches_torch


class WrongElement(mt.Function):
    """Identity whose backward is wrong in exactly one element, [1, 2]."""

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        grad = grad.copy()
        grad[1, 2] *= 1.5
        return grad


class ForgetsBroadcast(mt.Function):
    """a * b whose backward for b forgets a factor: wrong only for the second input."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad


def test_gradcheck_passes_a_correct_function():
    x = mt.randn(3, 4, requires_grad=True)
    assert mt.gradcheck(lambda x: (x.exp() * x).sum(axis=1), x)


def test_gradcheck_catches_a_wrong_backward_and_reports_it():
    x = mt.tensor(np.linspace(-1, 1, 6), requires_grad=True)
    with pytest.raises(mt.GradcheckError) as info:
        mt.gradcheck(lambda x: WrongExp.apply(x), x)
    message = str(info.value)
    assert "input 0" in message and "shape (6,)" in message
    assert "analytic" in message and "numeric" in message
    assert "absolute error" in message and "relative error" in message
    assert "WrongExp" in message


def test_gradcheck_names_the_worst_element():
    x = mt.randn(3, 4, requires_grad=True)
    with pytest.raises(mt.GradcheckError, match=r"d output\[1, 2\] / d input\[1, 2\]"):
        mt.gradcheck(lambda x: WrongElement.apply(x), x)


def test_gradcheck_names_the_wrong_input():
    a, b = mt.randn(3, requires_grad=True), mt.randn(3, requires_grad=True)
    with pytest.raises(mt.GradcheckError, match=r"failed for input 1 "):
        mt.gradcheck(lambda a, b: ForgetsBroadcast.apply(a, b), a, b)


def test_gradcheck_on_large_inputs_uses_projections_and_still_catches_errors():
    x = mt.randn(40, 50, requires_grad=True)  # 2,000 x 2,000 Jacobian: too big to build
    assert mt.gradcheck(lambda x: x.softmax(axis=-1), x)
    with pytest.raises(mt.GradcheckError, match=r"u a random direction"):
        mt.gradcheck(lambda x: WrongElement.apply(x), x, max_checked=2000)


def test_gradcheck_works_in_float64_even_for_float32_inputs():
    x = mt.randn(5, dtype=np.float32, requires_grad=True)
    assert mt.gradcheck(lambda x: (x * x).exp(), x)


def test_gradcheck_needs_an_input_that_requires_grad():
    with pytest.raises(ValueError, match="no input requires grad"):
        mt.gradcheck(lambda x: x * 2, mt.randn(3))


def test_assert_matches_torch_catches_a_wrong_backward():
    import torch

    x = np.linspace(-1, 1, 5)
    with pytest.raises(AssertionError, match="gradients of input 0 differ"):
        assert_matches_torch(lambda t: WrongExp.apply(t), torch.exp, x)


def test_assert_matches_torch_catches_a_wrong_forward():
    import torch

    with pytest.raises(AssertionError, match="outputs differ"):
        assert_matches_torch(lambda t: t.exp(), lambda t: torch.exp(t) + 1e-3, np.ones(3))


# ---------------------------------------------------------------------------
# The tolerance test itself, and the central difference (issue 47)
# ---------------------------------------------------------------------------


def scaled_identity(factor):
    """y = x, whose backward returns factor * grad: wrong by exactly factor - 1, relative."""

    class Scaled(mt.Function):
        @staticmethod
        def forward(ctx, x):
            return x.copy()

        @staticmethod
        def backward(ctx, grad):
            return grad * factor

    return Scaled


def test_a_nan_finite_difference_fails():
    """At t = 1e-7, t - eps is negative: sqrt gives NaN there and the numeric derivative is NaN.
    The analytic one (1) is right, but a NaN comparison must fail, never pass (written as
    err > tol, NaN > tol is False and the element would pass)."""
    t = mt.tensor(np.array([1e-7, 1.0]), requires_grad=True)
    with np.errstate(invalid="ignore"), pytest.raises(mt.GradcheckError) as info:
        mt.gradcheck(lambda t: t.sqrt() * t.sqrt(), t)
    message = str(info.value)
    assert "d output[0] / d input[0]" in message
    assert "numeric (finite difference): nan" in message


def test_the_tolerance_is_measured_against_the_numeric_derivative():
    """An element passes when |analytic - numeric| <= atol + rtol |numeric|. With numeric = 1
    (the central difference of y = x, exact to ~1e-10), atol = 1e-5 and rtol = 1e-3, an analytic
    1 + d passes for d <= 1.01e-3; measured against |analytic| instead it would pass for
    d <= 1.0110e-3. d = 1.0105e-3 lies between the two (5e-7 from each, far beyond the
    difference's rounding) and must be refused; d = 1.0095e-3 must pass."""
    x = mt.tensor(np.array([0.3, -1.7, 2.0]), requires_grad=True)
    with pytest.raises(mt.GradcheckError, match=r"relative error"):
        mt.gradcheck(scaled_identity(1 + 1.0105e-3).apply, x, atol=1e-5, rtol=1e-3)
    assert mt.gradcheck(scaled_identity(1 + 1.0095e-3).apply, x, atol=1e-5, rtol=1e-3)


def test_the_central_difference_puts_x_back_bit_for_bit():
    """_central_difference moves one element by +eps and -eps; x must be as it was afterwards, to
    the bit (x + eps - eps is not x in floating point: the original value must be written back)."""
    from minitensor.gradcheck import _central_difference

    values = np.array([0.1, 1 / 3, -2.7, 1e-8, 12345.678])
    for j in range(values.size):
        x = mt.tensor(values.copy())
        seen = []

        def evaluate():
            seen.append(x.data.copy())
            return x.data ** 2

        estimate = _central_difference(x, j, evaluate, 1e-6)
        assert x.data.tobytes() == values.tobytes(), f"element {j} was not put back"
        assert seen[0][j] == values[j] + 1e-6 and seen[1][j] == values[j] - 1e-6  # it did move x
        assert estimate[j] == pytest.approx(2 * values[j], rel=1e-5, abs=1e-8)  # d x_j^2 / d x_j


def test_gradcheck_leaves_its_inputs_and_its_own_copies_as_they_were():
    """Every difference is taken around the same point: after one column's estimate, the next
    column's sees x unchanged (else the Jacobian of a nonlinear f is measured at a drifting x)."""
    data = np.array([0.5, -1.25, 2.0])
    x = mt.tensor(data.copy(), requires_grad=True)
    seen = []

    def f(t):
        seen.append(t.data.copy())
        return (t * t * t).sum()

    assert mt.gradcheck(f, x)
    assert x.data.tobytes() == data.tobytes()
    unmoved = [v for v in seen if np.array_equal(v, data)]
    moved = [v for v in seen if not np.array_equal(v, data)]
    assert unmoved and moved
    for v in moved:  # each evaluation moves exactly one element away from the original point
        assert np.count_nonzero(v != data) == 1, v
