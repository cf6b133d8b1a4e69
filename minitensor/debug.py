"""Debugging backward: step through it node by node, trace it, break on an op, find the
first NaN, find the op whose backward is wrong.

    steps = mt.debug.backward_steps(loss)       # a generator: one node's backward per step
    with mt.debug.trace(): loss.backward()      # one printed line per node
    with mt.debug.break_on(op="Softmax"):       # pdb inside Softmax's backward
        loss.backward()
    with mt.debug.detect_anomaly():             # names the op that made the first NaN
        loss = model(x).sum(); loss.backward()
    mt.debug.find_wrong_op(fn, x, w)            # which op's backward disagrees with finite differences

Where each op was made in your code is recorded always (`mt.debug.created_at(node)`): the line
of your code, and for an op made inside models/ (or a forward method of your own Module) also
that line and the lines in between, so two layer norms of one block can be told apart. A parameter of a Module
shows its name (`block.ln1.weight`) wherever the tools show a leaf (`mt.debug.leaf_labels`).
"""

import dataclasses
import linecache
import os
import sys
import weakref

import numpy as np

from . import autograd
from .autograd import walk
from .nn.module import Module

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_MODELS = os.path.join(os.path.dirname(_PACKAGE.rstrip(os.sep)), "models") + os.sep
_LIBRARY = (_PACKAGE, _MODELS)
_MODULE_CALL = Module.__call__.__code__
_getframe = sys._getframe
_tools = []  # the active tools, innermost last


# ----------------------------------------------------------------------------
# Where each node was made
# ----------------------------------------------------------------------------


# A node's site takes one of two forms. When your code called the op (or the Tensor method that
# did), the common case, it is the pair (code, instruction offset) of your frame. Otherwise it is
# the triple (frames, model, part): frames holds such a pair for each frame from the op's caller
# out to the first frame of your code, innermost first; model is a weak reference to the
# outermost Module whose forward made the node (the one your code called), part to the submodule
# of it that did (its ln1, attn, ...), each None when there is none. Plain tuples, and no line
# number or source looked up until shown (created_at): every node records one, few are looked at.


# Which part of the code a file belongs to, by filename: minitensor's engine and tensor code (to
# step out of), models/ (kept, with the line of yours that led there), or yours. A dict lookup
# per frame: the site is recorded for every op, and two startswith calls a frame showed in the
# per-op overhead benchmark. (A code object's filename string is shared by all its functions,
# and its hash is cached, so the lookup costs about as much as one attribute access.)
_ENGINE, _MODELS_CODE, _YOURS = "minitensor", "models", "yours"
_places = {}  # filename -> _ENGINE, _MODELS_CODE or _YOURS


def _place(filename):
    place = _places.get(filename)
    if place is None:
        if filename.startswith(_PACKAGE):
            place = _ENGINE
        elif filename.startswith(_MODELS):
            place = _MODELS_CODE
        else:
            place = _YOURS
        _places[filename] = place
    return place


def _unpack(site):
    """(frames, model, part) of either form of site."""
    if len(site) == 2:
        return (site,), None, None
    return site


def _record_site(frame):
    """The site of the op whose caller runs in frame (see above). Frames inside minitensor/
    are skipped; frames inside models/ (and forward methods of your own Modules) are kept, up
    to and including the first other frame of your code."""
    frames, module_calls = [], []
    while frame is not None:
        code = frame.f_code
        place = _places.get(code.co_filename) or _place(code.co_filename)
        if place is _ENGINE:
            if code is _MODULE_CALL:
                module_calls.append(frame)
        else:
            frames.append((code, frame.f_lasti))
            if place is _YOURS and code.co_name != "forward":
                break  # your code (a forward method of yours goes on to the Module that called it)
        frame = frame.f_back
    if not module_calls:
        return tuple(frames), None, None
    model = module_calls[-1].f_locals["self"]
    model_ref = _ref(model)  # (the one plain weak reference to model, made once and shared)
    if model_ref is not _last_named[0]:  # every op of a forward pass has the same model
        _remember_root_name(model, frame)
        _last_named[0] = model_ref
    part = module_calls[-2].f_locals["self"] if len(module_calls) > 1 else None
    return tuple(frames), model_ref, part and _ref(part)


