"""Views and in-place changes: tensors that share memory, and the graph kept right when one
of them is changed in place.

You can learn the engine (autograd.py) without this file: on its own it differentiates every
program whose tensors are never changed in place. This file is what makes `x += 1`,
`t.masked_fill_(...)` and `base[0] *= 2` work as in PyTorch. It attaches to the engine at
its hook point (see "The hook point" in autograd.py); nothing else calls into the engine.

Three ideas, each explained once, below:

1. Versions. Every Tensor holds a version counter that each in-place change bumps. A node
   remembers the version of each input (and output) whose array forward saved (`Version`),
   and `ctx.saved_tensors` refuses to hand back an array whose version has moved on: the
   values backward would read are no longer the ones forward used.

2. Views. reshape, transpose, expand and basic indexing may return an array that shares
   its input's memory. Such an output shares its input's version counter too (one list
   object, so a bump through either is seen by every node that saved the other), and
   remembers how it was made from the tensor that owns the memory (`View`).

3. Rebasing. An in-place op records its result as the tensor's new history: a copy of the
   old values becomes the op's input and the tensor becomes its output. Through a view,
   the base is rebased instead (a `CopySlices` node: the base with the view's region
   replaced by the op's result), and every view of that base gets its grad_fn re-made from
   the base's new one, the next time it is used (`refresh`). PyTorch does the same.
"""

from typing import NamedTuple

import numpy as np

from . import autograd, ops
from .grad_mode import is_grad_enabled

# ----------------------------------------------------------------------------
# 1. Versions: what a node remembers of the arrays it saved
# ----------------------------------------------------------------------------


class Version(NamedTuple):
    """What a node remembers of an input (or its output) whose array forward saved: which
    one, and its version then.

    The counter is a one-element list, not an int, so that tensors sharing memory (a view
    and its base, a tensor and its detach()) can hold the same list: a bump through any of
    them is seen by every node that recorded any of them.
    """

    position: int  # which input (0, 1, ...), or None for the output
    data_id: int  # id() of the array, to find it among the arrays the node saved
    counter: list  # the tensor's version counter (shared by all aliases of its memory)
    seen: int  # counter[0] when the node was made


# tuple.__new__ builds a Version without NamedTuple's Python-level __new__: this runs for every
# op that saves an array, so the cheaper constructor shows in the per-op overhead benchmark.
_new_version = tuple.__new__


def _holds(arrays, array):
    """Whether array is one of arrays, by identity (== on arrays compares elementwise)."""
    for candidate in arrays:
        if candidate is array:
            return True
    return False


def record_versions(ctx, inputs, output):
    """The engine's hook after recording a node that saved arrays: remember the version of
    each input (and the output) whose array forward saved."""
    saved = ctx._saved
    if type(saved) is dict:
        saved = saved.values()
    versions = []
    for position, t in enumerate(inputs):
        if _holds(saved, t.data):
            counter = t._version_counter
            versions.append(_new_version(Version, (position, id(t.data), counter, counter[0])))
    if _holds(saved, output.data):  # Exp, Tanh, ... save their output
        counter = output._version_counter  # (a view's output shares its input's counter)
        versions.append(_new_version(Version, (None, id(output.data), counter, counter[0])))
    ctx._versions = versions


def check_versions(ctx):
    """The engine's hook in ctx.saved_tensors: raise, naming the array, if an in-place change
    overwrote an array ctx saved."""
    for record in ctx._versions:
        if record.counter[0] != record.seen:
            _refuse_changed(ctx, record)


def saved_sources(ctx):
    """(position, array) for each array ctx saved that is one of its inputs (position 0, 1, ...)
    or its output (position None), as record_versions found them; arrays forward computed for
    itself are not listed. The backward page shows an op's output value through them."""
    arrays = ctx.saved_arrays
    sources = []
    for record in ctx._versions:
        array = next((a for a in arrays if id(a) == record.data_id), None)
        if array is not None:
            sources.append((record.position, array))
    return sources


