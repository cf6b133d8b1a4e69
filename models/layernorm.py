"""Layer norm three ways, held against each other and against torch.nn.LayerNorm.

    LN(x) = (x - mean) / sqrt(var + eps) * gain + bias      over the last axis,

with the *biased* variance and eps *inside* the square root, as nn.LayerNorm.
(The Annotated Transformer divides by the unbiased std plus eps instead, which
is a different function; ours matches PyTorch.)
"""

import numpy as np

from minitensor import Function, backends, get_default_dtype, tensor
from minitensor.nn import Module, Parameter


def layer_norm_composed(x, weight=None, bias=None, eps=1e-5):
    """Layer norm from primitive ops: the engine derives the backward on its own."""
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)  # biased: divide by d
    y = centered / (variance + eps).sqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


class LayerNormFunction(Function):
    """Layer norm as one op with a backward derived by hand (the backends' layer_norm_backward
    computes it: the homework task layer_norm_backward)."""

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
        y, mean, rstd = backends.active().layer_norm(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dweight, dbias = backends.active().layer_norm_backward(grad, x, weight, mean, rstd)
        return dx if weight is None else (dx, dweight, dbias)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """The fused layer norm (the backend's kernel, with LayerNormFunction's backward)."""
    if weight is None:
        return LayerNormFunction.apply(x, eps=eps)
    if bias is None:
        bias = tensor(np.zeros_like(weight.data))
    return LayerNormFunction.apply(x, weight, bias, eps=eps)


class LayerNorm(Module):
    """LayerNorm(d, eps=1e-5, affine=True): nn.LayerNorm over the last axis.

    affine=False drops the gain and bias, the variant the second seed presents
    (Xu et al., 2019 found them unhelpful). fused=False computes with primitive
    ops instead of the backend kernel (same numbers, slower, for teaching).
    """

    def __init__(self, d, eps=1e-5, affine=True, fused=True):
        super().__init__()
        self.d, self.eps, self.fused = d, eps, fused
        self.weight = Parameter(np.ones(d, dtype=get_default_dtype())) if affine else None
        self.bias = Parameter(np.zeros(d, dtype=get_default_dtype())) if affine else None

    def forward(self, x):
        if x.shape[-1] != self.d:
            raise ValueError(f"LayerNorm({self.d}): the input's last axis has size {x.shape[-1]}, expected {self.d}")
        if self.fused:
            return layer_norm(x, self.weight, self.bias, self.eps)
        return layer_norm_composed(x, self.weight, self.bias, self.eps)

    @classmethod
    def from_torch(cls, module):
        ours = cls(module.normalized_shape[-1], eps=module.eps, affine=module.weight is not None)
        if module.weight is not None:
            ours.weight = Parameter(module.weight.detach().numpy().copy())
            ours.bias = Parameter(module.bias.detach().numpy().copy())
        return ours

    def extra_repr(self):
        return f"{self.d}, eps={self.eps}, affine={self.weight is not None}"


class RMSNorm(Module):
    """RMSNorm(d): x / sqrt(mean(x**2) + eps) * gain, no centring and no bias."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.d, self.eps = d, eps
        self.weight = Parameter(np.ones(d, dtype=get_default_dtype()))

    def forward(self, x):
        mean_square = (x * x).mean(axis=-1, keepdims=True)  # (..., 1)
        return x / (mean_square + self.eps).sqrt() * self.weight

    def extra_repr(self):
        return f"{self.d}, eps={self.eps}"