_ref = weakref.ref
_last_named = [None]  # weak reference to the model _remember_root_name saw last


def _line(code, offset):
    for start, end, line in code.co_lines():
        if start <= offset < end:
            return line
    return code.co_firstlineno


def _short(filename):
    """models/layernorm.py for the library's files; yours relative to the working directory
    when inside it."""
    if filename.startswith(_LIBRARY):
        return os.path.relpath(filename, os.path.dirname(_PACKAGE.rstrip(os.sep)))
    short = os.path.relpath(filename)
    return filename if short.startswith("..") else short


def _format_frame(code, offset, with_source=True):
    line = _line(code, offset)
    where = f"{_short(code.co_filename)}:{line}"
    source = linecache.getline(code.co_filename, line).strip() if with_source else ""
    return f"{where}: {source}" if source else where


def created_at(node):
    """Where node (a Context, or a Tensor's grad_fn) was made, as text: "file:line: source" of
    your code; for a node made inside models/, the library's line first, then "<-" each line
    that led there, ending at yours (None for a leaf, or when nothing was recorded)."""
    node = getattr(node, "grad_fn", node)
    site = getattr(node, "site", None)
    if site is None or not _unpack(site)[0]:
        return None
    *library, user = _unpack(site)[0]
    if not library:
        return _format_frame(*user)
    parts = [_format_frame(*library[0])] + [_format_frame(*f, with_source=False) for f in library[1:]]
    return " <- ".join(parts + [_format_frame(*user)])


# ----------------------------------------------------------------------------
# The names you gave: parameters of a Module
# ----------------------------------------------------------------------------

_root_names = weakref.WeakKeyDictionary()  # outermost Module -> the name your code calls it


def _remember_root_name(module, user_frame):
    """The first time a model is seen, the name of the variable that holds it in the frame of
    your code that called it (block), or its class name in lower case."""
    if module in _root_names:
        return
    name = type(module).__name__.lower()
    if user_frame is not None:
        for scope in (user_frame.f_locals, user_frame.f_globals):
            found = next((key for key, value in scope.items() if value is module), None)
            if found is not None:
                name = found
                break
    _root_names[module] = name


def _parameter_names(modules):
    """id(parameter) -> "block.ln1.weight" for every parameter of the given models."""
    names = {}
    for module in modules:
        prefix = _root_names.get(module, type(module).__name__.lower())
        for name, parameter in module.named_parameters():
            names.setdefault(id(parameter), f"{prefix}.{name}")
    return names


def _model_of(node):
    """The outermost Module whose forward made node, or None."""
    model = _unpack(node.site)[1] if node.site is not None else None
    return model() if model is not None else None


def part_of(node):
    """(name, module) of the submodule of the model that made node ("attn", the attention
    module), or None for a node your code or the model's own forward made."""
    _, model, part = _unpack(node.site) if node.site is not None else (None, None, None)
    if part is None:
        return None
    model, part = model(), part()
    if model is None or part is None:
        return None
    for name, module in model.named_modules():
        if module is part:
            return name, part
    return None


def _models_of(nodes):
    """The outermost Modules whose forward made any of nodes, each once."""
    models = {}
    for node in nodes:
        module = _model_of(node)
        if module is not None:
            models[id(module)] = module
    return list(models.values())


def leaf_labels(root):
    """id(leaf) -> its label for every leaf of the graph that made root: the name you gave it
    (t.name), else its name in the model that used it (block.ln1.weight), else None."""
    if isinstance(root, autograd.Context):
        nodes = autograd.topological_order(root)
    else:
        nodes = autograd.topological_order(root.grad_fn) if root.grad_fn is not None else []
    names = _parameter_names(_models_of(nodes))
    labels = {}
    leaves = [root] if not nodes else [e for n in nodes for e in n.edges
                                        if e is not None and type(e) is not autograd.Context]
    for leaf in leaves:
        labels[id(leaf)] = leaf.name if leaf.name is not None else names.get(id(leaf))
    return labels


# ----------------------------------------------------------------------------
# The observer autograd calls, and the tools it forwards to
# ----------------------------------------------------------------------------


