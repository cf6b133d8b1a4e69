"""Layer norm as one fused op (the backend's kernel), with a backward derived by hand.

    LN(x) = (x - mean) / sqrt(var + eps) * gain + bias      over the last axis,

with the *biased* variance and eps *inside* the square root, as torch.nn.LayerNorm. mt.nn.LayerNorm
and models/layernorm.py (which re-exports this op under its old path) are built on it.
"""

import numpy as np

from .. import backends
from ..autograd import Function


class LayerNormFunction(Function):
    """Layer norm as one op with a backward derived by hand (the backends' layer_norm_backward
    computes it: the homework task layer_norm_backward).

    A row whose variance overflows float64 (|x| past ~1e154) gives NaN, as PyTorch's, rather
    than the bias (1 / sqrt(inf) = 0 would scale every entry to 0 silently)."""

    # BEGIN SOLUTION layer_norm_backward
    # Write x_hat = (x - mu) * r with r = 1 / sqrt(var + eps), and g = dL/dy * gain.
    # Over a row of d numbers, d mu / dx_j = 1/d and d var / dx_j = 2 (x_j - mu) / d, so
    #     d x_hat_i / d x_j = r (delta_ij - 1/d - x_hat_i x_hat_j / d).
    # Summing g_i times that over i gives the formula the backends implement:
    #     dL/dx = r * (g - mean(g) - x_hat * mean(g * x_hat)),
    #     dL/dgain = sum over rows of dL/dy * x_hat,   dL/dbias = sum over rows of dL/dy.
    # END SOLUTION

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
        y, mean, rstd = backends.active().layer_norm(x, weight, bias, eps)
        overflowed = rstd == 0  # var + eps = inf: only an overflow makes rstd 0
        if overflowed.any():
            rstd = np.where(overflowed, np.nan, rstd).astype(rstd.dtype)
            y = np.where(overflowed, np.nan, y).astype(y.dtype)
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dweight, dbias = backends.active().layer_norm_backward(grad, x, weight, mean, rstd)
        return dx if weight is None else (dx, dweight, dbias)