def _refuse_changed(ctx, record):
    role = "output" if record.position is None else f"input {record.position}"
    for array in ctx.saved_arrays:
        if id(array) == record.data_id:
            raise RuntimeError(
                f"{ctx.name}.backward needs its saved {role} (a {array.dtype} tensor of shape "
                f"{array.shape}), but an in-place operation changed that tensor (or a view or "
                f"detach() of it, which share its memory) after {ctx.name} saved it: it is at "
                f"version {record.counter[0]}; {ctx.name} expected version {record.seen}. Hint: "
                f"use the out-of-place form (x = x + y instead of x += y), or change a .clone() "
                f"of the tensor."
            )


def increment_version(tensor):
    """Say that tensor.data was changed in place (as torch.autograd.graph.increment_version):
    every node that saved this memory (through this tensor or any view or detached alias of it)
    will refuse to run its backward, and tensor.version goes up by one. Code that writes into
    .data itself (an optimizer's step, nn.init, load_state_dict) calls this after the write."""
    tensor._version_counter[0] += 1


def share_version(alias, tensor):
    """Make alias count tensor's in-place changes as its own (and tensor alias's): for a tensor
    that holds the same memory without being a view of it (nn.Parameter(t), as t.detach())."""
    alias._version_counter = tensor._version_counter


# ----------------------------------------------------------------------------
# 2. Views: outputs that share their input's memory
# ----------------------------------------------------------------------------


class View:
    """How a view (reshape, transpose, expand, basic slicing, ...) was made from the tensor
    that owns its memory, so that its graph can be re-made after an in-place change.

    base                 the tensor that owns the memory (never itself a view)
    parent, step         the source's View (None when the source is the base) and the view
                         op (Function, options) that made this view from the source: a chain
                         of n views is n links, each made in constant time
    version              the shared version when this view's grad_fn was made or checked
    base_grad_fn         base.grad_fn then; differs once the base was changed in place
                         while the graph was recorded
    made_without_grad    made inside no_grad(), or a view of such a view (as in PyTorch, the
                         mark passes to every view made from it): it has no grad_fn, and once
                         its memory has changed and its base requires grad, it cannot get a
                         right one
    """

    __slots__ = ("base", "parent", "step", "version", "base_grad_fn", "made_without_grad")

    def __init__(self, base, parent, step, made_without_grad):
        self.base = base
        self.parent = parent
        self.step = step
        self.version = base._version_counter[0]
        self.base_grad_fn = base._grad_fn
        self.made_without_grad = made_without_grad

    @property
    def steps(self):
        """The view ops ((Function, options), ...) that make this view from base, in order."""
        steps, link = [], self
        while link is not None:
            steps.append(link.step)
            link = link.parent
        steps.reverse()
        return tuple(steps)


def become_view_of(result, source, function, options):
    """The engine's hook after a view op (function.returns_view): make result share source's
    version counter, when it really shares its memory (a reshape may copy)."""
    # NumPy and CuPy point a view's .base at the array that owns the memory
    owner = source.data if source.data.base is None else source.data.base
    if result.data.base is None or result.data.base is not owner:
        return
    result._version_counter = source._version_counter
    parent = source._view
    made_without_grad = not is_grad_enabled() or (parent is not None and parent.made_without_grad)
    result._view = View(source if parent is None else parent.base, parent, (function, options), made_without_grad)