class _Observer:
    """Installed in autograd on import: records every recorded node's site and forwards each
    forward and backward call to the active tools."""

    watching_backward = False  # True while a tool is active

    def after_forward(self, function, ctx, arrays, options, output):
        if True in ctx.needs_input_grad and autograd._grad_enabled:  # a node will be recorded
            frame = _getframe(2)  # 0 here, 1 Function.apply, 2 its caller
            code = frame.f_code
            place = _places.get(code.co_filename) or _place(code.co_filename)  # (inlined: every op)
            # Step out of Tensor methods and F wrappers (x.sigmoid() is two frames deep) to their
            # caller, here rather than in _record_site: the common case then costs no frame walk.
            while place is _ENGINE and code is not _MODULE_CALL and frame.f_back is not None:
                frame = frame.f_back
                code = frame.f_code
                place = _places.get(code.co_filename) or _place(code.co_filename)
            if place is _YOURS and code.co_name != "forward":
                ctx.site = (code, frame.f_lasti)  # your code called the op: the common case
            else:
                ctx.site = _record_site(frame)
        if _tools:
            for tool in list(_tools):
                tool.after_forward(function, ctx, arrays, options, output)

    def call_backward(self, node, grad_output):
        for tool in reversed(_tools):
            if tool.wants_to_stop(node, grad_output):
                tool.stops += 1
                return _debug_backward(node, grad_output)
        return node.function.backward(node, grad_output)

    def after_backward(self, node, grad_output, grad_inputs, summed):
        for tool in list(_tools):
            tool.after_backward(node, grad_output, grad_inputs, summed)


_observer = _Observer()
autograd.set_observer(_observer)


def _debug_backward(node, grad):
    """Run node's backward under pdb (mt.debug.break_on stopped here). Named locals: node,
    op, made_at, grad (the incoming gradient, as the op's backward calls it), saved (what
    forward saved). `step` twice enters the op's backward (the line below the breakpoint)."""
    op = node.name  # noqa: F841 (named locals for you to print)
    made_at = created_at(node)  # noqa: F841 (not `where`: that is a pdb command)
    saved = node._saved  # noqa: F841
    breakpoint()  # break_on: `p grad`, `p saved`, then `step` twice to enter the op's backward
    grad_inputs = node.function.backward(node, grad)
    return grad_inputs


class Tool:
    """Base of the debugging tools (trace, break_on, detect_anomaly, and mt.viz.html's recorders):
    a context manager that registers while active and watches forward and backward through the
    observer. Override after_forward, wants_to_stop or after_backward; each does nothing here."""

    stops = 0

    def __enter__(self):
        _tools.append(self)
        _observer.watching_backward = True
        return self

    def __exit__(self, *exc_info):
        _tools.remove(self)
        _observer.watching_backward = bool(_tools)
        return False

    def after_forward(self, function, ctx, arrays, options, output):
        pass

    def wants_to_stop(self, node, grad_output):
        return False

    def after_backward(self, node, grad_output, grad_inputs, summed):
        pass


# ----------------------------------------------------------------------------
# Stepping
# ----------------------------------------------------------------------------


@dataclasses.dataclass
class Step:
    """One node's backward: what came in, what went out, what it had saved. input_labels names
    each input: the label of a leaf (x, block.ln1.weight), the op that made it, or None."""

    index: int
    op: str
    node: autograd.Context
    created_at: str
    label: str
    grad_output: np.ndarray
    grad_inputs: tuple  # one per input, summed to the input's shape (None where not needed)
    saved: tuple
    input_labels: tuple

    def __str__(self):
        return _describe(self.index, self.node, self.grad_output, self.grad_inputs, self.input_labels)


def backward_steps(loss, grad=None, retain_graph=False):
    """Run backward one node at a time: a generator of Steps. Run to the end, it leaves
    exactly the gradients loss.backward() leaves; stop early and the rest is not computed."""
    labels = leaf_labels(loss)
    for index, (node, grad_output, grad_inputs) in enumerate(walk(loss, grad, retain_graph)):
        yield Step(index, node.name, node, created_at(node), node.label, grad_output, grad_inputs,
                   node._saved or (), _input_labels(node, labels))


def _input_labels(node, labels):
    """For each input of node: a leaf's label, "<Op>" for an op's output, None for a constant."""
    names = []
    for edge in node.edges:
        if edge is None:
            names.append(None)
        elif type(edge) is autograd.Context:
            names.append(edge.label or edge.name)
        else:
            names.append(labels.get(id(edge)) or f"leaf {edge.shape}")
    return tuple(names)


