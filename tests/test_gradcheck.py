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
