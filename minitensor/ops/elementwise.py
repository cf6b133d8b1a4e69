"""Elementwise ops: arithmetic with broadcasting, and the pointwise functions.

Each backward returns dL/d(input) with the *output's* (broadcast) shape; the
engine's `unbroadcast` sums it back to the input's shape. Notation: y is the
output, grad is dL/dy, and every product below is elementwise.
"""

import numpy as np

from ..autograd import Function
from .special import expit


class Add(Function):
    """y = a + b.   dL/da = grad,  dL/db = grad."""

    broadcasts = True

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Sub(Function):
    """y = a - b.   dL/da = grad,  dL/db = -grad."""

    broadcasts = True

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, grad):
        grad_b = -grad if ctx.needs_input_grad[1] else None
        return grad, grad_b


class Mul(Function):
    """y = a * b.   Backward: the homework task elementwise_backward."""

    broadcasts = True

    @staticmethod
    def forward(ctx, a, b):
        # Save only what backward will read (as PyTorch does), so that a tensor changed in place
        # after this is an error only if its values are needed. What no wanted gradient reads
        # is saved as None.
        needs_a, needs_b = ctx.needs_input_grad
        ctx.save_for_backward(a if needs_b else None, b if needs_a else None)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION elementwise_backward
        # dL/da = grad * b,  dL/db = grad * a.
        a, b = ctx.saved_tensors
        grad_a = grad * b if ctx.needs_input_grad[0] else None
        grad_b = grad * a if ctx.needs_input_grad[1] else None
        return grad_a, grad_b
        # END SOLUTION


class Div(Function):
    """y = a / b.   Backward: the homework task elementwise_backward."""

    broadcasts = True

    @staticmethod
    def forward(ctx, a, b):
        needs_a, needs_b = ctx.needs_input_grad
        ctx.save_for_backward(a if needs_b else None, b)  # a saved only when needed (see Mul)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION elementwise_backward
        # dL/da = grad / b,  dL/db = -grad * a / b**2, computed as -grad * (a / b) / b, as PyTorch:
        # a tiny a (a subnormal) times grad may round to 0 and give 0 / 0 = NaN where (a / b) / b is inf.
        a, b = ctx.saved_tensors
        grad_a = grad / b if ctx.needs_input_grad[0] else None
        grad_b = -grad * (a / b) / b if ctx.needs_input_grad[1] else None
        return grad_a, grad_b
        # END SOLUTION


class Neg(Function):
    """y = -x.   dL/dx = -grad."""

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Pow(Function):
    """y = a ** b.   dL/da = grad * b * a**(b - 1),  dL/db = grad * y * log(a).

    At the edges, PyTorch's values: where b == 0, dL/da = 0 (x**0 is the constant 1, even at
    x = 0, where a**(b - 1) is inf); where a == 0 and b >= 0, dL/db = 0 (the limit of y log a);
    where a == 0 and b < 0, y log a = inf * -inf = -inf.
    """

    broadcasts = True

    @staticmethod
    def forward(ctx, a, b):
        y = a**b
        ctx.save_for_backward(a, b, y if ctx.needs_input_grad[1] else None)  # only dL/db needs y (see Mul)
        return y

    @staticmethod
    def backward(ctx, grad):
        a, b, y = ctx.saved_tensors
        grad_a = grad_b = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if ctx.needs_input_grad[0]:
                grad_a = np.where(b == 0, 0, grad * b * a ** (b - 1))
            if ctx.needs_input_grad[1]:
                y_log_a = np.where((a == 0) & (b >= 0), 0, y * np.log(a))
                grad_b = grad * y_log_a
        return grad_a, grad_b


class Exp(Function):
    """y = exp(x).   Backward: the homework task elementwise_backward."""

    @staticmethod
    def forward(ctx, x):
        y = np.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION elementwise_backward
        # dL/dx = grad * y.
        (y,) = ctx.saved_tensors
        return grad * y
        # END SOLUTION


