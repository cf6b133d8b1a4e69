"""minitensor: a from-scratch reverse-mode autograd engine over NumPy arrays.

    import minitensor as mt
    x = mt.tensor([[1.0, 2.0]], requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    x.grad          # array([[2., 4.]], dtype=float32)
"""

from . import debug, nn, optim  # debug: its observer records where each node is made; its tools load on use
from .autograd import Function, enable_grad, no_grad
from .backends import get_backend, set_backend, use_backend
from .creation import arange, eye, full, ones, ones_like, rand, randn, tensor, zeros, zeros_like
from .gradcheck import GradcheckError, gradcheck
from .nn import functional as F
from .random import manual_seed
from .joining import cat, maximum, stack, where
from .tensor import Tensor, get_default_dtype, set_default_dtype

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "randn", "rand", "arange", "eye", "full", "zeros_like",
    "ones_like", "cat", "stack", "where", "maximum", "no_grad", "enable_grad", "set_default_dtype",
    "get_default_dtype", "gradcheck", "GradcheckError", "manual_seed", "Function", "nn", "F", "optim", "testing",
    "debug", "viz",
    "set_backend", "get_backend", "use_backend",
]


LAZY = ("viz", "testing")  # loaded on first use, as debug's tools are: `import minitensor` loads the engine alone


def __getattr__(name):
    """mt.viz and mt.testing, imported when first used (PEP 562)."""
    if name in LAZY:
        import importlib

        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'minitensor' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(LAZY))
