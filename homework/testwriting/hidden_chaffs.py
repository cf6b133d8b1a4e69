"""Hidden chaffs: the buggy implementations that count for the grade and that students never see.
Grader side only: `strip` leaves this file out of the student copy (strip.NOT_IN_STUDENT_COPY).
Each has `survives`: the inputs that cannot tell it from a correct op, each set a combination of
catalogue.CONDITIONS (all of them together hide it)."""

import numpy as np

from .wheats import MatMulPlain, SoftmaxShifted, LayerNormFused, matmul_gradients, swap_last_axes


class MatMulUpstreamTransposed:
    """dA = grad^T B^T and dB = A^T grad^T: the transposes put on the upstream gradient."""

    op = "matmul"
    survives = ({"ones_upstream", "square"},)
    forward = MatMulPlain.forward

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return matmul_gradients(a, b, swap_last_axes(grad) if grad.ndim >= 2 else grad, ctx.needs_input_grad, np.matmul)


class MatMulUpstreamIgnored:
    op = "matmul"
    survives = ({"ones_upstream"},)
    forward = MatMulPlain.forward

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return matmul_gradients(a, b, np.ones_like(grad), ctx.needs_input_grad, np.matmul)


class MatMulRightOnlyOnFirstCall:
    """Keeps B from the first call (a 'cache' of the weight) and uses it in every later backward."""

    op = "matmul"
    survives = ({"one_call"},)
    forward = MatMulPlain.forward

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        kept = ctx.memory.setdefault(("b", b.shape), b.copy())
        return matmul_gradients(a, kept, grad, ctx.needs_input_grad, np.matmul)


class SoftmaxNoSubtraction:
    """dx = y * grad: the sum over the row left out."""

    op = "softmax"
    survives = ()
    forward = SoftmaxShifted.forward

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * grad


class SoftmaxUpstreamIgnored:
    op = "softmax"
    survives = ({"ones_upstream"},)
    forward = SoftmaxShifted.forward

    @staticmethod
    def backward(ctx, grad):
        return SoftmaxShifted.backward(ctx, np.ones_like(grad))


class SoftmaxDtypeLost:
    op = "softmax"
    survives = ({"float64"},)

    @staticmethod
    def forward(ctx, x, axis=-1, mask=None):
        return SoftmaxShifted.forward(ctx, x.astype(np.float64), axis, mask)

    backward = SoftmaxShifted.backward


class LayerNormNoMean:
    """dx without the term that comes from the mean depending on every x of the row."""

    op = "layer_norm"
    survives = ()
    forward = LayerNormFused.forward

    @staticmethod
    def backward(ctx, grad):
        x_hat, rstd, weight = ctx.saved_tensors
        g = grad if weight is None else grad * weight
        dx = rstd * (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
        if weight is None:
            return dx
        rows = tuple(range(grad.ndim - 1))
        return dx, (grad * x_hat).sum(axis=rows), grad.sum(axis=rows)


class LayerNormWeightGradWithoutUpstream:
    """dweight = sum of x_hat over the rows: the upstream gradient left out of the weight's gradient."""

    op = "layer_norm"
    survives = ({"ones_upstream"},)
    forward = LayerNormFused.forward

    @staticmethod
    def backward(ctx, grad):
        result = LayerNormFused.backward(ctx, grad)
        if isinstance(result, tuple):
            x_hat = ctx.saved_tensors[0]
            rows = tuple(range(grad.ndim - 1))
            return result[0], x_hat.sum(axis=rows).astype(grad.dtype), result[2]
        return result


class IndexUpstreamIgnored:
    op = "index"
    survives = ({"ones_upstream"},)

    @staticmethod
    def forward(ctx, x, index):
        ctx.index, ctx.shape = index, x.shape
        return np.array(x[index])

    @staticmethod
    def backward(ctx, grad):
        grad_x = np.zeros(ctx.shape, dtype=grad.dtype)
        np.add.at(grad_x, ctx.index, np.ones_like(grad))
        return grad_x


class CausalMaskOffByOne:
    """Lets each query see one key past itself."""

    op = "causal_mask"
    survives = ({"T=1"},)

    @staticmethod
    def call(ctx, T, S=None):
        S = T if S is None else S
        return np.triu(np.ones((T, S), dtype=bool), k=S - T + 2)


class CausalMaskIgnoresS:
    """Builds the (T, T) mask of training whatever S is (the queries of a KV cache misplaced)."""

    op = "causal_mask"
    survives = ({"square"},)

    @staticmethod
    def call(ctx, T, S=None):
        S = T if S is None else S
        return np.triu(np.ones((T, S), dtype=bool), k=1)


HIDDEN_CHAFFS = [MatMulUpstreamTransposed, MatMulUpstreamIgnored, MatMulRightOnlyOnFirstCall, SoftmaxNoSubtraction,
                 SoftmaxUpstreamIgnored, SoftmaxDtypeLost, LayerNormNoMean, LayerNormWeightGradWithoutUpstream,
                 IndexUpstreamIgnored, CausalMaskOffByOne, CausalMaskIgnoresS]
