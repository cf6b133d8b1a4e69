"""The whole engine: `Function`, `Context`, and the backward walk.

Read this file top to bottom once and you know how minitensor computes
gradients. Nothing here knows any particular op; the ops live in `ops/`.

The picture
-----------
Every differentiable op is a `Function` subclass with two static methods on
plain arrays, side by side::

    class Log(Function):
        @staticmethod
        def forward(ctx, x):           # x: an array
            ctx.save_for_backward(x)   # what backward will need
            return np.log(x)

        @staticmethod
        def backward(ctx, grad):       # grad = dL/dy, same shape as y
            (x,) = ctx.saved_tensors
            return grad / x            # dL/dx = dL/dy * dy/dx, dy/dx = 1/x

`Log.apply(t)` runs `forward` on `t.data` and, when a gradient is wanted,
returns a Tensor whose `grad_fn` is the `Context` of that call. The Context is
the graph node: it holds the saved arrays and one *edge* per input, which
points at the input's own `grad_fn` (or, for a leaf, at the leaf Tensor).

`backward(loss)` sorts the nodes so that each runs after every node that feeds
it a gradient, then calls each `backward` once with the summed gradient of its
output, undoes broadcasting (`unbroadcast`) and passes the results along the
edges. Leaves add what reaches them into `.grad`.

Writing your own op: see `Function` below.
"""

from types import MappingProxyType

import numpy as np

from . import autograd_errors as errors
from . import grad_mode
from .grad_mode import enable_grad, is_grad_enabled, no_grad  # noqa: F401 (the engine's public names)

# ----------------------------------------------------------------------------
# Broadcasting, undone in one place
# ----------------------------------------------------------------------------


def unbroadcast(grad, shape):
    """Sum `grad` back down to `shape`, undoing NumPy broadcasting.

    The adjoint of broadcasting is summing: if x of shape (3, 1) was broadcast
    to (2, 3, 4) in the forward pass, each x[i, 0] was used 2 * 4 times, so
    dL/dx[i, 0] is the sum of the gradients of those 8 uses. Which axes to sum
    over is summed_axes (the homework task unbroadcast).

    The engine calls this for every input of every op, so no op's backward
    needs to; an op's backward may return a gradient of the output's shape.
    """
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    axes = summed_axes(grad.shape, shape)
    try:
        reduced = grad.sum(axis=axes, keepdims=True)  # keepdims keeps x's size-1 axes
    except ValueError:  # an axis out of range
        raise errors.unbroadcast_failed(grad.shape, shape, axes, None) from None
    if reduced.size != int(np.prod(shape)) or reduced.shape[reduced.ndim - len(shape):] != shape:
        raise errors.unbroadcast_failed(grad.shape, shape, axes, reduced.shape)  # summed_axes, not the op, is wrong
    return reduced.reshape(shape)  # and the reshape drops the axes that were not in shape


def summed_axes(grad_shape, shape):
    """The axes unbroadcast sums over (the homework task unbroadcast): a tuple of axes of
    grad_shape. A ValueError names both shapes when `shape` does not broadcast to grad_shape."""
    # BEGIN SOLUTION unbroadcast
    # Sum over the leading axes broadcasting added, and over every axis where the input had
    # size 1 and the gradient has more: (8, 16, 64) -> (64,) sums axes (0, 1).
    added = len(grad_shape) - len(shape)
    if added < 0 or any(size != 1 and size != grad_shape[added + i] for i, size in enumerate(shape)):
        raise ValueError(
            f"unbroadcast: a gradient of shape {tuple(grad_shape)} cannot be summed down to "
            f"shape {tuple(shape)}: {tuple(shape)} does not broadcast to {tuple(grad_shape)}"
        )
    return tuple(range(added)) + tuple(
        added + i for i, size in enumerate(shape) if size == 1 and grad_shape[added + i] != 1
    )
    # END SOLUTION


# ----------------------------------------------------------------------------
# The hook point: what attaches to the engine
# ----------------------------------------------------------------------------

