"""The test ops whose backward is wrong on purpose (and the right Cube they are held against),
written once: gradcheck, find_wrong_op, detect_anomaly, the backward page's check mode and the
engine's own tests each need one. Each docstring says what is wrong."""

import numpy as np

import minitensor as mt


class Cube(mt.Function):
    """y = x**3, dy/dx = 3 x**2 (right)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


class WrongCube(mt.Function):
    """y = x**3, backward 2 x**2 (wrong)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x=x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x * x


class WrongSquare(mt.Function):
    """y = x**2, backward x (wrong)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x=x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x


class WrongDouble(mt.Function):
    """y = 2x, with a backward that returns 2.5 grad."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2.5 * grad


class WrongExp(mt.Function):
    """exp with a backward that is off by 1% (a typical slip)."""

    @staticmethod
    def forward(ctx, x):
        y = np.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * 1.01


class WrongTanh(mt.Function):
    """y = tanh(x), with a backward 1.5 times the right one."""

    @staticmethod
    def forward(ctx, x):
        y = np.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y) * 1.5  # wrong on purpose


class WrongSoftmax(mt.Function):
    """softmax over the last axis, with a backward that forgets the sum over the row (y * grad)."""

    @staticmethod
    def forward(ctx, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        y = e / e.sum(axis=-1, keepdims=True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * grad


class ScaleWithWrongWeightGrad(mt.Function):
    """y = x * w; its backward gets dL/dx right and dL/dw wrong (a factor 2 too big)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, 2 * grad * x
