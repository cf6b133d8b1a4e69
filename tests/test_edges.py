"""Gradients at the edges: complex and integer tensors that must not require grad, a variance
with no degrees of freedom left, and cross-entropy with every target ignored or a class masked
out with a -inf logit. Each is compared with PyTorch (and NumPy) on the same input."""

import numpy as np
import pytest
import torch

import minitensor as mt
import minitensor.nn.functional as F

# ----------------------------------------------------------------------------
# Complex and integer tensors cannot require grad, however asked
# ----------------------------------------------------------------------------


def test_complex_tensors_cannot_require_grad_at_creation():
    with pytest.raises(TypeError, match=r"complex tensors cannot require gradients .* complex128"):
        mt.tensor(np.array([1 + 2j]), requires_grad=True)


@pytest.mark.parametrize("how", ["setter", "requires_grad_"])
def test_complex_tensors_cannot_be_made_to_require_grad(how):
    z = mt.tensor(np.array([1 + 2j]))
    with pytest.raises(TypeError, match="complex tensors cannot require gradients"):
        if how == "setter":
            z.requires_grad = True
        else:
            z.requires_grad_()
    assert not z.requires_grad


@pytest.mark.parametrize("make", ["times a complex array", "cast"])
def test_an_op_that_turns_a_grad_tensor_complex_is_refused(make):
    """(x * 1j).abs() gave wrong gradients; refuse the complex result while recording."""
    x = mt.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(TypeError, match=r"(Mul|Cast): the result is complex .* requires grad"):
        if make == "cast":
            x.to(np.complex128)
        else:
            x * np.array([1j, 2j])
    with mt.no_grad():  # without the graph a complex result is fine
        assert (x * np.array([1j, 2j])).dtype == np.complex128


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("how", ["setter", "requires_grad_"])
def test_integer_tensors_cannot_be_made_to_require_grad(dtype, how):
    x = mt.tensor(np.array([1, 0, 1], dtype=dtype))
    with pytest.raises(TypeError, match=f"only floating-point tensors can require gradients.*{np.dtype(dtype)}"):
        if how == "setter":
            x.requires_grad = True
        else:
            x.requires_grad_(True)
    assert not x.requires_grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype"):
        torch.tensor([1, 0, 1]).requires_grad = True  # PyTorch refuses it too


def test_the_requires_grad_setter_still_works_for_floats():
    x = mt.tensor(np.array([1.0, 2.0]))
    x.requires_grad = True
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, [2.0, 4.0])
    x.requires_grad = False
    assert not (x * x).requires_grad


# ----------------------------------------------------------------------------
# var with ddof >= n
# ----------------------------------------------------------------------------

VAR_CASES = [
    (np.array([1.0, 2.0, 4.0]), None, 3),
    (np.array([1.0, 2.0, 4.0]), None, 5),  # the example gave -1.0
    (np.array([[1.0, 2.0, 4.0], [0.5, 0.5, 3.0]]), 1, 3),
    (np.array([[1.0, 2.0, 4.0], [0.5, 0.5, 3.0]]), 0, 4),
    (np.array([2.0, 2.0]), None, 2),  # constant values: 0 / 0
]


@pytest.mark.parametrize("values, axis, ddof", VAR_CASES)
def test_var_without_degrees_of_freedom_is_inf_or_nan_as_numpy(values, axis, ddof):
    x = mt.tensor(values, requires_grad=True)
    v = x.var(axis=axis, ddof=ddof)
    with np.errstate(divide="ignore", invalid="ignore"), pytest.warns(RuntimeWarning):
        expected = np.var(values, axis=axis, ddof=ddof)
    np.testing.assert_array_equal(v.data, expected)  # inf, or nan where the values are constant
    with pytest.warns(UserWarning, match="degrees of freedom"):
        reference = torch.tensor(values).var(dim=axis, correction=ddof)
    np.testing.assert_array_equal(v.data, reference.numpy())
    v.sum().backward()
    assert not np.isfinite(x.grad).any(), x.grad  # never a finite number of the wrong sign