# On its own the engine differentiates any program whose tensors never change in place. Two
# modules attach here on import, one feature each; the engine calls them on the lines marked
# "hook:" and nowhere else:
#   _views     views.py: views and in-place changes (a view whose base changed in place gets
#              its grad_fn re-made before use; a view output shares its input's memory record;
#              a node records the versions of the arrays it saved, checked by saved_tensors).
#   _observer  debug/observer.py: record_site() notes the line of your code that made each node
#              (ctx.site), one call per recorded op; while a tool is active (watching), it sees
#              every forward and runs each backward for it, so break_on can stop inside. None
#              (set_observer(None)) runs everything exactly as written.
_views = None
_observer = None
_record_site = None  # _observer.record_site, looked up once here: apply calls it for every recorded op


def set_observer(observer):
    """Install the object with record_site() (the site of the op being recorded, called from
    apply), watching (a tool is active: the calls below are made), after_forward(function, ctx,
    arrays, options, output), call_backward(node, grad), after_backward(node, grad, grad_inputs,
    summed), describe(ctx) and site_of(ctx, position) (made at, module, input source); None removes it."""
    global _observer, _record_site
    _observer = observer
    _record_site = observer.record_site if observer is not None else None


_Tensor = None


def _import_upward():
    """The engine's one upward import: apply must hand back a Tensor (and walk must know one
    when it sees it), and tensor.py and views.py import this module, so the import waits until
    the first apply or backward."""
    global _Tensor, _views
    from . import views
    from .tensor import Tensor

    _Tensor, _views = Tensor, views
    return Tensor


# ----------------------------------------------------------------------------
# Context: one node of the graph
# ----------------------------------------------------------------------------


class Context:
    """One recorded call of a Function: the graph node a Tensor's `grad_fn` points to.

    What a debugger shows on a node:
      name              the op's name, e.g. "Softmax"
      function          the Function subclass (Softmax), whose backward will run
      needs_input_grad  one bool per input: skip work for inputs that need no gradient
      saved_tensors     the arrays forward saved, for backward (raises once they were freed)
      saved             the same, read-only, by name, for the tools: {"y": y} ({} once freed)
      saved_arrays      the same as a tuple (() once freed); saved_names their names, in order
      freed             whether backward has freed them (retain_graph=False)
      input_names       one per input, the names forward gives its arrays (q, k, v)
      edges             one per input: its grad_fn (a Context), the leaf Tensor, or None
      input_shapes      the input shapes, so broadcasting can be undone
      site              where your code made it (mt.debug.created_at(node) formats it,
                        mt.debug.module_path(node) names the module that made it)
    The tools (mt.debug, mt.viz, the backward page, gradcheck) read a node through these names
    only. Anything an op sets on ctx (ctx.axis = axis) stays there as a plain attribute.
    """

    _hooks = ()  # per-node list, created on first register_hook
    _retained = None  # weak reference to a non-leaf tensor that called retain_grad()
    _saved = None  # None until forward calls save_for_backward; a tuple, or a dict name -> array
    _versions = ()  # views.Version records of the saved arrays (see views.py)
    _freed = False
    site = None  # recorded by the observer (see the hook point); the engine only carries it
    label = None  # the name you gave the tensor this node made (t.name = "scores")

    def __init__(self, function, needs_input_grad):
        self.function = function
        self.needs_input_grad = needs_input_grad

    @property
    def name(self):
        return self.function.__name__

    def __repr__(self):
        # With mt.debug loaded (it always is), `p ctx` in pdb shows inputs, saved arrays, site
        if _observer is not None:  # hook: mt.debug names inputs and saved arrays
            return _observer.describe(self)
        label = f" {self.label!r}" if self.label else ""
        return f"<{self.name} node{label}>"

    def save_for_backward(self, *arrays, **named):
        """Keep arrays for backward (inputs, the output, or anything forward computed).

        The tools show each by name: save_for_backward(q, k, v) names them q, k and v, read off
        the call in forward's source (node_names.py, once per op, when a tool first shows one).
        Keywords name them explicitly, save_for_backward(at_max=x == y), where the argument is
        an expression or the call is in a helper; ctx.saved_tensors gives them back in the same
        order either way."""
        if named:
            if arrays:  # positional arrays first, as saved[i], then the named ones
                named = {**{f"saved[{i}]": array for i, array in enumerate(arrays)}, **named}
            self._saved = named  # the keywords' dict itself: naming costs an op next to nothing
        else:
            self._saved = arrays

    @property
    def saved_arrays(self):
        """The saved arrays as a tuple, whichever form forward saved them in: () if none, or once
        backward freed them. Unlike saved_tensors it never raises (the tools show what is there)."""
        saved = self._saved
        return tuple(saved.values()) if type(saved) is dict else saved or ()

    @property
    def saved_names(self):
        """One name per saved array (node_names.py says how they are read)."""
        from . import node_names  # read off forward's source when a tool first shows a node

        return node_names.saved_names(self.function.forward, self._saved)

    @property
    def saved(self):
        """The saved arrays by name, read-only ({"y": y}); empty once backward freed them."""
        return MappingProxyType(dict(zip(self.saved_names, self.saved_arrays)))

    @property
    def freed(self):
        """Whether backward freed the saved arrays (run it with retain_graph=True to keep them)."""
        return self._freed

    @property
    def input_names(self):
        """One name per input: the names forward gives its arrays (q, k, v)."""
        from . import node_names

        return node_names.input_names(self.function.forward, len(self.edges))

    @property
    def saved_tensors(self):
        """The arrays `save_for_backward` kept, checked for freeing and in-place changes."""
        if self._freed:
            raise errors.saved_arrays_freed(self)
        if self._saved is None:
            raise errors.nothing_saved(self)
        if self._versions:  # hook: refuse an array an in-place change overwrote (views.py)
            _views.check_versions(self)
        saved = self._saved
        return tuple(saved.values()) if type(saved) is dict else saved

    def free(self):
        """Drop the saved arrays (the memory an activation holds) after backward."""
        if self._saved:
            self._freed = True
            self._saved = ()

    def _record(self, inputs, output_shape):
        """Called by apply when a gradient is wanted: where each input's gradient will go."""
        edges, shapes, dtypes = [], [], []
        for t in inputs:
            # the node that made this input, or the leaf itself; None if it needs no gradient
            # (_grad_fn, not the grad_fn property: apply has already refreshed any view)
            edges.append((t._grad_fn or t) if t._requires_grad else None)
            data = t.data
            shapes.append(data.shape)
            dtypes.append(data.dtype)
        self.edges, self.input_shapes, self.input_dtypes = edges, shapes, dtypes
        self.output_shape = output_shape