# ----------------------------------------------------------------------------
# Tracing
# ----------------------------------------------------------------------------


def grad_norm(array):
    """The L2 norm of an array, in float64 (what the tools print as |g|)."""
    return float(np.sqrt(np.sum(np.asarray(array, dtype=np.float64) ** 2)))


def _describe(index, node, grad_output, summed, input_labels):
    label = f" {node.label!r}" if node.label else ""
    where = created_at(node)
    where = f"  [{where}]" if where else ""
    inputs = ", ".join(
        "-" if g is None else f"{g.shape} |{grad_norm(g):.3g}|" + (f" to {name}" if name else "")
        for g, name in zip(summed, input_labels))
    return (f"{index:4d} {node.name}{label}{where}\n"
            f"       grad out {grad_output.shape} |{grad_norm(grad_output):.3g}|  ->  grad in {inputs}")


class trace(Tool):
    """`with mt.debug.trace(): loss.backward()` prints one line per node as backward runs: the op,
    where it was made, the shapes and norms of the gradients, where each goes (a leaf by name:
    x, block.ln1.weight), and every broadcast reduction."""

    def __init__(self, file=None):
        self.file = file
        self.index = 0
        self.names = {}  # id(parameter) -> its name in the model, filled as models are met

    def _labels(self, node):
        for model in _models_of([node]):
            if id(model) not in self.names:
                self.names[id(model)] = _parameter_names([model])
        labels = {}
        for edge in node.edges:
            if edge is not None and type(edge) is not autograd.Context:
                labels[id(edge)] = edge.name or next(
                    (names[id(edge)] for names in self.names.values() if id(edge) in names), None)
        return _input_labels(node, labels)

    def after_backward(self, node, grad_output, grad_inputs, summed):
        out = self.file or sys.stdout
        print(_describe(self.index, node, grad_output, summed, self._labels(node)), file=out)
        for position, (raw, final) in enumerate(zip(grad_inputs, summed)):
            if raw is not None and final is not None and raw.shape != final.shape:
                axes = autograd.summed_axes(raw.shape, final.shape)
                print(f"       input {position}: summed axes {axes}: {raw.shape} -> {final.shape}", file=out)
        self.index += 1


# ----------------------------------------------------------------------------
# Breaking
# ----------------------------------------------------------------------------


def known_ops():
    """The names of every Function subclass defined so far (the ops break_on can stop in)."""
    names, stack = set(), [autograd.Function]
    while stack:
        for subclass in stack.pop().__subclasses__():
            names.add(subclass.__name__)
            stack.append(subclass)
    return sorted(names)


class break_on(Tool):
    """`with mt.debug.break_on(op="Softmax"): loss.backward()` calls breakpoint() inside each
    matching node's backward. Every condition given must hold: op (the Function's name, as in
    the trace: "Softmax"), label (a tensor's .name), nan=True (the incoming gradient has a NaN or
    Inf), grad_norm_above (its norm).

    pdb stops in debug._debug_backward, one line above the call of the op's backward, with the
    named locals grad (the incoming gradient, the name every op's backward gives it), saved,
    node, op and made_at (the line of your code that made the node). `step` twice enters the op's
    backward. A block that ends without a single stop prints so."""

    def __init__(self, op=None, label=None, nan=False, grad_norm_above=None, file=None):
        if op is None and label is None and not nan and grad_norm_above is None:
            raise ValueError("break_on: give op=, label=, nan=True or grad_norm_above=")
        if op is not None and op not in known_ops():
            known = known_ops()
            close = [name for name in known if name.lower() == str(op).lower()]
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"break_on: no op is called {op!r}.{hint} The ops: {', '.join(known)}")
        self.op, self.label, self.nan, self.grad_norm_above = op, label, nan, grad_norm_above
        self.file = file
        self.stops = 0

    def wants_to_stop(self, node, grad_output):
        if self.op is not None and node.name != self.op:
            return False
        if self.label is not None and node.label != self.label:
            return False
        if self.nan and np.all(np.isfinite(grad_output)):
            return False
        if self.grad_norm_above is not None and not grad_norm(grad_output) > self.grad_norm_above:
            return False
        return True

    def __exit__(self, *exc_info):
        super().__exit__(*exc_info)
        if self.stops == 0 and exc_info[0] is None:
            asked = ", ".join(f"{key}={value!r}" for key, value in (
                ("op", self.op), ("label", self.label), ("nan", self.nan or None),
                ("grad_norm_above", self.grad_norm_above)) if value is not None)
            print(f"break_on({asked}): no node's backward matched, so it never stopped "
                  f"(did backward() run inside the block?)", file=self.file or sys.stdout)
        return False


