"""Tensor: an array, its gradient, and the node that made it. Operators call ops.

`Tensor.data` and `Tensor.grad` are plain NumPy arrays, so a debugger shows
numbers. Every method that computes something is one line that calls a
`Function` from `ops/`; that is where the math (and the backward) lives.
"""

import weakref

import numpy as np

from . import autograd, ops, views
from .dtypes import (DEVICES, as_array, check_can_require_grad, get_default_dtype, promotion,  # noqa: F401
                     set_default_dtype)  # (DEVICES and set_default_dtype re-exported)
from .ops.axes import axis_or_dim, normalize_axes, normalize_axis
from .ops.masks import check_mask
from .ops.reduce import NOT_GIVEN, ddof_for, extreme_along, reduced_axes
from .ops.axes import reshapes_in_place, shape_arg, split_slices


# ----------------------------------------------------------------------------
# Tensor
# ----------------------------------------------------------------------------


class Tensor:
    """An n-dimensional array that remembers how it was computed.

    data           the values (a NumPy array)
    grad           dL/d(this tensor) after backward (a NumPy array of the same shape), or None
    requires_grad  whether gradients flow to (and through) this tensor
    grad_fn        the graph node (a Context) of the op that made it; None for a leaf
    name           an optional label of yours, shown in repr and in the debugging tools
    """

    __slots__ = (
        "data", "grad", "_requires_grad", "_grad_fn", "_name", "_hooks", "_version_counter", "_view", "__weakref__"
    )
    __array_ufunc__ = None  # numpy_array + tensor calls Tensor.__radd__ instead of looping in NumPy

    def __init__(self, data, requires_grad=False, dtype=None, name=None):
        array = as_array(data.data if isinstance(data, Tensor) else data, dtype, Tensor)
        check_can_require_grad(array, requires_grad)
        self.data = array
        self.grad = None
        self._requires_grad = bool(requires_grad)
        self._grad_fn = None
        self._name = name
        self._hooks = ()
        # Bumped by every in-place change (see Context.saved_tensors). A one-element list, so
        # that tensors sharing memory (views, detach()) can share it: one list object, one count.
        self._version_counter = [0]
        self._view = None  # a views.View when this tensor is a view of another's memory

    @staticmethod
    def _from_op(array, grad_fn):
        """A Tensor around an op's output array; the fast path Function.apply takes. (A static
        method: a classmethod builds a bound method on every call, and this runs for every op.)"""
        tensor = object.__new__(Tensor)
        tensor.data = array
        tensor.grad = None
        tensor._requires_grad = grad_fn is not None
        tensor._grad_fn = grad_fn
        tensor._name = None
        tensor._hooks = ()
        tensor._version_counter = [0]
        tensor._view = None
        return tensor

    # -- what it is -----------------------------------------------------------

    @property
    def name(self):
        """A label of yours ("scores"); the debugging tools show it beside the op that made the tensor."""
        return self._name

    @name.setter
    def name(self, value):
        self._name = value
        if self.grad_fn is not None:
            self.grad_fn.label = value

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self.data.size

    @property
    def requires_grad(self):
        """Whether gradients flow to (and through) this tensor."""
        if self._view is not None:
            views.refresh_flags(self)
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, requires_grad):
        self.requires_grad_(requires_grad)

    @property
    def grad_fn(self):
        """The graph node (a Context) of the op that made this tensor; None for a leaf."""
        if self._view is not None:
            views.refresh_flags(self)
        return self._grad_fn

    @grad_fn.setter
    def grad_fn(self, node):
        self._grad_fn = node

    @property
    def is_leaf(self):
        """A tensor no recorded op made: gradients are stored in its .grad."""
        return self.grad_fn is None

    @property
    def version(self):
        """How many in-place changes this tensor's memory has had (shared with its views and
        detach()es), read-only, as PyTorch's t._version; views.increment_version(t) says "changed"."""
        return self._version_counter[0]

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self):
        return bool(self.data)

    __hash__ = object.__hash__  # == is elementwise, so hashing stays by identity

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self):
        prefix = "tensor("
        values = np.array2string(
            self.data, separator=", ", prefix=prefix, precision=4, threshold=40, edgeitems=2
        )
        extras = [f"shape={self.shape}", f"dtype={self.dtype}"]
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        if self.name is not None:
            extras.append(f"name={self.name!r}")
        return f"{prefix}{values}, {', '.join(extras)})"

    # -- leaving the graph ----------------------------------------------------

    def numpy(self):
        """The values as a NumPy array (the array itself, not a copy)."""
        return self.data

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.data.size != 1:
            raise ValueError(f"item(): only one-element tensors convert to a number, this one has shape {self.shape}")
        return self.data.item()

    def tolist(self):
        return self.data.tolist()

    def detach(self):
        """The same values (shared memory), cut from the graph: no grad flows back through it.

        It shares the version counter too: an in-place change through the detached tensor
        is an in-place change of this one, and a node that saved it will refuse to backward."""
        detached = Tensor._from_op(self.data, None)
        detached._version_counter = self._version_counter
        return detached

    def clone(self):
        """A copy with its own memory that stays in the graph (gradient flows back)."""
        return ops.Clone.apply(self)

    def to(self, target):
        """A copy on another device ("numpy" / "cpu", "cupy" / "cuda") or in another dtype.

        Both are differentiable: the gradient is moved or cast back.
        """
        if isinstance(target, str) and target in DEVICES:
            device = DEVICES[target]
            if device == ("numpy" if isinstance(self.data, np.ndarray) else "cupy"):
                return self
            return ops.ToDevice.apply(self, device=device)
        dtype = np.dtype(target)
        if dtype == self.dtype:
            return self
        if self.requires_grad and dtype.kind not in "fc":
            return Tensor(self.data.astype(dtype))  # an integer copy leaves the graph
        return ops.Cast.apply(self, dtype=dtype)

    def float(self):
        return self.to(np.float32)
    def double(self):  # noqa: E301  (float and double: a pair)
        return self.to(np.float64)

    # -- autograd -------------------------------------------------------------

    def backward(self, grad=None, retain_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's .grad (see autograd.backward)."""
        autograd.backward(self, grad, retain_graph)

    def retain_grad(self):
        """Keep .grad on this non-leaf tensor too (leaves always keep theirs)."""
        if self.grad_fn is None:
            if not self.requires_grad:
                raise RuntimeError("retain_grad(): this tensor does not require grad")
            return
        self.grad_fn._retained = weakref.ref(self)

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient is computed; a returned array replaces grad."""
        if not callable(hook):
            raise TypeError(f"register_hook(): the hook must be callable (hook(grad)), got {type(hook).__name__}")
        if not self.requires_grad:
            raise RuntimeError("register_hook(): this tensor does not require grad, so no gradient will reach it")
        owner = self if self.grad_fn is None else self.grad_fn
        if not owner._hooks:
            owner._hooks = []
        owner._hooks.append(hook)
        return hook

    def zero_grad(self):
        self.grad = None

    def requires_grad_(self, requires_grad=True):
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("requires_grad_(False) on a non-leaf tensor: use .detach() instead")
        check_can_require_grad(self.data, requires_grad)
        self._requires_grad = bool(requires_grad)
        return self

    # -- arithmetic -----------------------------------------------------------

    def _coerce(self, other):
        """A number or an array as a Tensor; a number (a NumPy scalar too, as in PyTorch) takes self's float dtype."""
        if isinstance(other, Tensor):
            return other
        if other is None:
            raise TypeError(f"an operand is None, not a number or a tensor (the other has shape {self.shape})")
        other = other.item() if isinstance(other, (np.bool_, np.integer, np.floating)) else other  # np.sqrt(d_k)
        if isinstance(other, (bool, int, float)):
            dtype = self.dtype if self.dtype.kind in "fc" else np.result_type(self.dtype, other)
            return Tensor._from_op(np.array(other, dtype=dtype), None)
        return Tensor(other)

    def _promoted(self, other, divide=False):
        """(self, other) as an arithmetic op's operands, promoted as PyTorch promotes them (dtypes.promotion)."""
        float_number = isinstance(other, (float, np.floating))
        other = self._coerce(other)
        dtype, other_dtype = promotion(self.dtype, other.dtype, float_number, divide)
        return self._cast_to(dtype), other._cast_to(other_dtype)

    def _floating(self):
        """Self, or an integer or bool tensor as the default float dtype (exp, log, sqrt, tanh, sigmoid)."""
        return self._cast_to(get_default_dtype()) if self.dtype.kind in "biu" else self

    def _cast_to(self, dtype):
        """Self in `dtype`; promotion only casts integer and bool tensors (never in the graph) and numbers."""
        return self if self.dtype == dtype else Tensor._from_op(self.data.astype(dtype), None)

    def __add__(self, other):
        return ops.Add.apply(*self._promoted(other))

    def __radd__(self, other):
        a, b = self._promoted(other)
        return ops.Add.apply(b, a)

    def __sub__(self, other):
        return ops.Sub.apply(*self._promoted(other))

    def __rsub__(self, other):
        a, b = self._promoted(other)
        return ops.Sub.apply(b, a)

    def __mul__(self, other):
        return ops.Mul.apply(*self._promoted(other))

    def __rmul__(self, other):
        a, b = self._promoted(other)
        return ops.Mul.apply(b, a)

    def __truediv__(self, other):
        return ops.Div.apply(*self._promoted(other, divide=True))

    def __rtruediv__(self, other):
        a, b = self._promoted(other, divide=True)
        return ops.Div.apply(b, a)

    def __pow__(self, exponent):
        return ops.Pow.apply(*self._promoted(exponent))

    def __rpow__(self, base):
        a, b = self._promoted(base)
        return ops.Pow.apply(b, a)

    def __matmul__(self, other):
        return ops.MatMul.apply(self, self._coerce(other))

    def __rmatmul__(self, other):
        return ops.MatMul.apply(self._coerce(other), self)

    def __neg__(self):
        return ops.Neg.apply(self)

    def __pos__(self):
        return self

    # Comparisons give boolean tensors and record nothing: they have no gradient.
    def _compare(self, other, compare):
        other = other.data if isinstance(other, Tensor) else other
        return Tensor._from_op(np.asarray(compare(self.data, other)), None)

    def __lt__(self, other):
        return self._compare(other, np.less)

    def __le__(self, other):
        return self._compare(other, np.less_equal)

    def __gt__(self, other):
        return self._compare(other, np.greater)

    def __ge__(self, other):
        return self._compare(other, np.greater_equal)

    def __eq__(self, other):
        return self._compare(other, np.equal)

    def __ne__(self, other):
        return self._compare(other, np.not_equal)

    def __invert__(self):
        if self.dtype != np.bool_:
            raise TypeError(f"~ needs a boolean tensor, got dtype {self.dtype}")
        return Tensor._from_op(~self.data, None)

    # -- in place (views.py: how the graph stays right) ------------------------

    def __iadd__(self, other):
        return views.apply_inplace(self, ops.Add, "+=", other)

    def __isub__(self, other):
        return views.apply_inplace(self, ops.Sub, "-=", other)

    def __imul__(self, other):
        return views.apply_inplace(self, ops.Mul, "*=", other)

    def __itruediv__(self, other):
        return views.apply_inplace(self, ops.Div, "/=", other)

    def masked_fill_(self, mask, value):
        """In place: set the positions where mask is True to value."""
        mask = check_mask(mask, self.shape, "masked_fill_")
        return views.apply_inplace(self, ops.MaskedFill, "masked_fill_", value, mask=mask)

    def __setitem__(self, index, value):
        if isinstance(value, Tensor):
            views.set_items(self, _index_arrays(index), value.data, value._requires_grad)
        else:
            views.set_items(self, _index_arrays(index), value, False)

    # -- elementwise functions ----------------------------------------------

    def exp(self):
        return ops.Exp.apply(self._floating())

    def log(self):
        return ops.Log.apply(self._floating())

    def sqrt(self):
        return ops.Sqrt.apply(self._floating())

    def tanh(self):
        return ops.Tanh.apply(self._floating())

    def sigmoid(self):
        return ops.Sigmoid.apply(self._floating())

    def relu(self):
        return ops.ReLU.apply(self)

    def abs(self):
        return ops.Abs.apply(self)

    def clip(self, min=None, max=None):
        """Limit the values to [min, max] (either may be None), as np.clip / torch.clamp."""
        if min is None and max is None:
            raise ValueError("clip: give min, max or both")
        return ops.Clip.apply(self, low=min, high=max)

    clamp = clip

    def masked_fill(self, mask, value):
        """value where mask is True (a hidden position, as in the seeds), self elsewhere."""
        mask = check_mask(mask, self.shape, "masked_fill")
        return ops.MaskedFill.apply(self, self._coerce(value), mask=mask)

    def softmax(self, axis=-1, mask=None, *, dim=None):
        """Softmax along axis (dim= is axis=); entries where the boolean mask is True get weight 0."""
        mask = None if mask is None else check_mask(mask, self.shape, "softmax")
        return ops.Softmax.apply(self, axis=axis_or_dim(axis, dim, "softmax", -1), mask=mask)

    def log_softmax(self, axis=-1, *, dim=None):
        return ops.LogSoftmax.apply(self, axis=axis_or_dim(axis, dim, "log_softmax", -1))

    # -- reductions -----------------------------------------------------------

    def sum(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        axis, keepdims = reduced_axes("sum", axis, dim), keepdims if keepdim is None else keepdim
        return ops.Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        axis, keepdims = reduced_axes("mean", axis, dim), keepdims if keepdim is None else keepdim
        return ops.Mean.apply(self, axis=axis, keepdims=keepdims)

    def var(self, dim=None, keepdim=False, *, axis=NOT_GIVEN, keepdims=None, ddof=None, correction=None, unbiased=None):
        """PyTorch's spelling (dim=, positional, none) divides by n - 1; NumPy's (axis=, ddof=) by n - ddof."""
        ddof = ddof_for("var", ddof, correction, unbiased, numpy_spelling=axis is not NOT_GIVEN or ddof is not None)
        axis, keepdims = reduced_axes("var", None if axis is NOT_GIVEN else axis, dim), keepdim or bool(keepdims)
        return ops.Var.apply(self, axis=axis, keepdims=keepdims, ddof=ddof)

    def std(self, *args, **kwargs):
        """sqrt(var(...)): var's arguments, with var's meaning of each spelling."""
        return self.var(*args, **kwargs).sqrt()

    def max(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """With dim= (one int): (values, indices), as torch.max; else the values, ties sharing the gradient."""
        if dim is not None and axis is None:
            return extreme_along(self, "max", np.argmax, dim, keepdims if keepdim is None else keepdim)
        axis, keepdims = axis_or_dim(axis, dim, "max"), keepdims if keepdim is None else keepdim
        return ops.Max.apply(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The minimum: as max (above), with (values, indices) for PyTorch's dim=."""
        if dim is not None and axis is None:
            return extreme_along(self, "min", np.argmin, dim, keepdims if keepdim is None else keepdim)
        axis, keepdims = axis_or_dim(axis, dim, "min"), keepdims if keepdim is None else keepdim
        return ops.Min.apply(self, axis=axis, keepdims=keepdims)

    def amax(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The maximum over one or more axes (torch.amax, np.max): tied maxima share the gradient."""
        return ops.Max.apply(self, axis=reduced_axes("amax", axis, dim), keepdims=keepdims or bool(keepdim))

    def amin(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """The minimum over one or more axes (torch.amin, np.min): tied minima share the gradient."""
        return ops.Min.apply(self, axis=reduced_axes("amin", axis, dim), keepdims=keepdims or bool(keepdim))

    def gather(self, dim, index):
        """torch.gather(x, dim, index), np.take_along_axis: out[i][j] = x[i][index[i][j]] for dim=1."""
        index = index.data if isinstance(index, Tensor) else np.asarray(index)
        return ops.Gather.apply(self, index=index, axis=normalize_axis(dim, self.ndim, "gather", self.shape))

    def argmax(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Index of the maximum (np.argmax, torch.argmax; dim= is axis=): an int64 tensor, no gradient."""
        return self._arg(np.argmax, "argmax", axis_or_dim(axis, dim, "argmax"), keepdim or keepdims)

    def argmin(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Index of the minimum (np.argmin, torch.argmin; dim= is axis=): an int64 tensor, no gradient."""
        return self._arg(np.argmin, "argmin", axis_or_dim(axis, dim, "argmin"), keepdim or keepdims)

    def _arg(self, find, op, axis, keepdims):
        if axis is not None:
            axis = normalize_axis(axis, self.ndim, op, self.shape)
        elif keepdims:  # torch: keepdim without dim keeps every axis, at size 1
            return Tensor(find(self.data).reshape((1,) * self.ndim).astype(np.int64))
        return Tensor(np.asarray(find(self.data, axis=axis, keepdims=keepdims), dtype=np.int64))

    # -- shape ----------------------------------------------------------------

    def reshape(self, *shape):
        """reshape(2, 3) or reshape((2, 3)); one entry may be -1. A view where the memory layout
        allows it, else a copy (as np.reshape and torch.reshape)."""
        return ops.Reshape.apply(self, shape=shape_arg(shape, "reshape"))

    def view(self, *shape):
        """reshape that never copies: refused, as torch.view refuses it, where the memory layout
        (after a transpose, say) would need a copy, so an in-place change through it reaches self."""
        shape = shape_arg(shape, "view")
        if self.data.size and not reshapes_in_place(self.data, shape):
            raise RuntimeError(
                f"view{shape}: a tensor of shape {self.shape} with strides {self.data.strides} cannot be viewed "
                f"in that shape without a copy (torch.view refuses it too); use .reshape(...), which copies "
                f"where it must, or .contiguous().view(...)"
            )
        return ops.Reshape.apply(self, shape=shape)

    def contiguous(self):
        """self when its memory is in C order, else a C-ordered copy in the graph (as torch's)."""
        return self if self.data.flags.c_contiguous else ops.Clone.apply(self, order="C")

    def split(self, split_size_or_sections, axis=0, *, dim=None):
        """Pieces along axis (dim= is axis=), as torch.split: an int is each piece's size (the last
        may be smaller), a list the sizes (they must add up to the axis). Each piece is a view."""
        axis = normalize_axis(axis_or_dim(axis, dim, "split", 0), self.ndim, "split", self.shape)
        lead = (slice(None),) * axis
        return tuple(self[lead + (piece,)] for piece in split_slices(self.shape, axis, split_size_or_sections))

    def chunk(self, chunks, axis=0, *, dim=None):
        """`chunks` pieces of equal size along axis (the last may be smaller, and there may be fewer),
        as torch.chunk; dim= is axis=."""
        if not isinstance(chunks, (int, np.integer)) or chunks <= 0:
            raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r} (shape {self.shape})")
        axis = normalize_axis(axis_or_dim(axis, dim, "chunk", 0), self.ndim, "chunk", self.shape)
        return self.split(max(-(-self.shape[axis] // chunks), 1), axis)

    def permute(self, *axes):
        """Reorder the axes: permute(0, 2, 1) or permute((0, 2, 1)), as np.transpose(x, axes)."""
        axes = shape_arg(axes, "permute")
        axes = tuple(a % self.ndim if self.ndim else a for a in axes)
        return ops.Transpose.apply(self, axes=axes)

    def transpose(self, *axes):
        """transpose() reverses the axes; transpose(a, b) swaps two axes (as torch.transpose);
        three or more axes are a permutation (as np.transpose)."""
        if not axes:
            return ops.Transpose.apply(self, axes=tuple(reversed(range(self.ndim))))
        if len(axes) == 2 and all(isinstance(a, int) for a in axes):
            return self.swapaxes(*axes)
        return self.permute(*axes)

    def swapaxes(self, axis1, axis2):
        a = normalize_axis(axis1, self.ndim, "swapaxes", self.shape)
        b = normalize_axis(axis2, self.ndim, "swapaxes", self.shape)
        axes = list(range(self.ndim))
        axes[a], axes[b] = axes[b], axes[a]
        return ops.Transpose.apply(self, axes=tuple(axes))

    @property
    def T(self):
        """All axes reversed (NumPy's .T); for a matrix, its transpose."""
        return self.transpose()

    def expand(self, *shape):
        """Broadcast to a larger shape without copying; -1 keeps an axis's size (as torch.expand)."""
        shape = shape_arg(shape, "expand")
        offset = len(shape) - self.ndim
        shape = tuple(self.shape[i - offset] if n == -1 and i >= offset else n for i, n in enumerate(shape))
        return ops.Expand.apply(self, shape=shape)

    def broadcast_to(self, shape):
        return self.expand(shape)

    def unsqueeze(self, axis=None, *, dim=None):
        """Insert a size-1 axis at `axis` (negative counts from the end of the new shape); dim= is axis=."""
        axis = axis_or_dim(axis, dim, "unsqueeze")
        axis = normalize_axis(axis, self.ndim + 1, "unsqueeze", self.shape)
        return ops.Reshape.apply(self, shape=self.shape[:axis] + (1,) + self.shape[axis:])

    def squeeze(self, dim=None, *, axis=NOT_GIVEN):
        """Drop size-1 axes (all, or those given): a given one not of size 1 is kept (torch), or refused (axis=)."""
        numpy_spelling, axis = axis is not NOT_GIVEN, axis_or_dim(None if axis is NOT_GIVEN else axis, dim, "squeeze")
        axes = normalize_axes(axis, self.ndim, "squeeze", self.shape)
        if axis is None or not numpy_spelling:
            axes = tuple(a for a in axes if self.shape[a] == 1)
        for a in axes:
            if self.shape[a] != 1:
                raise ValueError(f"squeeze: axis {a} of shape {self.shape} has size {self.shape[a]}, not 1")
        shape = tuple(n for i, n in enumerate(self.shape) if i not in axes)
        return ops.Reshape.apply(self, shape=shape)

    def flatten(self):
        return self.reshape(-1)

    def __getitem__(self, index):
        return ops.Index.apply(self, index=_index_arrays(index))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


# ----------------------------------------------------------------------------
# Helpers for arguments
# ----------------------------------------------------------------------------


def _index_arrays(index):
    """Tensors inside an index become their arrays (integer or boolean)."""
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        array = np.asarray(index)
        # an empty list selects nothing: NumPy indexes with it as integers, np.asarray makes floats
        return array.astype(np.intp) if array.size == 0 else array
    return index

