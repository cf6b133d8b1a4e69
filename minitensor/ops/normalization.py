"""Layer norm as one op, its forward and its hand-derived backward side by side.

    LN(x) = (x - mean) / sqrt(var + eps) * gain + bias      over the last axis,

with the *biased* variance and eps *inside* the square root, as torch.nn.LayerNorm. mt.nn.LayerNorm,
mt.nn.functional.layer_norm and models/layernorm.py (which re-exports this op under its old path) are
built on it; mt.nn.layer_norm_composed writes the same function with primitive ops, the reference
this op is tested against.
"""

import numpy as np

from .. import backends
from ..autograd import Function
from ..backends.conventions import array_module, common_dtype


class LayerNormFunction(Function):
    """y = (x - mean) * rstd * weight + bias,   rstd = 1 / sqrt(var + eps),   var biased.

    Forward saves x, weight, and per row the mean and rstd (x's shape with the last axis of
    size 1): all backward needs. Backward is the homework task layer_norm_backward.
    Mixed dtypes: x, weight and bias are cast to their common dtype first (common_dtype), on
    every backend. The statistics are computed in float64 and stored in that dtype: in float32
    the squares of values past ~1e19 overflow, and the fused kernels accumulate in float64.
    A row whose variance overflows float64 (|x| past ~1e154) gives NaN, as PyTorch's, rather
    than the bias (1 / sqrt(inf) = 0 would scale every entry to 0 silently)."""

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, eps=1e-5):
        if x.ndim == 0:
            raise ValueError("layer_norm: the input is 0-d; it normalises over the last axis, which it lacks")
        for role, array in (("weight", weight), ("bias", bias)):
            if array is not None and array.shape != x.shape[-1:]:
                raise ValueError(
                    f"layer_norm: {role} has shape {array.shape}; it must be the input's last axis, "
                    f"{x.shape[-1:]} (input shape {x.shape})"
                )
        fast = backends.accelerator_for("layer_norm", x, weight, bias)  # None by default: the lines below run
        if fast is not None:
            y, mean, rstd = fast(x, weight, bias, eps)
        else:
            dtype = common_dtype(x, weight, bias)
            x64, weight64, bias64 = (None if a is None else a.astype(np.float64) for a in (x, weight, bias))
            mean = x64.mean(axis=-1, keepdims=True)  # (..., 1)
            # x64 is our own float64 copy (astype copies), so each step below works on it in place:
            # it is the one array as large as the input here.
            centered = x64
            centered -= mean
            var = (centered * centered).mean(axis=-1, keepdims=True)  # biased: divided by d
            rstd = 1 / array_module(x).sqrt(var + eps)
            y = centered
            y *= rstd  # x_hat
            if weight64 is not None:
                y *= weight64
            if bias64 is not None:
                y += bias64
            y, mean, rstd = y.astype(dtype, copy=False), mean.astype(dtype), rstd.astype(dtype)
        overflowed = rstd == 0  # var + eps = inf: only an overflow makes rstd 0
        if overflowed.any():
            rstd = np.where(overflowed, np.nan, rstd).astype(rstd.dtype)
            y = np.where(overflowed, np.nan, y).astype(y.dtype)
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION layer_norm_backward
        """dL/dx, dL/dweight, dL/dbias, given grad = dL/dy and what forward saved.

        Write x_hat = (x - mean) * rstd and g = grad * weight. Over a row of d numbers,
        d mean / dx_j = 1/d and d var / dx_j = 2 (x_j - mean) / d, so
            d x_hat_i / d x_j = rstd (delta_ij - 1/d - x_hat_i x_hat_j / d).
        Summing g_i times that over i:
            dL/dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))      (means over the row),
            dL/dweight = sum over rows of grad * x_hat,   dL/dbias = sum over rows of grad."""
        x, weight, mean, rstd = ctx.saved_tensors
        fast = backends.accelerator_for("layer_norm_backward", grad, x, weight)  # None by default
        if fast is not None:
            dx, dweight, dbias = fast(grad, x, weight, mean, rstd)
            return dx if weight is None else (dx, dweight, dbias)
        dtype = common_dtype(x, weight, mean)
        x, weight, dy, mean, rstd = (None if a is None else a.astype(np.float64) for a in (x, weight, grad, mean, rstd))
        x_hat = x  # x is our own float64 copy (astype copies): x_hat = (x - mean) * rstd in place
        x_hat -= mean
        x_hat *= rstd
        g = dy if weight is None else dy * weight
        dx = x_hat * -(g * x_hat).mean(axis=-1, keepdims=True)  # the formula above, term by term,
        dx += g  # in place, as the arrays are as large as x
        dx -= g.mean(axis=-1, keepdims=True)
        dx *= rstd
        dx = dx.astype(dtype, copy=False)
        if weight is None:
            return dx
        batch_axes = tuple(range(x.ndim - 1))
        return dx, (dy * x_hat).sum(axis=batch_axes).astype(dtype), dy.sum(axis=batch_axes).astype(dtype)
        # END SOLUTION