def refresh(tensor, op):
    """Re-make a view's grad_fn from its base's, if the base was changed in place (with the
    graph recorded) since the view's grad_fn was made. The engine calls this before an op
    (named op) uses a view."""
    view = tensor._view
    if view.version == tensor._version_counter[0]:
        return
    if view.made_without_grad:
        if not (is_grad_enabled() and view.base._requires_grad):
            return
        raise RuntimeError(
            f"{op}: this tensor (shape {tensor.shape}) is a view made inside no_grad() of a tensor that "
            f"requires grad, and that tensor (or another view of it) has since been changed in "
            f"place with the graph recorded: which gradient the view should carry is ambiguous "
            f"(PyTorch refuses it too). Make the view and the change both inside or both "
            f"outside no_grad()."
        )
    old_node = tensor._grad_fn
    with_hooks = old_node is not None and (old_node._hooks or old_node._retained is not None)
    if view.base_grad_fn is not view.base._grad_fn or with_hooks:
        # PyTorch re-makes a view's node whenever its memory changed: hooks registered on the old
        # node stay there (they no longer run for later uses), retain_grad moves to the new one
        with autograd.enable_grad():
            remade = view.base
            for function, options in view.steps:
                remade = function.apply(remade, **options)
        tensor._grad_fn = remade._grad_fn
        tensor._requires_grad = remade._requires_grad
        view.base_grad_fn = view.base._grad_fn
        _move_retained(old_node, tensor._grad_fn)
    view.version = tensor._version_counter[0]


def refresh_flags(tensor):
    """A view reads its flags as they are now: an in-place change of its base (a += w) may
    have put it in the graph since it was made. A view made in no_grad() keeps its flags;
    whether it can be used is decided where it is used (see refresh)."""
    if not tensor._view.made_without_grad:
        refresh(tensor, "grad_fn")


# ----------------------------------------------------------------------------
# 3. In-place changes, and rebasing the graph
# ----------------------------------------------------------------------------


def apply_inplace(tensor, function, symbol, other=None, **options):
    """tensor <symbol> other: compute out of place, then write into tensor.data and bump
    the version.

    Nothing is changed until every check has passed. When the graph is being recorded, a
    copy of the old values takes tensor's place as the op's input, and tensor becomes the
    op's output (PyTorch rebases history the same way). Through a view, the base's history
    is rebased instead (a CopySlices node: the base with the view's region replaced by the
    op's result), and the view's grad_fn is re-made from the base's.
    """
    from_op = type(tensor)._from_op  # a plain Tensor around an array, as Function.apply makes
    inputs = () if other is None else (tensor._coerce(other),)
    check_writable(tensor, symbol)
    view = tensor._view
    if view is not None:
        refresh(tensor, symbol)
    records = is_grad_enabled() and (tensor._requires_grad or any(t._requires_grad for t in inputs))
    if view is not None and view.made_without_grad and is_grad_enabled():
        if records or view.base._requires_grad:
            _refuse_view_made_without_grad(tensor, symbol)
    old_node = tensor.grad_fn
    if records:
        _check_can_record_inplace(tensor, symbol)
        before = from_op(tensor.data.copy(), _without_tensor_hooks(tensor, old_node))
        before._requires_grad = tensor._requires_grad
    else:
        before = from_op(tensor.data, None)
    result = function.apply(before, *inputs, **options)
    if result.shape != tensor.shape:
        raise ValueError(
            f"{symbol}: the result has shape {result.shape}, which cannot be stored in place "
            f"in a tensor of shape {tensor.shape}"
        )
    if not np.can_cast(result.dtype, tensor.dtype, casting="same_kind"):
        raise TypeError(f"{symbol}: a {result.dtype} result cannot be stored in place in a {tensor.dtype} tensor")
    if records and view is not None:  # made before the write: it reads the base's old values
        base = view.base
        base_before = from_op(base.data, base.grad_fn)
        base_before._requires_grad = base._requires_grad
        new_base = ops.CopySlices.apply(base_before, result, steps=view.steps)
    np.copyto(tensor.data, result.data, casting="same_kind")
    increment_version(tensor)
    if records and view is not None:
        _move_retained(base._grad_fn, new_base.grad_fn)  # the base's retain_grad follows it too
        base.grad_fn = new_base.grad_fn
        base._requires_grad = True
        refresh(tensor, symbol)
    elif records:
        tensor.grad_fn = result.grad_fn
        tensor._requires_grad = True
    if records:
        # retain_grad() follows the tensor to its new value, as in PyTorch: .grad is the
        # gradient of what the tensor holds at backward, not of the value it held before
        _move_retained(old_node, tensor.grad_fn)
    return tensor