# ----------------------------------------------------------------------------
# Function: an op, and apply, which runs it and records the node
# ----------------------------------------------------------------------------


class Function:
    """Base class of every op. Subclass it, write `forward` and `backward`, call
    `YourOp.apply(tensor, ..., option=value)`: options (axis=, keepdims=) go to forward only.

    forward(ctx, *arrays, **options) -> array
        Compute the output from plain arrays. Save what backward needs with
        ctx.save_for_backward(...) or as attributes of ctx.
    backward(ctx, grad) -> one gradient per input
        Given grad = dL/d(output), return dL/d(input) for each input (a tuple
        when there are several; None where ctx.needs_input_grad is False). A gradient
        may have the output's broadcast shape: the engine sums it back down.
    returns_view
        True for ops whose output may share its first input's memory (reshape, transpose,
        expand, basic indexing): see views.py.
    broadcasts
        True for ops whose inputs meet elementwise under NumPy broadcasting (Add,
        Mul, ...): when forward fails, apply names the shapes that do not broadcast.
    """

    returns_view = False
    broadcasts = False

    @staticmethod
    def forward(ctx, *arrays, **options):
        raise NotImplementedError("a Function subclass must define forward(ctx, *arrays)")

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("a Function subclass must define backward(ctx, grad)")

    @classmethod
    def apply(cls, *inputs, **options):
        """Run forward on the inputs' arrays; record a node when a gradient is wanted."""
        Tensor = _Tensor or _import_upward()
        arrays, wants_grad = [], []
        for t in inputs:
            if not isinstance(t, Tensor):
                raise errors.not_a_tensor(cls, inputs, t)
            if t._view is not None:  # hook: a view whose base changed in place gets its grad_fn re-made
                _views.refresh(t, cls.__name__)
            arrays.append(t.data)
            wants_grad.append(t._requires_grad)
        needs_input_grad = tuple(wants_grad)
        records = grad_mode.enabled and True in needs_input_grad

        ctx = Context(cls, needs_input_grad)
        try:
            output = cls.forward(ctx, *arrays, **options)
        except ValueError:
            if cls.broadcasts:  # checked only once forward failed, so the normal path pays nothing
                errors.check_broadcast(cls.__name__, [t.shape for t in inputs])
            raise
        if type(output) is not np.ndarray and (isinstance(output, np.generic) or not hasattr(output, "ndim")):
            output = np.asarray(output)  # NumPy reductions return scalars; a Tensor holds an array
        if records and output.dtype.kind == "c":
            raise errors.complex_result(cls, output)

        if _observer is not None:  # hook: mt.debug notes where your code made this node, and tells the tools
            if records:
                ctx.site = _record_site()
            if _observer.watching:
                _observer.after_forward(cls, ctx, arrays, options, output)
        result = Tensor._from_op(output, ctx if records else None)
        if records:
            ctx._record(inputs, output.shape)
        if cls.returns_view:  # hook: a view output shares its input's memory record (views.py)
            _views.become_view_of(result, inputs[0], cls, options)
        if records and ctx._saved:  # hook: the node remembers the versions of the arrays it saved
            _views.record_versions(ctx, inputs, result)
        return result


