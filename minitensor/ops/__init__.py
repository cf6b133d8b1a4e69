"""Every op: one Function subclass each, forward and backward side by side on plain arrays."""

from .activations import GELU, ReLU, SiLU
from .attention import Attention
from .elementwise import (
    Abs, Add, Cast, Clip, Clone, Div, Exp, Log, MaskedFill, Maximum, Mul, Neg, Pow, Sigmoid,
    Sqrt, Sub, Tanh, ToDevice, Where,
)
from .linalg import MatMul
from .losses import CrossEntropy, MSELoss
from .normalization import LayerNormFunction
from .reduce import Max, Mean, Min, Sum, Var
from .shape import Cat, CopySlices, Expand, Gather, Index, Reshape, Stack, Transpose
from .softmax import LogSoftmax, Softmax