# ----------------------------------------------------------------------------
# Anomalies
# ----------------------------------------------------------------------------


class AnomalyError(FloatingPointError):
    """An op made a NaN in the forward pass, or a NaN or Inf in the backward pass, from inputs
    without one."""


def _has_nan(array):
    array = np.asarray(array)
    return array.dtype.kind in "fc" and bool(np.isnan(array).any())


def _not_finite(array):
    array = np.asarray(array)
    return array.dtype.kind in "fc" and not np.all(np.isfinite(array))


def _what(array):
    array = np.asarray(array)
    kinds = [name for name, mask in (("nan", np.isnan(array)), ("inf", np.isinf(array))) if mask.any()]
    count = int((~np.isfinite(array)).sum())
    return f"{' and '.join(kinds)} ({count} of {array.size} values)"


def _made_at(node):
    where = created_at(node)
    return f"\n  made at {where}" if where else ""


class detect_anomaly(Tool):
    """`with mt.debug.detect_anomaly():` around forward and backward raises AnomalyError naming
    the first op that made a bad value, where it was made, and the shapes. The rule:

    forward   a NaN in an op's output while its inputs had none. An infinity is allowed: a
              mask puts -inf in the scores on purpose (masked_fill(mask, float("-inf"))), and
              softmax turns it into an exact 0. But a softmax row or an attention query with
              every entry -inf or hidden is reported: minitensor gives it zero weights (a zero
              output, no gradient) where torch.softmax gives NaN, and a padding mask that hides
              everything is a bug to see, not to train through.
    backward  a NaN or Inf in the gradient an op's backward gives an input while the gradient
              it received was finite (PyTorch's anomaly mode checks this side only).

    The ops that merely pass a bad value on are not blamed. Around backward() alone (the forward
    ran outside the block), a bad gradient from an op whose saved values already held a NaN is
    traced back through the graph to the first op in forward order that saved one, and the
    error says to wrap the forward too."""

    def __init__(self):
        self.seen = weakref.WeakSet()  # the nodes whose forward this tool checked

    def after_forward(self, function, ctx, arrays, options, output):
        self.seen.add(ctx)
        empty = _rows_with_nothing_visible(function, ctx, output)
        if empty:
            rows, total, index = empty
            shapes = ", ".join(str(np.shape(a)) for a in arrays)
            where = created_at(ctx) if autograd._grad_enabled and True in ctx.needs_input_grad else None
            raise AnomalyError(
                f"detect_anomaly: {function.__name__}'s forward met {rows} of {total} rows (the first at "
                f"index {index}) whose entries are all -inf or hidden by the mask, in inputs of shapes "
                f"{shapes}. minitensor gives such a row zero weights and no gradient (torch.softmax "
                f"gives NaN); a mask that hides every key of a query is usually a bug (a padding "
                f"mask built the wrong way round?)." + (f"\n  made at {where}" if where else "")
            )
        if _has_nan(output) and not any(_has_nan(a) for a in arrays):
            shapes = ", ".join(str(np.shape(a)) for a in arrays)
            where = created_at(ctx) if autograd._grad_enabled and True in ctx.needs_input_grad else None
            raise AnomalyError(
                f"detect_anomaly: {function.__name__}'s forward produced {_what(output)} in its output of "
                f"shape {np.shape(output)} from inputs of shapes {shapes} without NaN"
                + (f"\n  made at {where}" if where else "")
            )

    def after_backward(self, node, grad_output, grad_inputs, summed):
        if _not_finite(grad_output):
            return  # passed on from an op already checked
        for position, grad in enumerate(summed):
            if grad is not None and _not_finite(grad):
                message = (
                    f"detect_anomaly: {node.name}.backward produced {_what(grad)} in the gradient of its "
                    f"input {position} (shape {grad.shape}) from a finite incoming gradient of shape "
                    f"{grad_output.shape}" + _made_at(node))
                if node not in self.seen and any(_has_nan(a) for a in node._saved or ()):
                    message += _forward_outside(node)
                raise AnomalyError(message)


