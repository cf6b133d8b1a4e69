"""The basic layers: Linear, Embedding, Dropout, and the containers Sequential and ModuleList."""

import math

import numpy as np

from ..tensor import get_default_dtype
from . import functional as F
from . import init
from .module import Module, Parameter


class Linear(Module):
    """y = x W^T + b, W of shape (out_features, in_features), PyTorch's initialisation."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        dtype = dtype or get_default_dtype()
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dtype))
        self.bias = Parameter(np.empty(out_features, dtype=dtype)) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # = U(-1/sqrt(in), 1/sqrt(in))
        if self.bias is not None:
            bound = 1 / math.sqrt(in_features) if in_features else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """Row i of weight (num_embeddings, dim) for each index i; weights start N(0, 1) as in PyTorch.
    padding_idx: that row starts at zero and gets no gradient (torch's padding_idx)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} rows")
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        self.weight = Parameter(np.empty((num_embeddings, embedding_dim), dtype=dtype or get_default_dtype()))
        init.normal_(self.weight)
        if self.padding_idx is not None:  # the padding row starts at 0 and, getting no gradient, stays there
            self.weight.data[self.padding_idx] = 0

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zero elements with probability p while training (scaling the rest by 1/(1-p)); identity in eval()."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class _Container(Module):
    """Indexing, len() and iteration over the registered submodules, in order."""

    def __getitem__(self, index):
        return list(self._modules.values())[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(_Container):
    """Modules applied in order; indexable like a list."""

    def __init__(self, *modules):
        super().__init__()
        for index, module in enumerate(modules):
            _check_module(module, f"Sequential: argument {index}")
        for index, module in enumerate(modules):
            setattr(self, str(index), module)

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x


class ModuleList(_Container):
    """A list of modules whose parameters the parent sees (a plain list would hide them)."""

    def __init__(self, modules=()):
        super().__init__()
        if isinstance(modules, Module):
            raise TypeError(
                f"ModuleList: expected an iterable of Modules, got one {type(modules).__name__}; "
                f"wrap it in a list: ModuleList([module])"
            )
        modules = list(modules)
        for index, module in enumerate(modules):
            _check_module(module, f"ModuleList: item {index}")
        for module in modules:
            self.append(module)

    def append(self, module):
        _check_module(module, "ModuleList.append")
        setattr(self, str(len(self._modules)), module)
        return self


def _check_module(value, where):
    """A container holds Modules only: anything else would be stored as a plain attribute and skipped."""
    if not isinstance(value, Module):
        if hasattr(value, "shape"):
            shown = f"a {type(value).__name__} of shape {value.shape}"
        else:
            shown = f"{type(value).__name__} {value!r}"
        raise TypeError(f"{where} is {shown}, not a Module (a layer such as nn.Linear(3, 4))")


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class Tanh(Module):
    def forward(self, x):
        return x.tanh()
