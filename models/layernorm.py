"""Layer norm three ways, held against each other and against torch.nn.LayerNorm.

    LN(x) = (x - mean) / sqrt(var + eps) * gain + bias      over the last axis,

with the *biased* variance and eps *inside* the square root, as nn.LayerNorm.
(The Annotated Transformer divides by the unbiased std plus eps instead, which
is a different function; ours matches PyTorch.)

The op and the layers live in minitensor (ops/normalization.py: LayerNormFunction; nn/normalization.py:
LayerNorm, RMSNorm, layer_norm, layer_norm_composed), so that mt.nn.LayerNorm is the layer the models
use; this module keeps the names at the paths the course (and the homework's grader) imports them by.
"""

from minitensor.nn import LayerNorm, LayerNormFunction, layer_norm, layer_norm_composed
from minitensor.nn import RMSNorm as _TorchRMSNorm

__all__ = ["LayerNorm", "LayerNormFunction", "RMSNorm", "layer_norm", "layer_norm_composed"]


class RMSNorm(_TorchRMSNorm):
    """RMSNorm(d, eps=1e-6): the models' default eps (torch.nn.RMSNorm's default, mt.nn.RMSNorm's
    too, is the dtype's machine epsilon)."""

    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
