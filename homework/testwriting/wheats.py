"""The correct implementations ("wheats") of the ops students write tests for, several per op,
each differing from the others as correct code may: float32 against float64 arithmetic, another
summation order, a fused against a composed path. A student's test that fails any of them, on any
seed, is wrong, and the file it is in earns nothing until it is fixed.

Grader side only: `strip` leaves this file out of the student copy (strip.NOT_IN_STUDENT_COPY),
because it states the answers of backward tasks. Each class is an op as oracle.py runs it:
`forward(ctx, *arrays, **options)` and `backward(ctx, grad)` on plain arrays (ctx.save_for_backward,
ctx.saved_tensors, ctx.needs_input_grad, as minitensor's Function), or `call(ctx, *args)` for a
plain function. The engine in the student's copy sums a gradient down to its input's shape and
casts it to its input's dtype after backward, as it does for every op."""

import numpy as np


def swap_last_axes(array):
    return np.swapaxes(array, -1, -2)


def _sum_to(grad, shape):
    """grad summed down to `shape`, one axis at a time from the last (another order than the engine's)."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis in reversed(range(grad.ndim)):
        if shape[axis] == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


# ----------------------------------------------------------------------------
# add: y = a + b, broadcasting
# ----------------------------------------------------------------------------


class AddPlain:
    op = "add"

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class AddSummedHere:
    op = "add"

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return b + a

    @staticmethod
    def backward(ctx, grad):
        return _sum_to(grad, ctx.shapes[0]), _sum_to(grad, ctx.shapes[1])


class AddInFloat64:
    op = "add"

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return (a.astype(np.float64) + b.astype(np.float64)).astype(np.result_type(a, b))

    @staticmethod
    def backward(ctx, grad):
        wide = grad.astype(np.float64)
        return _sum_to(wide, ctx.shapes[0]), _sum_to(wide, ctx.shapes[1])


# ----------------------------------------------------------------------------
# matmul: Y = A @ B, batched, 1-D operands as NumPy treats them
# ----------------------------------------------------------------------------


def matmul_gradients(a, b, grad, needs, product):
    """dA = grad B^T, dB = A^T grad on the operands made 2-D, with `product` doing the products."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if b.ndim == 1:
        grad = grad[..., None]
    if a.ndim == 1:
        grad = grad[..., None, :]
    grad_a = grad_b = None
    if needs[0]:
        grad_a = product(grad, swap_last_axes(b2))
        grad_a = grad_a[..., 0, :] if a.ndim == 1 else grad_a
    if needs[1]:
        grad_b = product(swap_last_axes(a2), grad)
        grad_b = grad_b[..., 0] if b.ndim == 1 else grad_b
    return grad_a, grad_b