# ----------------------------------------------------------------------------
# The backward walk
# ----------------------------------------------------------------------------


def topological_order(root):
    """The nodes reachable from `root`, each before every node it sends gradient to
    (the homework task topological_order); no recursion, so a 100,000-op chain is fine."""
    # BEGIN SOLUTION topological_order
    # An iterative depth-first search: a node is finished once all its inputs are;
    # reversing the finish order puts every consumer before its producers.
    finished, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            finished.append(node)
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        for edge in node.edges:
            if type(edge) is Context and edge not in visited:
                stack.append((edge, False))
    finished.reverse()
    return finished
    # END SOLUTION


def backward(root, grad=None, retain_graph=False):
    """Compute d(root)/d(leaf) for every leaf that requires grad; add it to leaf.grad.

    This is what `Tensor.backward` calls. `grad` is dL/d(root) and may be
    omitted only for a one-element root (it is then 1).
    """
    for _ in walk(root, grad, retain_graph):
        pass


def walk(root, grad=None, retain_graph=False):
    """The backward pass one node at a time: a generator that runs each node's backward and
    yields (node, grad_output, grad_inputs), the gradients already summed to the inputs'
    shapes. Leaves receive their gradients when the generator is exhausted.
    mt.debug.backward_steps is built on it."""
    if _Tensor is None:  # a backward before any op ran (on a leaf): views and Tensor not yet imported
        _import_upward()
    if root._view is not None:  # hook: views.py
        _views.refresh(root, "backward()")
    grad = _first_gradient(root, grad)
    if root.grad_fn is None:  # backward on a leaf: its gradient is grad itself
        _accumulate_leaf(root, grad)
        return

    watched = _observer is not None and _observer.watching  # hook: a tool active as backward starts
    pending = {root.grad_fn: grad}  # node -> sum of the gradients reaching its output
    leaf_grads = {}  # id(leaf) -> (leaf, sum of the gradients reaching it)
    for node in topological_order(root.grad_fn):
        grad_output = pending.pop(node, None)
        if grad_output is None:  # every path to this node carried a None gradient
            continue
        if node._hooks or node._retained is not None:
            grad_output = _tensor_hooks(node, grad_output)

        if watched:  # hook: the tool runs backward, so that break_on can stop inside it
            grad_inputs = _observer.call_backward(node, grad_output)
        else:
            grad_inputs = node.function.backward(node, grad_output)
        if not isinstance(grad_inputs, tuple):  # one input: backward may return its gradient alone
            grad_inputs = (grad_inputs,)
        summed = _pass_to_inputs(node, grad_inputs, pending, leaf_grads)
        if watched:  # hook: the tool sees what came out
            _observer.after_backward(node, grad_output, grad_inputs, summed)
        yield node, grad_output, summed
        if not retain_graph:
            node.free()

    for leaf, leaf_grad in leaf_grads.values():
        _accumulate_leaf(leaf, leaf_grad)


def _first_gradient(root, grad):
    """dL/d(root) as an array of root's shape: ones for a one-element root, else the one given."""
    if not root.requires_grad:
        raise errors.nothing_to_differentiate(root)
    if grad is None:
        if root.data.size != 1:
            raise errors.not_a_scalar(root)
        return np.ones_like(root.data)
    grad = np.asarray(grad.data if isinstance(grad, _Tensor) else grad)
    if grad.dtype.kind == "c" and root.data.dtype.kind != "c":
        raise errors.complex_first_gradient(grad, root)
    grad = grad.astype(root.data.dtype, copy=False)
    if grad.shape != root.shape:
        raise errors.wrong_first_gradient(grad, root)
    return grad


