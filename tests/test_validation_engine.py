"""Valid NumPy-style input works as in NumPy and PyTorch, and gradcheck refuses a step that
cannot measure a derivative (issue 15, section 6)."""

import numpy as np
import pytest
import torch

import minitensor as mt


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(eps=0), r"gradcheck: eps is the finite-difference step and must be a positive number, got eps=0"),
        (dict(eps=-1e-6), r"must be a positive number, got eps=-1e-06"),
        (dict(eps=float("nan")), r"must be a positive number, got eps=nan"),
        (dict(eps="1e-6"), r"must be a positive number, got eps='1e-6'"),
        (dict(atol=-1e-5), r"gradcheck: atol must be a number >= 0, got atol=-1e-05"),
        (dict(rtol=-1e-3), r"gradcheck: rtol must be a number >= 0, got rtol=-0.001"),
    ],
)
def test_gradcheck_refuses_a_bad_step_or_tolerance_instead_of_reporting_a_wrong_gradient(settings, message):
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(ValueError, match=message):
        mt.gradcheck(lambda t: (t * t).sum(), x, **settings)


def test_gradcheck_with_zero_tolerances_still_runs():
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    assert mt.gradcheck(lambda t: t * 2.0, x, eps=0.5, atol=0, rtol=1e-12)  # exact for a linear map


@pytest.mark.parametrize("index", [[], [[]]])
def test_an_empty_list_index_selects_nothing_as_in_numpy(index):
    values = np.arange(12.0).reshape(3, 4)
    x = mt.tensor(values, requires_grad=True)
    y = x[index]
    assert y.shape == values[index].shape and y.dtype == values.dtype
    y.sum().backward()
    t = torch.tensor(values, requires_grad=True)
    t[torch.tensor(index, dtype=torch.long)].sum().backward()
    np.testing.assert_array_equal(x.grad, t.grad.numpy())


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "var"])
@pytest.mark.parametrize("axis", [np.int64(1), np.int32(-1), (np.int64(0), 1)])
def test_a_numpy_integer_axis_works_as_in_numpy(op, axis):
    values = np.random.default_rng(0).standard_normal((3, 4))
    x = mt.tensor(values, requires_grad=True)
    y = getattr(x, op)(axis=axis)
    np.testing.assert_allclose(y.data, getattr(values, op)(axis=axis), rtol=1e-12)
    y.sum().backward()
    assert x.grad.shape == values.shape


def test_softmax_over_a_numpy_integer_axis():
    values = np.random.default_rng(1).standard_normal((3, 4))
    y = mt.tensor(values).softmax(axis=np.int64(0))
    np.testing.assert_allclose(y.data, torch.tensor(values).softmax(dim=0).numpy(), rtol=1e-12)


@pytest.mark.parametrize("axis", [True, np.bool_(True), 1.0])
def test_an_axis_that_is_not_an_integer_is_still_refused(axis):
    with pytest.raises(TypeError, match="sum: axis must be an int or a tuple of ints"):
        mt.randn(3, 4).sum(axis=axis)
