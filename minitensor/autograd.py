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

Writing your own op: subclass `Function`, write `forward` and `backward` as
above, and call `YourOp.apply(tensor, ..., option=value)`. Options (axis=,
keepdims=, ...) are passed as keywords to `forward` only; store what backward
needs on `ctx`. `backward` returns one gradient per tensor input (a tuple when
there are several), or None for an input that needs none; the gradient may
have the broadcast shape of the output: the engine sums it back down.
"""

from typing import NamedTuple

import numpy as np

# ----------------------------------------------------------------------------
# Grad mode: is the graph being recorded?
# ----------------------------------------------------------------------------

_grad_enabled = True


def is_grad_enabled():
    """True when ops record the graph (outside `no_grad()`)."""
    return _grad_enabled


class _GradMode:
    """Set grad mode inside a `with` block (or a decorated function), then restore it."""

    enabled = True

    def __enter__(self):
        global _grad_enabled
        self._previous = _grad_enabled
        _grad_enabled = self.enabled
        return self

    def __exit__(self, *exc_info):
        global _grad_enabled
        _grad_enabled = self._previous
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """`with mt.no_grad():` ops record no graph (evaluation, optimizer steps)."""

    enabled = False


class enable_grad(_GradMode):
    """`with mt.enable_grad():` record the graph again inside a `no_grad` block."""

    enabled = True


# ----------------------------------------------------------------------------
# Broadcasting, undone in one place
# ----------------------------------------------------------------------------


def unbroadcast(grad, shape):
    """Sum `grad` back down to `shape`, undoing NumPy broadcasting.

    The adjoint of broadcasting is summing: if x of shape (3, 1) was broadcast
    to (2, 3, 4) in the forward pass, each x[i, 0] was used 2 * 4 times, so
    dL/dx[i, 0] is the sum of the gradients of those 8 uses. We sum over the
    leading axes broadcasting added (axis 0 here) and over every axis where x
    had size 1 (axis 2 here), then drop the added axes.

    The engine calls this for every input of every op, so no op's backward
    needs to; an op's backward may return a gradient of the output's shape.
    """
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    reduced = grad.sum(axis=summed_axes(grad.shape, shape), keepdims=True)  # keepdims keeps x's size-1 axes
    return reduced.reshape(shape)  # and the reshape drops the leading axes broadcasting added


def summed_axes(grad_shape, shape):
    """The axes unbroadcast sums over: those broadcasting added in front, and those where
    the input had size 1. (8, 16, 64) -> (64,) sums axes (0, 1)."""
    # BEGIN SOLUTION unbroadcast
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
# The observer: how the debugging tools watch the engine
# ----------------------------------------------------------------------------

# minitensor/debug.py installs one observer when it is imported. `Function.apply` tells it
# about every forward call (that is where debug notes the line of your code that made the
# node, in `ctx.site`). While a tool such as trace or break_on is active, its
# `watching_backward` is true and the backward walk lets it run each node's backward (so
# break_on can stop inside it) and shows it what came out. The engine needs none: with no
# observer (None) everything below runs exactly as written.
_observer = None


def set_observer(observer):
    """Install the object with after_forward(function, ctx, arrays, options, output),
    watching_backward, call_backward(node, grad) and after_backward(node, grad,
    grad_inputs, summed); None removes it."""
    global _observer
    _observer = observer


# ----------------------------------------------------------------------------
# Context: one node of the graph
# ----------------------------------------------------------------------------


class Version(NamedTuple):
    """What a node remembers of an input (or its output) whose array forward saved: which
    one, and its version then.

    Every Tensor holds a version counter that each in-place change bumps. The counter is a
    one-element list, not an int, so that tensors sharing memory (a view and its base, a
    tensor and its detach()) can hold the same list: a bump through any of them is seen by
    every node that recorded any of them.
    """

    position: int  # which input (0, 1, ...), or None for the output
    data_id: int  # id() of the array, to find it among the arrays the node saved
    counter: list  # the tensor's version counter (shared by all aliases of its memory)
    seen: int  # counter[0] when the node was made


_tuple_new = tuple.__new__  # builds a Version without NamedTuple's Python-level __new__ (see _record)


def _holds(arrays, array):
    """Whether array is one of arrays, by identity (== on arrays compares elementwise)."""
    for candidate in arrays:
        if candidate is array:
            return True
    return False


class Context:
    """One recorded call of a Function: the graph node a Tensor's `grad_fn` points to.

    What a debugger shows on a node:
      name              the op's name, e.g. "Softmax"
      function          the Function subclass (Softmax), whose backward will run
      needs_input_grad  one bool per input: skip work for inputs that need no gradient
      saved_tensors     the arrays forward saved (raises once they were freed)
      saved_names       their names: save_for_backward(y=y) names one y, a positional one saved[i]
      input_names       one per input, the names forward gives its arrays (q, k, v)
      edges             one per input: its grad_fn (a Context), the leaf Tensor, or None
      input_shapes      the input shapes, so broadcasting can be undone
      site              where your code made it (mt.debug.created_at(node) formats it)
    Anything an op sets on ctx (ctx.axis = axis) stays there as a plain attribute.
    """

    _hooks = ()  # per-node list, created on first register_hook
    _retained = None  # weak reference to a non-leaf tensor that called retain_grad()
    _saved = None  # None until forward calls save_for_backward; a tuple, or a dict name -> array
    _versions = ()  # a Version for each input (and the output) whose array forward saved
    _freed = False
    site = None  # recorded by the observer (see above); the engine only carries it
    label = None  # the name you gave the tensor this node made (t.name = "scores")

    def __init__(self, function, needs_input_grad):
        self.function = function
        self.needs_input_grad = needs_input_grad

    @property
    def name(self):
        return self.function.__name__

    def __repr__(self):
        # With mt.debug loaded (it always is), `p ctx` in pdb shows the names and shapes of the
        # inputs and saved arrays, where the node was made and the module path; the engine
        # alone knows only the op and the label.
        if _observer is not None:
            return _observer.describe(self)
        label = f" {self.label!r}" if self.label else ""
        return f"<{self.name} node{label}>"

    def save_for_backward(self, *arrays, **named):
        """Keep arrays for backward (inputs, the output, or anything forward computed).

        The tools show each by name: save_for_backward(q, k, v) names them q, k and v, read off
        the call in forward's source (once per op, when a tool first shows one: recording pays
        nothing). Keywords name them explicitly, save_for_backward(at_max=x == y), where the
        argument is an expression or the call is in a helper; ctx.saved_tensors gives them back
        in the same order either way."""
        if named:
            if arrays:  # positional arrays first, as saved[i], then the named ones
                named = {**{f"saved[{i}]": array for i, array in enumerate(arrays)}, **named}
            # The keywords' dict itself, names and arrays at once: one attribute set, no tuple
            # built, so naming costs an op next to nothing (saved_tensors makes the tuple).
            self._saved = named
        else:
            self._saved = arrays

    def _saved_arrays(self):
        """The saved arrays as a tuple, whichever form forward saved them in; () if none."""
        saved = self._saved
        if type(saved) is dict:
            return tuple(saved.values())
        return saved or ()

    @property
    def saved_names(self):
        """One name per saved array: its keyword, else the argument of forward's
        save_for_backward call (y for save_for_backward(y)), else saved[i]."""
        saved = self._saved
        if type(saved) is dict:
            return tuple(saved)
        count = len(saved or ())
        return self.function.names_in_save_call(count) or tuple(f"saved[{i}]" for i in range(count))

    @property
    def input_names(self):
        """One name per input: the names forward gives its arrays (q, k, v), read off its signature."""
        return self.function.input_names(len(self.edges))

    @property
    def saved_tensors(self):
        """The arrays `save_for_backward` kept, checked for freeing and in-place changes."""
        if self._freed:
            raise RuntimeError(
                f"Trying to backward through the graph a second time: {self.name}'s saved "
                f"arrays were freed by the first backward() to save memory. If you need to "
                f"call backward twice, pass retain_graph=True to the first call."
            )
        if self._saved is None:
            raise RuntimeError(
                f"{self.name}.backward reads ctx.saved_tensors, but {self.name}.forward never "
                f"called ctx.save_for_backward(...): save there the arrays backward needs."
            )
        # Each input (and the output) whose array we saved was recorded with its version when
        # the node was made. If one of them has changed in place since, our saved values are
        # no longer the ones forward used: refuse, as PyTorch does.
        for record in self._versions:
            if record.counter[0] != record.seen:
                self._refuse_changed(record)
        saved = self._saved
        return tuple(saved.values()) if type(saved) is dict else saved

    def _refuse_changed(self, record):
        """Raise the error that names the saved array an in-place change overwrote."""
        role = "output" if record.position is None else f"input {record.position}"
        for array in self._saved_arrays():
            if id(array) == record.data_id:
                raise RuntimeError(
                    f"{self.name}.backward needs its saved {role} (a {array.dtype} tensor of shape "
                    f"{array.shape}), but an in-place operation changed that tensor (or a view or "
                    f"detach() of it, which share its memory) after {self.name} saved it: it is at "
                    f"version {record.counter[0]}; {self.name} expected version {record.seen}. Hint: "
                    f"use the out-of-place form (x = x + y instead of x += y), or change a .clone() "
                    f"of the tensor."
                )

    def free(self):
        """Drop the saved arrays (the memory an activation holds) after backward."""
        if self._saved:
            self._freed = True
            self._saved = ()

    def _record(self, inputs, output):
        """Called by apply once the output Tensor exists: finish the node."""
        edges, shapes, dtypes = [], [], []
        for t in inputs:
            # where this input's gradient goes: the node that made it, or the leaf itself
            edges.append((t.grad_fn or t) if t._requires_grad else None)
            data = t.data
            shapes.append(data.shape)
            dtypes.append(data.dtype)
        self.edges, self.input_shapes, self.input_dtypes = edges, shapes, dtypes
        self.output_shape = output.data.shape
        saved = self._saved
        if saved:  # only an array forward saved can be changed under a node's feet
            if type(saved) is dict:
                saved = saved.values()
            versions = []
            for position, t in enumerate(inputs):
                if _holds(saved, t.data):
                    counter = t._version_counter
                    versions.append(_tuple_new(Version, (position, id(t.data), counter, counter[0])))
            if _holds(saved, output.data):  # Exp, Tanh, ... save their output
                counter = output._version_counter  # (a view's output shares its input's counter)
                versions.append(_tuple_new(Version, (None, id(output.data), counter, counter[0])))
            # (tuple.__new__ rather than Version(...): that runs a Python-level __new__, and
            # _record runs for every op, so it showed in the per-op overhead benchmark)
            self._versions = versions


def _check_broadcast(op, shapes):
    """Raise the error that names op and the shapes, if the shapes do not broadcast together."""
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join(str(tuple(shape)) for shape in shapes)
        raise ValueError(
            f"{op}: shapes {listed} do not broadcast together (axes are compared "
            f"from the right; each pair must be equal, or one of them 1)"
        ) from None


_Tensor = None


def _import_tensor_class():
    """The one upward import of the engine: apply must hand back a Tensor (and walk
    must know one when it sees it), and tensor.py imports this module, so the import
    waits until the first apply or backward."""
    global _Tensor
    from .tensor import Tensor

    _Tensor = Tensor
    return Tensor


class Function:
    """Base class of every op. Subclass it, write `forward` and `backward`, call `apply`.

    forward(ctx, *arrays, **options) -> array
        Compute the output from plain arrays. Save what backward needs with
        ctx.save_for_backward(...) or as attributes of ctx.
    backward(ctx, grad) -> one gradient per input
        Given grad = dL/d(output), return dL/d(input) for each input (a tuple
        when there are several; None where ctx.needs_input_grad is False).
    returns_view
        True for ops whose output may share its first input's memory (reshape, transpose,
        expand, basic indexing): the output then shares that input's version counter, so
        an in-place change through either is seen by every node that saved the other.
    broadcasts
        True for ops whose inputs meet elementwise under NumPy broadcasting (Add,
        Mul, ...): when forward fails, apply names the shapes that do not broadcast.
    """

    returns_view = False
    broadcasts = False

    @classmethod
    def input_names(cls, count):
        """The names of count inputs, as forward's signature gives them (forward(ctx, q, k, v)
        -> q, k, v); inputs taken as *arrays are arrays[0], arrays[1], ... Read when a tool
        shows a node, never while recording: the engine pays nothing for them."""
        code = cls.forward.__code__
        named = code.co_varnames[1:code.co_argcount]  # after ctx; keywords with defaults are options
        star = code.co_varnames[code.co_argcount + code.co_kwonlyargcount] if code.co_flags & 0x04 else None
        names = []
        for position in range(count):
            if position < len(named):
                names.append(named[position])
            else:
                names.append(f"{star or 'input'}[{position - len(named)}]")
        return tuple(names)

    @classmethod
    def names_in_save_call(cls, count):
        """The names of count arrays forward saves, read off its ctx.save_for_backward(...) call
        with count arguments: a variable gives its name (q), `a if needs_b else None` gives a,
        anything else its source text. None when forward's source cannot be read or has no such
        call. Read once per op, when a tool first shows one."""
        calls = _save_calls.get(cls)
        if calls is None:
            calls = _save_calls[cls] = _read_save_calls(cls.forward)
        return next((names for names in calls if len(names) == count), None)

    @staticmethod
    def forward(ctx, *arrays, **options):
        raise NotImplementedError("a Function subclass must define forward(ctx, *arrays)")

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("a Function subclass must define backward(ctx, grad)")

    @classmethod
    def apply(cls, *inputs, **options):
        """Run forward on the inputs' arrays; record a node when a gradient is wanted."""
        Tensor = _Tensor or _import_tensor_class()
        arrays, wants_grad = [], []
        for t in inputs:
            if not isinstance(t, Tensor):
                position = next(i for i, x in enumerate(inputs) if x is t)
                raise TypeError(
                    f"{cls.__name__}.apply: argument {position} is a {type(t).__name__}, not a "
                    f"Tensor. Wrap arrays with mt.tensor(...); pass options such as axis= as keywords."
                )
            if t._view is not None:  # a view whose base changed in place gets its grad_fn re-made
                t._refresh_view(cls.__name__)
            arrays.append(t.data)
            wants_grad.append(t._requires_grad)
        needs_input_grad = tuple(wants_grad)
        ctx = Context(cls, needs_input_grad)
        try:
            output = cls.forward(ctx, *arrays, **options)
        except ValueError:
            if cls.broadcasts:  # checked only once forward failed, so the normal path pays nothing
                _check_broadcast(cls.__name__, [t.shape for t in inputs])
            raise
        if type(output) is not np.ndarray and (isinstance(output, np.generic) or not hasattr(output, "ndim")):
            output = np.asarray(output)  # NumPy reductions return scalars; a Tensor holds an array
        if _observer is not None:
            _observer.after_forward(cls, ctx, arrays, options, output)
        if not (_grad_enabled and True in needs_input_grad):
            result = Tensor._from_op(output, None)
            if cls.returns_view:
                result._become_view_of(inputs[0], cls, options)
            return result
        if output.dtype.kind == "c":
            raise TypeError(
                f"{cls.__name__}: the result is complex ({output.dtype}, shape {output.shape}) and an "
                f"input requires grad; minitensor differentiates real functions only, so complex "
                f"gradients would be wrong. Keep real and imaginary parts as two float tensors."
            )
        result = Tensor._from_op(output, ctx)
        if cls.returns_view:
            result._become_view_of(inputs[0], cls, options)
        ctx._record(inputs, result)
        return result