def _check_matmul(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: a 0-d operand (shapes {a.shape} and {b.shape}); matmul needs 1-D or more")
    inner_a, inner_b = a.shape[-1], (b.shape[0] if b.ndim == 1 else b.shape[-2])
    if inner_a != inner_b:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match ({inner_a} != {inner_b})")


class MatMulPlain:
    op = "matmul"

    @staticmethod
    def forward(ctx, a, b):
        _check_matmul(a, b)
        ctx.save_for_backward(a, b)
        return np.matmul(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return matmul_gradients(a, b, grad, ctx.needs_input_grad, np.matmul)


class MatMulEinsumFloat64:
    op = "matmul"

    @staticmethod
    def _product(x, y):
        return np.einsum("...ij,...jk->...ik", x.astype(np.float64), y.astype(np.float64))

    @staticmethod
    def forward(ctx, a, b):
        _check_matmul(a, b)
        ctx.save_for_backward(a, b)
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.result_type(a, b))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return matmul_gradients(a, b, grad, ctx.needs_input_grad, MatMulEinsumFloat64._product)


class MatMulTransposed:
    """Each product taken as the transpose of the transposed product: another summation order."""

    op = "matmul"

    @staticmethod
    def _product(x, y):
        return swap_last_axes(np.matmul(swap_last_axes(y), swap_last_axes(x)))

    @staticmethod
    def forward(ctx, a, b):
        _check_matmul(a, b)
        ctx.save_for_backward(a, b)
        if a.ndim >= 2 and b.ndim >= 2:
            return MatMulTransposed._product(a, b)
        return np.matmul(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return matmul_gradients(a, b, grad, ctx.needs_input_grad, MatMulTransposed._product)


# ----------------------------------------------------------------------------
# softmax along an axis, with an optional boolean mask (True hides; a fully hidden row is zeros)
# ----------------------------------------------------------------------------


def _softmax_exp(x, axis, mask):
    hidden = np.zeros(x.shape, dtype=bool) if mask is None else np.broadcast_to(mask, x.shape)
    visible = np.where(hidden, -np.inf, x)
    top = np.max(visible, axis=axis, keepdims=True) if x.shape[axis] else np.zeros(())
    top = np.where(np.isfinite(top), top, 0)
    return np.where(hidden, 0, np.exp(visible - top))


class SoftmaxShifted:
    op = "softmax"

    @staticmethod
    def forward(ctx, x, axis=-1, mask=None):
        e = _softmax_exp(x, axis, mask)
        total = e.sum(axis=axis, keepdims=True)
        y = np.divide(e, total, out=np.zeros_like(e), where=total > 0).astype(x.dtype)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(axis=ctx.axis, keepdims=True))


class SoftmaxLogSumExpFloat64:
    op = "softmax"

    @staticmethod
    def forward(ctx, x, axis=-1, mask=None):
        wide = x.astype(np.float64)
        e = _softmax_exp(wide, axis, mask)
        total = e.sum(axis=axis, keepdims=True)
        log_total = np.log(np.where(total > 0, total, 1))
        shifted = np.where(e > 0, np.log(np.where(e > 0, e, 1)) - log_total, -np.inf)
        y = np.where(total > 0, np.exp(shifted), 0)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y.astype(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        wide = grad.astype(np.float64)
        return y * wide - y * (y * wide).sum(axis=ctx.axis, keepdims=True)


# ----------------------------------------------------------------------------
# layer norm over the last axis: (x - mean) / sqrt(var + eps) * weight + bias, biased variance
# ----------------------------------------------------------------------------


def _check_layer_norm(x, weight):
    if x.ndim == 0:
        raise ValueError("layer_norm: the input is 0-d; it normalises over the last axis, which it lacks")
    if weight is not None and weight.shape != x.shape[-1:]:
        raise ValueError(f"layer_norm: weight has shape {weight.shape}; it must be the input's last axis, "
                         f"{x.shape[-1:]} (input shape {x.shape})")


class LayerNormFused:
    op = "layer_norm"

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, eps=1e-5):
        _check_layer_norm(x, weight)
        mean = x.mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
        x_hat = (x - mean) * rstd
        ctx.save_for_backward(x_hat, rstd, weight)
        y = x_hat if weight is None else x_hat * weight + bias
        return y.astype(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        x_hat, rstd, weight = ctx.saved_tensors
        g = grad if weight is None else grad * weight
        dx = rstd * (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
        if weight is None:
            return dx
        rows = tuple(range(grad.ndim - 1))
        return dx, (grad * x_hat).sum(axis=rows), grad.sum(axis=rows)


class LayerNormComposedFloat64:
    """Backward through each step of forward in turn (centre, variance, scale), in float64."""

    op = "layer_norm"

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, eps=1e-5):
        _check_layer_norm(x, weight)
        wide = x.astype(np.float64)
        centred = wide - wide.mean(axis=-1, keepdims=True)
        var = (centred * centred).mean(axis=-1, keepdims=True)
        scale = (var + eps) ** -0.5
        x_hat = centred * scale
        ctx.save_for_backward(centred, var, scale, weight)
        ctx.eps = eps
        y = x_hat if weight is None else x_hat * weight + bias
        return y.astype(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        centred, var, scale, weight = ctx.saved_tensors
        d = centred.shape[-1]
        grad = grad.astype(np.float64)
        d_x_hat = grad if weight is None else grad * weight
        d_scale = (d_x_hat * centred).sum(axis=-1, keepdims=True)
        d_var = d_scale * -0.5 * (var + ctx.eps) ** -1.5
        d_centred = d_x_hat * scale + d_var * 2.0 * centred / d
        dx = d_centred - d_centred.mean(axis=-1, keepdims=True)
        if weight is None:
            return dx
        rows = tuple(range(grad.ndim - 1))
        return dx, (grad * centred * scale).sum(axis=rows), grad.sum(axis=rows)


# ----------------------------------------------------------------------------
# index: y = x[index], basic and advanced
# ----------------------------------------------------------------------------


class IndexAddAt:
    op = "index"

    @staticmethod
    def forward(ctx, x, index):
        ctx.index, ctx.shape = index, x.shape
        return np.array(x[index])

    @staticmethod
    def backward(ctx, grad):
        grad_x = np.zeros(ctx.shape, dtype=grad.dtype)
        np.add.at(grad_x, ctx.index, grad)
        return grad_x


class IndexBincount:
    """Each position's number, picked by the index, then the picks' gradients counted per position."""

    op = "index"

    @staticmethod
    def forward(ctx, x, index):
        ctx.index, ctx.shape = index, x.shape
        return np.array(x[index])

    @staticmethod
    def backward(ctx, grad):
        size = int(np.prod(ctx.shape))
        positions = np.arange(size).reshape(ctx.shape)[ctx.index]
        summed = np.bincount(np.ravel(positions), weights=np.ravel(grad).astype(np.float64), minlength=size)
        return summed.reshape(ctx.shape).astype(grad.dtype)


# ----------------------------------------------------------------------------
# causal_mask(T, S=None): (T, S) booleans, True where query i may not see key j; queries are the
# last T of S positions
# ----------------------------------------------------------------------------


class CausalMaskTriu:
    op = "causal_mask"

    @staticmethod
    def call(ctx, T, S=None):
        S = T if S is None else S
        return np.triu(np.ones((T, S), dtype=bool), k=S - T + 1)


class CausalMaskCompared:
    op = "causal_mask"

    @staticmethod
    def call(ctx, T, S=None):
        S = T if S is None else S
        return np.arange(S)[None, :] > np.arange(T)[:, None] + (S - T)


WHEATS = [AddPlain, AddSummedHere, AddInFloat64, MatMulPlain, MatMulEinsumFloat64, MatMulTransposed, SoftmaxShifted,
          SoftmaxLogSumExpFloat64, LayerNormFused, LayerNormComposedFloat64, IndexAddAt, IndexBincount,
          CausalMaskTriu, CausalMaskCompared]
