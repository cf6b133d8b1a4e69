"""Matrix multiplication, with NumPy's rules for batches and 1-D operands."""

import numpy as np

from .. import backends
from ..autograd import Function


def check_matmul_shapes(a_shape, b_shape):
    """Raise a ValueError naming both shapes when a @ b is undefined."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError(
            f"matmul: both operands need at least one axis, got shapes {a_shape} and {b_shape} "
            f"(use * to multiply by a scalar)"
        )
    inner_a = a_shape[-1]
    inner_b = b_shape[0] if len(b_shape) == 1 else b_shape[-2]
    if inner_a != inner_b:
        raise ValueError(
            f"matmul: shapes {a_shape} and {b_shape} are not aligned: the last axis of the "
            f"left operand ({inner_a}) must equal the "
            f"{'only' if len(b_shape) == 1 else 'second-to-last'} axis of the right operand ({inner_b})"
        )
    try:
        np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: the batch axes of shapes {a_shape} and {b_shape} do not broadcast "
            f"({a_shape[:-2]} against {b_shape[:-2]})"
        ) from None


def rows_times_matrix(matmul, a, b):
    """matmul(a, b), where a stack of rows times one matrix, (..., n, k) @ (k, m) as in every
    linear layer, goes to the BLAS as the one product (batch*n, k) @ (k, m). NumPy's matmul
    makes one BLAS call per batch entry instead, and each call wakes the BLAS threads again,
    which a busy machine turns into long waits. Same shape; each entry is the same sum, which
    the BLAS may add up in another order (a float rounding apart)."""
    if a.ndim > 2 and b.ndim == 2:
        rows = int(np.prod(a.shape[:-1]))  # batch * n (spelled out: -1 fails on empty arrays)
        return matmul(a.reshape(rows, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[-1],))
    return matmul(a, b)


class MatMul(Function):
    """Y = A @ B, batched over leading axes (which broadcast).

    A 1-D operand is treated as NumPy does: a left vector as a row (1, k), a
    right vector as a column (k, 1), and that axis is dropped from Y. Backward
    is the homework task matmul_backward; the engine sums over broadcast batches.
    """

    @staticmethod
    def forward(ctx, a, b):
        check_matmul_shapes(a.shape, b.shape)
        ctx.save_for_backward(a, b)
        return rows_times_matrix(backends.active().matmul, a, b)

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION matmul_backward
        # dL/dA = grad @ B^T,   dL/dB = A^T @ grad   (^T swaps the last two axes). A 1-D
        # operand: put the dropped axis back into grad, use the 2-D formulas, drop it again.
        a, b = ctx.saved_tensors
        a_is_vector, b_is_vector = a.ndim == 1, b.ndim == 1
        a2 = a[None, :] if a_is_vector else a  # (1, k) row
        b2 = b[:, None] if b_is_vector else b  # (k, 1) column
        if b_is_vector:
            grad = grad[..., None]  # (..., n, 1)
        if a_is_vector:
            grad = grad[..., None, :]  # (..., 1, m)
        matmul = backends.active().matmul
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = rows_times_matrix(matmul, grad, np.swapaxes(b2, -1, -2))  # (..., n, k)
            if a_is_vector:
                grad_a = grad_a[..., 0, :]  # (..., k)
        if ctx.needs_input_grad[1]:
            if b2.ndim == 2 and a2.ndim > 2:
                # A weight shared by a batch (x @ W): sum over the batch inside one product,
                # (k, batch*n) @ (batch*n, m), instead of making (batch, k, m) and summing it.
                rows = int(np.prod(a2.shape[:-1]))  # batch * n (spelled out: -1 fails on empty arrays)
                grad_b = matmul(a2.reshape(rows, a2.shape[-1]).T, grad.reshape(rows, grad.shape[-1]))
            else:
                grad_b = matmul(np.swapaxes(a2, -1, -2), grad)  # (..., k, m)
            if b_is_vector:
                grad_b = grad_b[..., 0]  # (..., k)
        return grad_a, grad_b
        # END SOLUTION