_save_calls = {}  # Function subclass -> the argument names of each save_for_backward call in its forward


def _read_save_calls(forward):
    """The argument names of every positional ctx.save_for_backward(...) call in forward's source."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
    except (OSError, TypeError, SyntaxError):  # no source: a class made by exec, a C function
        return []
    calls = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "save_for_backward" and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args)):
            names = []
            for argument in node.args:
                if isinstance(argument, ast.IfExp):  # a if needs_b else None: it is a, when saved
                    argument = argument.body
                names.append(argument.id if isinstance(argument, ast.Name) else ast.unparse(argument))
            calls.append(tuple(names))
    return calls


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


def _run_hooks(hooks, grad):
    for hook in hooks:
        replaced = hook(grad)
        if replaced is not None:
            grad = replaced
    return grad


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
    Tensor = _Tensor or _import_tensor_class()
    if root._view is not None:
        root._refresh_view("backward()")
    if not root.requires_grad:
        raise RuntimeError(
            f"backward(): this tensor (shape {root.shape}) does not require grad and has no "
            f"grad_fn, so there is nothing to differentiate. Create the inputs with "
            f"requires_grad=True, outside mt.no_grad()."
        )
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"backward() without a gradient needs a scalar (one-element) tensor, but this "
                f"one has shape {root.shape}. Reduce it first (loss = y.sum()), or pass dL/dy "
                f"of shape {root.shape}: y.backward(grad)."
            )
        grad = np.ones_like(root.data)
    else:
        grad = grad.data if isinstance(grad, Tensor) else grad
        grad = np.asarray(grad, dtype=root.data.dtype)
        if grad.shape != root.shape:
            raise ValueError(
                f"backward(grad): grad has shape {grad.shape} but the tensor has shape {root.shape}"
            )

    if root.grad_fn is None:  # backward on a leaf: its gradient is grad itself
        _accumulate_leaf(root, grad)
        return

    watched = _observer is not None and _observer.watching_backward  # a tool active as backward starts
    pending = {root.grad_fn: grad}  # node -> sum of the gradients reaching its output
    leaf_grads = {}  # id(leaf) -> (leaf, sum of the gradients reaching it)
    for node in topological_order(root.grad_fn):
        grad_output = pending.pop(node, None)
        if grad_output is None:  # every path to this node carried a None gradient
            continue
        if node._hooks:
            grad_output = _run_hooks(node._hooks, grad_output)
        if node._retained is not None:
            tensor = node._retained()
            if tensor is not None:
                tensor.grad = grad_output.copy() if tensor.grad is None else tensor.grad + grad_output

        if watched:
            grad_inputs = _observer.call_backward(node, grad_output)
        else:
            grad_inputs = node.function.backward(node, grad_output)
        if not isinstance(grad_inputs, tuple):
            grad_inputs = (grad_inputs,)
        if len(grad_inputs) != len(node.edges):
            raise RuntimeError(
                f"{node.name}.backward returned {len(grad_inputs)} gradient(s) for "
                f"{len(node.edges)} input(s); return one per input (None where not needed)"
            )
        summed = []  # the gradients, summed to the inputs' shapes
        for edge, grad_input, shape, dtype in zip(
            node.edges, grad_inputs, node.input_shapes, node.input_dtypes
        ):
            if edge is None or grad_input is None:
                summed.append(None)
                continue
            if type(grad_input) is not _ndarray:
                grad_input = _gradient_array(node, grad_inputs, grad_input, Tensor)
            if grad_input.shape != shape:
                try:
                    grad_input = unbroadcast(grad_input, shape)
                except ValueError as error:
                    raise RuntimeError(f"{node.name}.backward: {error}") from None
            if grad_input.dtype is not dtype:  # e.g. float32 x * float64 y: x.grad stays float32
                grad_input = grad_input.astype(dtype, copy=False)
            summed.append(grad_input)
            if type(edge) is Context:
                previous = pending.get(edge)
                pending[edge] = grad_input if previous is None else previous + grad_input
            else:
                previous = leaf_grads.get(id(edge))
                leaf_grads[id(edge)] = (edge, grad_input if previous is None else previous[1] + grad_input)
        if watched:
            _observer.after_backward(node, grad_output, grad_inputs, summed)
        yield node, grad_output, tuple(summed)
        if not retain_graph:
            node.free()

    for leaf, leaf_grad in leaf_grads.values():
        _accumulate_leaf(leaf, leaf_grad)


_ndarray = np.ndarray


def _gradient_array(node, grad_inputs, grad_input, Tensor):
    """What a backward returned for one input, as an array: a Tensor (a custom backward
    written with Tensor ops) gives its data; anything without a shape is an error."""
    if isinstance(grad_input, Tensor):
        return grad_input.data
    if hasattr(grad_input, "shape") and hasattr(grad_input, "dtype"):
        return grad_input  # a NumPy scalar or a CuPy array
    position = next(i for i, g in enumerate(grad_inputs) if g is grad_input)
    raise TypeError(
        f"{node.name}.backward returned a {type(grad_input).__name__} as the gradient of input "
        f"{position}; return an array of the input's shape {node.input_shapes[position]} (or None)"
    )


def _accumulate_leaf(leaf, grad):
    """Leaves accumulate across backward calls, as in PyTorch (hence zero_grad)."""
    if leaf._hooks:
        grad = _run_hooks(leaf._hooks, grad)
    # A copy on first store: the same array may reach two leaves (Add returns grad twice),
    # and an optimizer that updates one leaf's .grad in place must not touch the other.
    leaf.grad = grad.copy() if leaf.grad is None else leaf.grad + grad