def _run_hooks(hooks, grad):
    """register_hook's hooks in order; a hook that returns an array replaces grad."""
    for hook in hooks:
        replaced = hook(grad)
        if replaced is not None:
            grad = replaced
    return grad


def _tensor_hooks(node, grad):
    """What register_hook and retain_grad asked for on the tensor this node made."""
    grad = _run_hooks(node._hooks, grad)
    if node._retained is not None:
        tensor = node._retained()
        if tensor is not None:
            tensor.grad = _as_array(grad.copy() if tensor.grad is None else tensor.grad + grad)
    return grad


def _pass_to_inputs(node, grad_inputs, pending, leaf_grads):
    """Send node's backward results along its edges: each summed down to its input's shape
    (unbroadcast), cast to its input's dtype, and added to what that input's node (pending)
    or leaf (leaf_grads) has received. Returns them, one per input (None where none goes)."""
    if len(grad_inputs) != len(node.edges):
        raise errors.wrong_gradient_count(node, grad_inputs)
    summed = []
    for edge, grad_input, shape, dtype in zip(node.edges, grad_inputs, node.input_shapes, node.input_dtypes):
        if edge is None or grad_input is None:
            summed.append(None)
            continue
        if type(grad_input) is not _ndarray:  # a Tensor (a backward written with Tensor ops), a CuPy array
            grad_input = grad_input.data if isinstance(grad_input, _Tensor) else grad_input
            if not (hasattr(grad_input, "shape") and hasattr(grad_input, "dtype")):
                raise errors.not_an_array(node, grad_inputs, grad_input)
        if grad_input.shape != shape:
            if not _fits(shape, grad_input.shape, node.output_shape):  # the op's backward is wrong: say so
                # hook: mt.debug says where the node was made and where the input came from
                where = _observer.site_of(node, len(summed)) if _observer is not None else (None,) * 3
                raise errors.wrong_gradient_shape(node, len(summed), grad_input.shape, shape, where)
            grad_input = unbroadcast(grad_input, shape)
        if grad_input.dtype is not dtype:  # e.g. float32 x * float64 y: x.grad stays float32
            grad_input = grad_input.astype(dtype, copy=False)
        summed.append(grad_input)
        if type(edge) is Context:
            previous = pending.get(edge)
            pending[edge] = grad_input if previous is None else previous + grad_input
        else:
            previous = leaf_grads.get(id(edge))
            leaf_grads[id(edge)] = (edge, grad_input if previous is None else previous[1] + grad_input)
    return tuple(summed)


_ndarray = np.ndarray


def _fits(shape, grad_shape, output_shape):
    """Whether an input of `shape` broadcasts to a gradient of `grad_shape` (then unbroadcast
    can sum the gradient down to it; else the op's backward returned a wrong shape), with any
    leading axes the gradient adds being the output's (broadcasting in forward is what adds
    them: a (3, 4, 5) gradient for a (4, 5) input of a (4, 5) output is a wrong backward)."""
    try:
        fits = np.broadcast_shapes(shape, grad_shape) == tuple(grad_shape)
    except ValueError:
        return False
    added = len(grad_shape) - len(shape)  # leading axes the gradient has and the input has not
    if not fits or added <= 0 or output_shape is None:
        return fits
    if len(grad_shape) > len(output_shape):
        return False
    output_leading = tuple(output_shape)[len(output_shape) - len(grad_shape):][:added]  # right-aligned, as broadcasting
    return tuple(grad_shape[:added]) == output_leading


def _accumulate_leaf(leaf, grad):
    """Leaves accumulate across backward calls, as in PyTorch (hence zero_grad)."""
    grad = _run_hooks(leaf._hooks, grad)
    # A copy on first store: the same array may reach two leaves (Add returns grad twice),
    # and an optimizer that updates one leaf's .grad in place must not touch the other.
    leaf.grad = _as_array(grad.copy() if leaf.grad is None else leaf.grad + grad)


def _as_array(grad):
    """NumPy gives a scalar (np.float64) for arithmetic on 0-d arrays; a .grad stays an array, so
    that in-place updates of it (clip_grad_norm_, optimizers) reach it, as for any other shape."""
    return np.asarray(grad) if isinstance(grad, np.generic) else grad
