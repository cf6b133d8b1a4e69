"""Bad input gets an error that names the op and the shapes or values, before anything changes."""

import numpy as np
import pytest

import minitensor as mt
from minitensor import F


def test_matmul_names_both_shapes():
    a, b = mt.randn(2, 3), mt.randn(4, 5)
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) are not aligned.*\(3\).*\(4\)"):
        a @ b


def test_matmul_batch_axes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"matmul: the batch axes of shapes \(2, 3, 4\) and \(5, 4, 1\)"):
        mt.randn(2, 3, 4) @ mt.randn(5, 4, 1)


def test_matmul_of_a_scalar():
    with pytest.raises(ValueError, match=r"matmul: both operands need at least one axis.*\(\) and \(3,\)"):
        mt.tensor(2.0) @ mt.randn(3)


@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b, lambda a, b: a / b])
def test_broadcast_failure_names_both_shapes(op):
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4,\) do not broadcast together"):
        op(mt.randn(2, 3), mt.randn(4))


def test_broadcast_failure_names_the_op():
    with pytest.raises(ValueError, match=r"^Mul: shapes"):
        mt.randn(2, 3) * mt.randn(4)


def test_backward_on_a_non_scalar_needs_a_gradient():
    y = mt.randn(2, 3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"backward\(\) without a gradient needs a scalar.*shape \(2, 3\)"):
        y.backward()


def test_backward_gradient_of_the_wrong_shape():
    y = mt.randn(2, 3, requires_grad=True) * 2
    with pytest.raises(ValueError, match=r"grad has shape \(3,\) but the tensor has shape \(2, 3\)"):
        y.backward(np.ones(3))


def test_backward_on_a_tensor_that_needs_no_grad():
    with pytest.raises(RuntimeError, match=r"does not require grad"):
        mt.randn(3).sum().backward()


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_over_a_missing_axis_names_the_axis(op):
    with pytest.raises(ValueError, match=rf"{op}: axis 2 is out of range for a tensor of shape \(2, 3\)"):
        getattr(mt.randn(2, 3), op)(axis=2)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "var"])
def test_reduction_over_a_missing_axis(op):
    with pytest.raises(ValueError, match=rf"{op}: axis -3 is out of range for a tensor of shape \(2, 3\)"):
        getattr(mt.randn(2, 3), op)(axis=-3)


def test_max_over_an_empty_axis():
    with pytest.raises(ValueError, match=r"max: the maximum over an empty axis is undefined \(shape \(2, 0\)"):
        mt.zeros(2, 0).max(axis=1)


@pytest.mark.parametrize("make", [lambda: mt.tensor([1, 2], requires_grad=True), lambda: mt.zeros(2, dtype=np.int32, requires_grad=True)])
def test_integer_tensors_cannot_require_grad(make):
    with pytest.raises(TypeError, match=r"only floating-point tensors can require gradients.*dtype int"):
        make()


def test_reshape_to_an_impossible_shape():
    with pytest.raises(ValueError, match=r"reshape: cannot reshape a tensor of shape \(2, 3\) \(6 elements\) into shape \(4,\)"):
        mt.randn(2, 3).reshape(4)


def test_permute_with_a_bad_permutation():
    with pytest.raises(ValueError, match=r"permute: axes \(0, 0\) are not a permutation"):
        mt.randn(2, 3).permute(0, 0)


def test_expand_to_an_incompatible_shape():
    with pytest.raises(ValueError, match=r"expand: a tensor of shape \(3,\) cannot be broadcast to shape \(2, 4\)"):
        mt.randn(3).expand(2, 4)


def test_cat_with_mismatched_shapes():
    with pytest.raises(ValueError, match=r"cat: shapes \[\(2, 3\), \(2, 4\)\] differ outside axis 0"):
        mt.cat([mt.randn(2, 3), mt.randn(2, 4)], axis=0)


def test_stack_with_mismatched_shapes():
    with pytest.raises(ValueError, match=r"stack: all tensors must have the same shape"):
        mt.stack([mt.randn(2), mt.randn(3)])


def test_index_out_of_range():
    with pytest.raises(IndexError, match=r"index: .*tensor of shape \(3,\)"):
        mt.randn(3)[5]


def test_masked_fill_with_a_mask_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"masked_fill: a mask of shape \(3, 3\) does not broadcast to the tensor's shape \(2, 4\)"):
        mt.randn(2, 4).masked_fill(np.zeros((3, 3), dtype=bool), 0.0)


def test_masked_fill_with_a_float_mask():
    with pytest.raises(TypeError, match=r"masked_fill: the mask must be boolean"):
        mt.randn(2).masked_fill(np.zeros(2), 0.0)


def test_cross_entropy_target_out_of_range():
    with pytest.raises(IndexError, match=r"cross_entropy: target 7 is out of range for 5 classes"):
        F.cross_entropy(mt.randn(2, 5), np.array([1, 7]))


def test_cross_entropy_target_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"logits of shape \(2, 5\).*targets of shape \(2,\), got targets of shape \(3,\)"):
        F.cross_entropy(mt.randn(2, 5), np.array([1, 2, 3]))


def test_mse_loss_shape_mismatch():
    with pytest.raises(ValueError, match=r"mse_loss: prediction of shape \(3,\) and target of shape \(4,\)"):
        F.mse_loss(mt.randn(3), mt.randn(4))


def test_embedding_index_out_of_range():
    with pytest.raises(IndexError, match=r"embedding: index 10 is out of range for an embedding of 10 rows"):
        F.embedding(np.array([1, 10]), mt.randn(10, 4))


def test_setitem_on_a_tensor_in_the_graph():
    x = mt.randn(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match=r"t\[index\] = value .* not differentiable"):
        x[0] = 1.0