def _move_retained(old_node, new_node):
    """Move retain_grad's mark from a tensor's old node to the node it has now."""
    if old_node is not None and old_node._retained is not None and new_node is not None and new_node is not old_node:
        new_node._retained, old_node._retained = old_node._retained, None


def _without_tensor_hooks(tensor, node):
    """The node the op's input (the view's old values) hangs from. For a view with hooks or
    retain_grad on its node, a fresh node re-made from the base's history: PyTorch's CopySlices
    leaves the view's old node out of the graph, so its hooks never run (here they would, with
    a gradient that could change the base's)."""
    view = tensor._view
    if view is None or node is None or not (node._hooks or node._retained is not None):
        return node
    with autograd.enable_grad():
        remade = view.base
        for function, options in view.steps:
            remade = function.apply(remade, **options)
    return remade._grad_fn


def set_items(tensor, index, values, values_require_grad):
    """tensor[index] = values (an array or a number), outside the graph: refused for a tensor
    in the graph, or when the values come from one."""
    check_writable(tensor, "t[index] = value")
    view = tensor._view
    if view is not None:
        refresh(tensor, "t[index] = value")
        if view.made_without_grad and is_grad_enabled() and view.base._requires_grad:
            _refuse_view_made_without_grad(tensor, "t[index] = value")
    if is_grad_enabled() and (tensor._requires_grad or values_require_grad):
        raise RuntimeError(
            f"t[index] = value on a tensor in the graph (shape {tensor.shape}) is not differentiable "
            f"in minitensor. Build the result out of place (mt.where, mt.cat, masked_fill), or "
            f"do it inside `with mt.no_grad():`."
        )
    tensor.data[index] = values
    increment_version(tensor)


def check_writable(tensor, symbol):
    """Refuse, before anything changes, a write that cannot mean one thing."""
    data = tensor.data
    if any(stride == 0 and n > 1 for n, stride in zip(data.shape, data.strides)):
        raise RuntimeError(
            f"{symbol}: this tensor (shape {tensor.shape}) is an expanded (broadcast) view: several "
            f"of its elements are one memory location, so an in-place write would change all "
            f"of them at once. Write into a copy (t = t.clone()), or use the out-of-place form "
            f"(t = t + 1)."
        )
    if not getattr(data.flags, "writeable", True):  # (CuPy arrays have no such flag)
        raise RuntimeError(
            f"{symbol}: this tensor's array (shape {tensor.shape}) is read-only (a view of an "
            f"expanded tensor, or a read-only NumPy array), so it cannot be changed in place. "
            f"Write into a copy (t = t.clone()), or use the out-of-place form."
        )


def _check_can_record_inplace(tensor, symbol):
    """The in-place changes PyTorch refuses while recording the graph, refused the same way."""
    view = tensor._view
    if view is None:
        if tensor.grad_fn is None and tensor._requires_grad:
            raise RuntimeError(
                f"{symbol} on a leaf tensor that requires grad (shape {tensor.shape}) would overwrite "
                f"the values gradients are taken with respect to. Update parameters inside "
                f"`with mt.no_grad():`, or use the out-of-place form."
            )
        return
    base = view.base
    if base.grad_fn is None and base._requires_grad:
        raise RuntimeError(
            f"{symbol} on a view (shape {tensor.shape}) of a leaf tensor that requires grad (shape "
            f"{base.shape}) would overwrite the values gradients are taken with respect to. "
            f"Update parameters inside `with mt.no_grad():`, or use the out-of-place form."
        )


def _refuse_view_made_without_grad(tensor, symbol):
    raise RuntimeError(
        f"{symbol}: this tensor (shape {tensor.shape}) is a view made inside no_grad() of a "
        f"tensor that requires grad, and is now changed in place with grad mode on; which "
        f"gradient that should give is ambiguous (PyTorch refuses it too). Make the view "
        f"outside no_grad(), or make the change inside no_grad() as well."
    )