def test_var_with_degrees_of_freedom_left_is_unchanged():
    values = np.array([[1.0, 2.0, 4.0], [0.5, 0.5, 3.0]])
    x = mt.tensor(values, requires_grad=True)
    x.var(axis=1, ddof=2).sum().backward()
    t = torch.tensor(values, requires_grad=True)
    t.var(dim=1, correction=2).sum().backward()
    np.testing.assert_allclose(x.grad, t.grad.numpy())


# ----------------------------------------------------------------------------
# cross-entropy: every target ignored, and -inf logits (vocabulary masking)
# ----------------------------------------------------------------------------


def _both_cross_entropy(logits, target, **options):
    x = mt.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, mt.tensor(target), **options)
    loss.sum().backward()
    t = torch.tensor(logits, requires_grad=True)
    reference = torch.nn.functional.cross_entropy(t, torch.tensor(target), **options)
    reference.sum().backward()
    return loss.data, x.grad, reference.detach().numpy(), t.grad.numpy()


IGNORED_CASES = [
    (np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]), np.array([-100, -100]), {}),
    (np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]), np.array([-100, -100]), {"label_smoothing": 0.2}),
    (np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]), np.array([3, 3]), {"ignore_index": 3}),
    (np.arange(24.0).reshape(2, 3, 4) / 10, np.full((2, 4), -100), {}),
]


@pytest.mark.parametrize("logits, target, options", IGNORED_CASES)
def test_cross_entropy_with_every_target_ignored_matches_pytorch(logits, target, options):
    """The mean over no rows is nan, but no row moved it: zero gradient (it was nan everywhere)."""
    loss, grad, reference_loss, reference_grad = _both_cross_entropy(logits, target, **options)
    assert np.isnan(loss) and np.isnan(reference_loss)
    np.testing.assert_array_equal(grad, np.zeros_like(logits))
    np.testing.assert_array_equal(grad, reference_grad)


NINF = -np.inf
MASKED_CASES = [
    (np.array([[0.0, NINF, 1.0], [2.0, 0.5, NINF]]), np.array([2, 0]), {}),
    (np.array([[0.0, NINF, 1.0], [2.0, 0.5, NINF]]), np.array([2, 0]), {"reduction": "sum"}),
    (np.array([[0.0, NINF, 1.0], [2.0, 0.5, NINF]]), np.array([2, -100]), {"reduction": "none"}),
    (np.array([[0.0, NINF, 1.0], [2.0, 0.5, NINF]]), np.array([2, 0]), {"label_smoothing": 0.1}),  # inf
    (np.array([[0.0, NINF, 1.0], [2.0, 0.5, NINF]]), np.array([1, 0]), {}),  # the target masked: inf
    (np.array([[0.0, NINF, 1.0], [NINF, NINF, NINF]]), np.array([2, -100]), {}),  # an ignored row of -inf
    (np.array([0.0, NINF, 1.0, 3.0]), np.array(3), {}),
    (np.array([[[0.0, 1.0], [NINF, 0.5], [1.0, NINF]]]), np.array([[2, 0]]), {}),  # (N, C, d)
]


@pytest.mark.parametrize("logits, target, options", MASKED_CASES)
def test_cross_entropy_with_a_minus_inf_logit_matches_pytorch(logits, target, options):
    loss, grad, reference_loss, reference_grad = _both_cross_entropy(logits, target, **options)
    np.testing.assert_allclose(loss, reference_loss, rtol=1e-12)  # (equal_nan, inf == inf)
    np.testing.assert_allclose(grad, reference_grad, rtol=1e-12, atol=1e-15)


def test_vocabulary_masking_gives_a_finite_loss_and_gradient():
    logits = np.array([[0.0, NINF, 1.0], [2.0, 0.5, NINF]])
    loss, grad, _, _ = _both_cross_entropy(logits, np.array([2, 0]))
    assert np.isfinite(loss) and np.isfinite(grad).all()
    np.testing.assert_array_equal(grad[logits == NINF], 0.0)