def _rows_with_nothing_visible(function, ctx, output):
    """(how many, of how many, the first's index) for the rows a Softmax or Attention forward
    found with every entry -inf or hidden, or None. Softmax: a row of all-zero weights (a row
    with anything visible has a weight of exactly 1 at its maximum before normalising, so it
    cannot be all zeros). Attention: a query whose saved running maximum is -inf."""
    name = function.__name__
    if name == "Softmax":
        if output.ndim == 0 or output.shape[ctx.axis] == 0:
            return None
        empty = np.all(np.asarray(output) == 0, axis=ctx.axis)
    elif name == "Attention" and ctx._saved:
        row_max = np.asarray(ctx._saved[-1][0])  # softmax_stats = (row_max, row_sum), per query
        empty = np.isneginf(row_max)
    else:
        return None
    if not empty.any():
        return None
    first = tuple(int(i) for i in np.argwhere(empty)[0])
    return int(empty.sum()), int(empty.size), first


def _forward_outside(node):
    """The hint when the NaN was made by a forward that detect_anomaly did not watch."""
    in_forward_order = list(reversed(autograd.topological_order(node)))
    first = next((n for n in in_forward_order if any(_has_nan(a) for a in n._saved or ())), node)
    producers = [edge for edge in first.edges if type(edge) is autograd.Context]
    lines = [f"\n  {node.name}'s saved values already held NaN: it came from the forward pass, which "
             f"ran outside detect_anomaly, so the op that made it was not checked."]
    lines.append(f"  The first op (in forward order) whose saved values hold NaN: {first.name}"
                 + _made_at(first).replace("\n  made at", ","))
    for producer in producers:
        lines.append(f"  its input came from {producer.name}" + _made_at(producer).replace("\n  made at", ","))
    lines.append("  To name the op for certain, run the forward inside the block too:\n"
                 "      with mt.debug.detect_anomaly():\n"
                 "          loss = f(x)\n"
                 "          loss.backward()")
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# Finding the wrong op
# ----------------------------------------------------------------------------


class _RecordCalls(Tool):
    """Keep each node's inputs and options, so its backward can be re-checked alone."""

    def __init__(self):
        self.calls = []  # (function, ctx, input arrays, options), in forward order

    def after_forward(self, function, ctx, arrays, options, output):
        self.calls.append((function, ctx, [np.array(a, copy=True) for a in arrays], dict(options)))


@dataclasses.dataclass
class WrongOp:
    op: str
    created_at: str
    report: str

    def __str__(self):
        where = f" made at {self.created_at}" if self.created_at else ""
        return f"the first op whose backward disagrees with finite differences: {self.op}{where}\n{self.report}"


def find_wrong_op(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Re-check every op of fn(*inputs) alone, in the order forward ran them: each op's backward
    against central differences of its own forward, on the inputs it received. Returns a WrongOp
    naming the first that disagrees (op, where it was made, the worst element), or None."""
    from .gradcheck import GradcheckError, gradcheck
    from .tensor import Tensor

    copies = [Tensor(np.array(x.data, dtype=np.float64), requires_grad=x.requires_grad)
              if isinstance(x, Tensor) and x.dtype.kind == "f" else x for x in inputs]
    with _RecordCalls() as recorder:
        fn(*copies)
    for function, ctx, arrays, options in recorder.calls:
        tensors = [Tensor(a.astype(np.float64) if a.dtype.kind == "f" else a,
                          requires_grad=a.dtype.kind == "f" and wanted)
                   for a, wanted in zip(arrays, ctx.needs_input_grad)]
        if not any(t.requires_grad for t in tensors):
            continue

        def alone(*ts, function=function, options=options):
            return function.apply(*ts, **options)

        alone.__name__ = function.__name__  # so gradcheck's report names the op
        try:
            gradcheck(alone, *tensors, eps=eps, atol=atol, rtol=rtol)
        except GradcheckError as error:
            return WrongOp(function.__name__, created_at(ctx), error.details)
    return None
