"""LayerNorm and RMSNorm, as torch.nn's (over the last axis), and layer norm written two ways:
the fused op (ops/normalization.py: LayerNormFunction) and a composition of primitive ops, the
reference it is tested against. models/layernorm.py re-exports them."""

import numpy as np

from ..ops.normalization import LayerNormFunction
from ..tensor import Tensor, get_default_dtype
from .module import Module, Parameter


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


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """The fused layer norm (the backend's kernel, with LayerNormFunction's backward).
    Either of weight and bias may be None, as in torch.nn.functional.layer_norm: a missing
    weight is a gain of 1, a missing bias a bias of 0 (constants, with no gradient)."""
    for role, value in (("weight", weight), ("bias", bias)):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"layer_norm: {role} must be a Tensor of shape ({x.shape[-1]},) or None, got {value!r:.40}")
    if weight is None and bias is None:
        return LayerNormFunction.apply(x, eps=eps)
    if weight is None:
        weight = Tensor(np.ones_like(bias.data))
    if bias is None:
        bias = Tensor(np.zeros_like(weight.data))
    return LayerNormFunction.apply(x, weight, bias, eps=eps)


def last_axis_size(normalized_shape, layer):
    """torch's normalized_shape as one size: an int or a 1-tuple (the last axis; more axes are refused)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    if len(shape) != 1:
        raise ValueError(
            f"{layer}: normalized_shape {shape}: minitensor normalises over the last axis only; "
            f"reshape the input so that the normalised axes are one last axis"
        )
    return int(shape[0])


class LayerNorm(Module):
    """LayerNorm(d, eps=1e-5, affine=True): torch.nn.LayerNorm over the last axis (d may be torch's
    normalized_shape, an int or a 1-tuple; elementwise_affine= is affine=, bias=False drops the bias).

    affine=False drops the gain and bias, the variant the second seed presents
    (Xu et al., 2019 found them unhelpful). fused=False computes with primitive
    ops instead of the backend kernel (same numbers, slower, for teaching).
    """

    def __init__(self, d, eps=1e-5, affine=True, fused=True, *, elementwise_affine=None, bias=True):
        super().__init__()
        affine = affine if elementwise_affine is None else elementwise_affine
        self.d, self.eps, self.fused = last_axis_size(d, "LayerNorm"), eps, fused
        self.weight = Parameter(np.ones(self.d, dtype=get_default_dtype())) if affine else None
        self.bias = Parameter(np.zeros(self.d, dtype=get_default_dtype())) if affine and bias else None

    def forward(self, x):
        if x.ndim == 0 or x.shape[-1] != self.d:
            raise ValueError(f"LayerNorm({self.d}): the input (shape {x.shape}) must have a last axis of size {self.d}")
        if self.fused:
            return layer_norm(x, self.weight, self.bias, self.eps)
        return layer_norm_composed(x, self.weight, self.bias, self.eps)

    @classmethod
    def from_torch(cls, module):
        ours = cls(module.normalized_shape[-1], eps=module.eps, affine=module.weight is not None,
                   bias=module.bias is not None)
        if module.weight is not None:
            ours.weight = Parameter(module.weight.detach().numpy().copy())
        if module.bias is not None:
            ours.bias = Parameter(module.bias.detach().numpy().copy())
        return ours

    def extra_repr(self):
        return f"{self.d}, eps={self.eps}, affine={self.weight is not None}"


class RMSNorm(Module):
    """RMSNorm(d, eps=None): x / sqrt(mean(x**2) + eps) * gain, no centring and no bias, as
    torch.nn.RMSNorm (eps=None is the input dtype's machine epsilon, torch's default)."""

    def __init__(self, d, eps=None, elementwise_affine=True):
        super().__init__()
        self.d, self.eps = last_axis_size(d, "RMSNorm"), eps
        self.weight = Parameter(np.ones(self.d, dtype=get_default_dtype())) if elementwise_affine else None

    def forward(self, x):
        eps = float(np.finfo(x.dtype).eps) if self.eps is None else self.eps
        mean_square = (x * x).mean(axis=-1, keepdims=True)  # (..., 1)
        y = x / (mean_square + eps).sqrt()
        return y if self.weight is None else y * self.weight

    def extra_repr(self):
        return f"{self.d}, eps={self.eps}"
