"""Public chaffs: buggy implementations students practise on (`python -m homework
practice`), shipped in the student copy. Each is a mistake students make in a backward pass, on an
op whose derivative is no homework answer (Add, Index), with `survives` (the inputs that cannot
tell it from a correct op: each set a combination of catalogue.CONDITIONS) and `hint` (what the
grader says when a student's tests let it pass: the input that would have caught it, never the bug)."""

import numpy as np


class AddUpstreamIgnored:
    """The upstream gradient is not multiplied in: each input gets ones."""

    op = "add"
    survives = ({"ones_upstream"},)
    hint = ("an upstream gradient that is not all ones: call y.backward(dy) with a random dy of y's shape, "
            "or take a loss such as (y * w).sum() with random w")

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return np.ones_like(grad), np.ones_like(grad)


class AddNoUnbroadcast:
    """A broadcast operand's gradient is one slice of grad (its first row) instead of the sum over
    the axes broadcasting stretched."""

    op = "add"
    survives = ({"square"},)
    hint = ("operands of different shapes that broadcast, such as a (3, 4) plus a (4,), or a (3, 1) plus a "
            "(1, 4): check both gradients")

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return tuple(_first_slice(grad, shape) for shape in ctx.shapes)


def _first_slice(grad, shape):
    while grad.ndim > len(shape):
        grad = grad[0]
    picks = tuple(slice(0, 1) if size == 1 else slice(None) for size in shape)
    return grad[picks]


class AddDtypeLost:
    """Computes in float64 and hands float64 back for float32 inputs."""

    op = "add"
    survives = ({"float64"},)
    hint = "float32 inputs, with a check of the output's dtype (float32 in, float32 out, as NumPy and PyTorch)"

    @staticmethod
    def forward(ctx, a, b):
        return np.asarray(a, dtype=np.float64) + np.asarray(b, dtype=np.float64)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class AddRightOnlyOnFirstCall:
    """Keeps the first backward's gradient and hands it out again on every later call."""

    op = "add"
    survives = ({"one_call"}, {"ones_upstream"})
    hint = ("two backward passes in one test, with different upstream gradients (or a second graph built "
            "after the first): each must give its own gradients")

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        first = ctx.memory.setdefault(("first", grad.shape), grad.copy())
        return first, first


class IndexOverwrites:
    """Scatters with an assignment, so a position the index names twice keeps one gradient, not the sum."""

    op = "index"
    survives = ({"distinct_indices"},)
    hint = "an index that names one position twice, such as x[[0, 2, 0]]: both picks must reach x.grad"

    @staticmethod
    def forward(ctx, x, index):
        ctx.index, ctx.shape = index, x.shape
        return np.array(x[index])

    @staticmethod
    def backward(ctx, grad):
        grad_x = np.zeros(ctx.shape, dtype=grad.dtype)
        grad_x[ctx.index] = grad
        return grad_x


PUBLIC_CHAFFS = [AddUpstreamIgnored, AddNoUnbroadcast, AddDtypeLost, AddRightOnlyOnFirstCall, IndexOverwrites]
