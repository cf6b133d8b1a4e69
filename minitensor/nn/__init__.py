"""Neural-network building blocks: Module, Parameter, the basic layers, init and functional (F)."""

from . import functional, init
from .layers import GELU, Dropout, Embedding, Linear, ModuleList, ReLU, Sequential, Tanh
from .module import Module, Parameter
from .normalization import LayerNorm, LayerNormFunction, RMSNorm, layer_norm, layer_norm_composed

__all__ = [
    "Module", "Parameter", "Linear", "Embedding", "Dropout", "Sequential", "ModuleList",
    "GELU", "ReLU", "Tanh", "init", "functional", "LayerNorm", "RMSNorm", "LayerNormFunction",
    "layer_norm", "layer_norm_composed",
]