class Log(Function):
    """y = log(x).   dL/dx = grad / x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.log(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x


class Sqrt(Function):
    """y = sqrt(x).   dL/dx = grad / (2 y)."""

    @staticmethod
    def forward(ctx, x):
        y = np.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad / (2 * y)


class Tanh(Function):
    """y = tanh(x).   Backward: the homework task elementwise_backward."""

    @staticmethod
    def forward(ctx, x):
        y = np.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION elementwise_backward
        # dL/dx = grad * (1 - y**2).
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)
        # END SOLUTION


class Sigmoid(Function):
    """y = 1 / (1 + exp(-x)).   dL/dx = grad * y * (1 - y).

    Computed by scipy.special.expit, which never overflows (the formula above
    does: exp(-x) is inf for x < -710 in float64, -88 in float32).
    """

    @staticmethod
    def forward(ctx, x):
        y = expit(x).astype(x.dtype, copy=False)  # expit computes float16 in float32: keep x's dtype, as PyTorch
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


class Abs(Function):
    """y = |x|.   dL/dx = grad * sign(x), with sign(0) = 0 (PyTorch's choice)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.abs(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * np.sign(x)


class Clip(Function):
    """y = min(max(x, low), high).   dL/dx = grad where low <= x <= high, else 0.

    The bounds are inclusive, as in torch.clamp: at x == low the gradient passes.
    `low` or `high` may be None for a one-sided clip.
    """

    @staticmethod
    def forward(ctx, x, low=None, high=None):
        inside = np.ones(x.shape, dtype=bool)
        if low is not None:
            inside &= x >= low
        if high is not None:
            inside &= x <= high
        ctx.save_for_backward(inside)
        return np.clip(x, low, high)

    @staticmethod
    def backward(ctx, grad):
        (inside,) = ctx.saved_tensors
        return grad * inside


class Maximum(Function):
    """y = max(a, b) elementwise.   The gradient goes to the larger input; on a tie
    each input gets half (as torch.maximum), so the two halves still sum to grad."""

    broadcasts = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.maximum(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        share_a = (a > b) + 0.5 * (a == b)
        grad_a = grad * share_a if ctx.needs_input_grad[0] else None
        grad_b = grad * (1 - share_a) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Where(Function):
    """y = a where condition else b.   dL/da = grad where condition, dL/db = grad elsewhere."""

    @staticmethod
    def forward(ctx, a, b, condition):
        ctx.save_for_backward(condition)
        return np.where(condition, a, b)

    @staticmethod
    def backward(ctx, grad):
        (condition,) = ctx.saved_tensors
        grad_a = np.where(condition, grad, 0) if ctx.needs_input_grad[0] else None
        grad_b = np.where(condition, 0, grad) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class MaskedFill(Function):
    """y = value where mask else x (mask True marks a hidden position, as in the seeds).

    value is an input like x (a 0-d tensor, or anything that broadcasts to x's shape), so a
    value that requires grad gets one, as in PyTorch; y keeps x's dtype.
    dL/dx = grad where the mask is False; the filled positions get no gradient.
    dL/dvalue = grad where the mask is True (summed over the positions one value filled).
    """

    @staticmethod
    def forward(ctx, x, value, mask):
        ctx.save_for_backward(mask)
        return np.where(mask, value.astype(x.dtype, copy=False), x)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        grad_x = np.where(mask, 0, grad)
        grad_value = np.where(mask, grad, 0) if ctx.needs_input_grad[1] else None
        return grad_x, grad_value


class Cast(Function):
    """y = x converted to `dtype`.   dL/dx = grad converted back to x's dtype."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.input_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.astype(ctx.input_dtype)


class Clone(Function):
    """y = a copy of x, so that in-place changes of y leave x alone.   dL/dx = grad.

    The copy keeps x's memory layout (order="K": a transposed x gives a transposed copy), as
    torch's clone does, so a later reshape of y is a view or a copy exactly where it is for x."""

    @staticmethod
    def forward(ctx, x, order="K"):
        return x.copy(order=order)  # contiguous() asks for order="C"

    @staticmethod
    def backward(ctx, grad):
        return grad


class ToDevice(Function):
    """y = x copied to another array library: "numpy" (host memory) or "cupy" (the GPU).

    dL/dx = grad copied back to where x lived.
    """

    @staticmethod
    def forward(ctx, x, device):
        ctx.source = "numpy" if isinstance(x, np.ndarray) else "cupy"
        return move_to(x, device)

    @staticmethod
    def backward(ctx, grad):
        return move_to(grad, ctx.source)


def move_to(array, device):
    """array as an array of `device`'s library ("numpy" or "cupy"); the same array when it is one."""
    if device == "numpy":
        return array if isinstance(array, np.ndarray) else array.get()
    from .. import backends

    cupy = backends.load("cupy").xp  # says how to install CuPy when it is missing
    return cupy.asarray(array)
