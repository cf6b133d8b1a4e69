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

from . import autograd, grad_mode
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
# the tuple (frames, model, part, inner): frames holds such a pair for each frame from the op's
# caller out to the first frame of your code, innermost first; model is a weak reference to the
# outermost Module whose forward made the node (the one your code called), part to the submodule
# of it that did (its ln1, attn, ...), inner to the innermost Module whose forward was running
# (blocks.1.attn.w_q: its module path), each None when there is none. Plain tuples, and no line
# number, source or module path looked up until shown: every node records one, few are looked at.


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
    """(frames, model, part, inner) of either form of site."""
    if len(site) == 2:
        return (site,), None, None, None
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
        return tuple(frames), None, None, None
    model = module_calls[-1].f_locals["self"]
    model_ref = _ref(model)  # (the one plain weak reference to model, made once and shared)
    if model_ref is not _last_named[0]:  # every op of a forward pass has the same model
        _remember_root_name(model, frame)
        _last_named[0] = model_ref
    if len(module_calls) == 1:
        return tuple(frames), model_ref, None, model_ref
    part_ref = _ref(module_calls[-2].f_locals["self"])
    inner = module_calls[0].f_locals["self"]
    return tuple(frames), model_ref, part_ref, part_ref if len(module_calls) == 2 else _ref(inner)


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
    """The first time a model is seen, the name your code reaches it by: the variable that holds
    it (block); for a layer called directly, its path from a variable that holds it (model[0](x)
    -> model.0, net.fc1(x) on any object -> net.fc1); else its class name in lower case, with
    _1, _2 ... added so that two models never share a name (and so their parameters' names)."""
    if module in _root_names:
        return
    name = _name_in_frame(module, user_frame) if user_frame is not None else None
    if name is None:
        base = type(module).__name__.lower()
        taken = set(_root_names.values())
        name, count = base, 0
        while name in taken:
            count += 1
            name = f"{base}_{count}"
    _root_names[module] = name


def _name_in_frame(module, frame):
    """module's name from a variable of frame: the variable itself, or the path to module
    inside a Module (or through the attributes of a plain object) that a variable holds."""
    scopes = (frame.f_locals, frame.f_globals)
    for scope in scopes:
        for key, value in scope.items():
            if value is module:
                return key
    for scope in scopes:
        for key, value in list(scope.items()):
            if key.startswith("__") or isinstance(value, type):
                continue
            if isinstance(value, Module):
                path = _path_in(value, module)
                if path:
                    return f"{key}.{path}"
            elif hasattr(value, "__dict__") and not isinstance(value, type(sys)):
                for attribute, held in vars(value).items():
                    if held is module:
                        return f"{key}.{attribute}"
                    if isinstance(held, Module):
                        path = _path_in(held, module)
                        if path:
                            return f"{key}.{attribute}.{path}"
    return None


def _path_in(model, module):
    """The path of module inside model (blocks.1.attn), "" for model itself, None if absent."""
    for path, candidate in model.named_modules():
        if candidate is module:
            return path
    return None


def _parameter_names(modules):
    """id(parameter) -> "block.ln1.weight" for every parameter of the given models."""
    names = {}
    for module in modules:
        prefix = _root_names.get(module, type(module).__name__.lower())
        for name, parameter in module.named_parameters():
            names.setdefault(id(parameter), f"{prefix}.{name}")
    return names


def module_path(node):
    """The path of the module whose forward made node, from the name your code calls the model
    (gpt.blocks.1.attn, model.0, net.fc1), or None for a node no Module made."""
    node = getattr(node, "grad_fn", node)
    site = getattr(node, "site", None)
    if site is None:
        return None
    _, model, _, inner = _unpack(site)
    model, inner = model and model(), inner and inner()
    if model is None or inner is None:
        return None
    root = _root_names.get(model, type(model).__name__.lower())
    path = _path_in(model, inner)
    return root if not path else f"{root}.{path}"


def _module_text(node):
    """"gpt.blocks.1.attn (MultiHeadAttention)", or None."""
    path = module_path(node)
    if path is None:
        return None
    inner = _unpack(node.site)[3]()
    return f"{path} ({type(inner).__name__})"


def _model_of(node):
    """The outermost Module whose forward made node, or None."""
    model = _unpack(node.site)[1] if node.site is not None else None
    return model() if model is not None else None


def part_of(node):
    """(name, module) of the submodule of the model that made node ("attn", the attention
    module), or None for a node your code or the model's own forward made."""
    _, model, part, _ = _unpack(node.site) if node.site is not None else (None, None, None, None)
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
        if True in ctx.needs_input_grad and grad_mode.enabled:  # a node will be recorded
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
                return _debug_backward(node, grad_output, getattr(tool, "reason", None))
        return node.function.backward(node, grad_output)

    def describe(self, node):
        return describe(node)

    def after_backward(self, node, grad_output, grad_inputs, summed):
        for tool in list(_tools):
            tool.after_backward(node, grad_output, grad_inputs, summed)


_observer = _Observer()
autograd.set_observer(_observer)


def _debug_backward(node, grad, reason=None):
    """Run node's backward under pdb (mt.debug.break_on stopped here). Named locals: node (`p
    node` shows its inputs, saved arrays, site and module), op, made_at, module, reason (why it
    stopped), grad (the incoming gradient, as the op's backward calls it), saved (what forward
    saved, by name). `step` twice enters the op's backward (the line below the breakpoint)."""
    op = node.name  # noqa: F841 (named locals for you to print)
    made_at = created_at(node)  # noqa: F841 (not `where`: that is a pdb command)
    module = module_path(node)  # noqa: F841
    saved = dict(zip(node.saved_names, node._saved_arrays()))  # noqa: F841
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
    where each input came from: the label of a leaf (x, block.ln1.weight), the op that made it,
    or None. input_names and saved_names are the names the op gives its inputs and saved arrays
    (q, k, v); module is the path of the module that made the node (block.attn), or None."""

    index: int
    op: str
    node: autograd.Context
    created_at: str
    label: str
    grad_output: np.ndarray
    grad_inputs: tuple  # one per input, summed to the input's shape (None where not needed)
    saved: tuple
    input_labels: tuple
    input_names: tuple = ()
    saved_names: tuple = ()
    module: str = None

    def __str__(self):
        return _describe(self.index, self.node, self.grad_output, self.grad_inputs, self.input_labels)


def backward_steps(loss, grad=None, retain_graph=False):
    """Run backward one node at a time: a generator of Steps. Run to the end, it leaves
    exactly the gradients loss.backward() leaves; stop early and the rest is not computed."""
    labels = leaf_labels(loss)
    for index, (node, grad_output, grad_inputs) in enumerate(walk(loss, grad, retain_graph)):
        yield Step(index, node.name, node, created_at(node), node.label, grad_output, grad_inputs,
                   node._saved_arrays(), _input_labels(node, labels), node.input_names, node.saved_names,
                   module_path(node))


def _shape_of(array):
    """The shape of a saved array (a tuple of arrays, such as attention's softmax statistics,
    gives its stacked shape); None for nothing saved."""
    if array is None:
        return None
    try:
        return tuple(np.shape(array))
    except ValueError:
        return "?"


def describe(node):
    """What `p node` shows in pdb (a Context's repr): the op, its label and output shape, where
    it was made, the module that made it, each input by name with its shape and where it came
    from, and each saved array by name with its shape."""
    node = getattr(node, "grad_fn", node)
    label = f" {node.label!r}" if node.label else ""
    output = f" -> {tuple(node.output_shape)}" if hasattr(node, "output_shape") else ""
    lines = [f"<{node.name} node{label}{output}"]
    where = created_at(node)
    if where:
        lines.append(f"  made at {where}")
    module = _module_text(node)
    if module:
        lines.append(f"  module  {module}")
    if hasattr(node, "edges"):
        sources = _input_labels(node, _labels_of_model(node))
        for name, shape, source in zip(node.input_names, node.input_shapes, sources):
            came = f"from {source}" if source is not None else "a constant (no gradient)"
            lines.append(f"  input   {name} {tuple(shape)} {came}")
    if node._freed:
        lines.append("  saved   (freed by backward; retain_graph=True keeps them)")
    else:
        for name, array in zip(node.saved_names, node._saved_arrays()):
            lines.append(f"  saved   {name} {_shape_of(array)}" if array is not None else f"  saved   {name} None")
    return "\n".join(lines) + ">"


def _labels_of_model(node):
    """id(leaf) -> label for the leaves of node, naming parameters in the model that made node."""
    names = _parameter_names(_models_of([node]))
    return {id(e): e.name if e.name is not None else names.get(id(e))
            for e in node.edges if e is not None and type(e) is not autograd.Context}


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
    module = module_path(node)
    module = f"  in {module}" if module else ""
    where = created_at(node)
    where = f"  [{where}]" if where else ""
    inputs = ", ".join(
        f"{name} -" if g is None else f"{name} {g.shape} |{grad_norm(g):.3g}|" + (f" to {source}" if source else "")
        for g, name, source in zip(summed, node.input_names, input_labels))
    saved = ", ".join(f"{name} {_shape_of(array)}" for name, array in zip(node.saved_names, node._saved_arrays())
                      if array is not None)
    return (f"{index:4d} {node.name}{label}{module}{where}\n"
            f"       grad out {grad_output.shape} |{grad_norm(grad_output):.3g}|  ->  grad in {inputs}"
            + (f"\n       saved {saved}" if saved else ""))


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
    the trace: "Softmax"), label (a tensor's .name), nan=True (the incoming gradient, or a gradient
    the node's backward produces for an input, has a NaN or Inf), grad_norm_above (the norm of
    either is above it).

    pdb stops in debug._debug_backward, one line above the call of the op's backward, with the
    named locals grad (the incoming gradient, the name every op's backward gives it), saved (by
    name), node (`p node`), op, made_at (the line of your code that made the node), module and
    reason (which gradient matched). `step` twice enters the op's
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
        self.reason = None  # why it stopped last, for pdb

    def wants_to_stop(self, node, grad_output):
        if self.op is not None and node.name != self.op:
            return False
        if self.label is not None and node.label != self.label:
            return False
        self.reason = None
        if not self.nan and self.grad_norm_above is None:
            return True
        # The gradient coming in, then each gradient the node's backward produces: a NaN made by
        # sqrt(-1) (or a huge gradient from log(1e-8)) flows from this node into its inputs, a
        # leaf among them, where no later node would see it. To look at what the node produces,
        # its backward runs once here, and again under pdb if it stops.
        if self._matches(grad_output):
            self.reason = f"the incoming gradient {self._what(grad_output)}"
            return True
        produced = node.function.backward(node, grad_output)
        produced = produced if isinstance(produced, tuple) else (produced,)
        for name, shape, grad in zip(node.input_names, node.input_shapes, produced):
            if grad is None or not hasattr(grad, "shape"):
                continue
            grad = np.asarray(getattr(grad, "data", grad))
            if grad.shape != tuple(shape):
                grad = autograd.unbroadcast(grad, shape)
            if self._matches(grad):
                self.reason = f"{node.name}.backward produces a gradient for {name} that {self._what(grad)}"
                return True
        return False

    def _matches(self, grad):
        if self.nan and np.all(np.isfinite(grad)):
            return False
        if self.grad_norm_above is not None and not grad_norm(grad) > self.grad_norm_above:
            return False
        return True

    def _what(self, grad):
        said = []
        if self.nan:
            said.append(f"holds {_what(grad)}")
        if self.grad_norm_above is not None:
            said.append(f"has norm {grad_norm(grad):.3g} > {self.grad_norm_above:g}")
        return " and ".join(said)

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
    module = module_path(node)
    return (f"\n  made at {where}" if where else "") + (f"\n  in module {module}" if module else "")


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
            recorded = grad_mode.enabled and True in ctx.needs_input_grad
            raise AnomalyError(
                f"detect_anomaly: {function.__name__}'s forward met {rows} of {total} rows (the first at "
                f"index {index}) whose entries are all -inf or hidden by the mask, in inputs of shapes "
                f"{shapes}. minitensor gives such a row zero weights and no gradient (torch.softmax "
                f"gives NaN); a mask that hides every key of a query is usually a bug (a padding "
                f"mask built the wrong way round?)" + (_made_at(ctx) if recorded else "")
            )
        if _has_nan(output) and not any(_has_nan(a) for a in arrays):
            shapes = ", ".join(str(np.shape(a)) for a in arrays)
            recorded = grad_mode.enabled and True in ctx.needs_input_grad
            raise AnomalyError(
                f"detect_anomaly: {function.__name__}'s forward produced {_what(output)} in its output of "
                f"shape {np.shape(output)} from inputs of shapes {shapes} without NaN"
                + (_made_at(ctx) if recorded else "")
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
                if node not in self.seen and any(_has_nan(a) for a in node._saved_arrays()):
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
    elif name == "Attention" and ctx._saved_arrays():
        row_max = np.asarray(ctx._saved_arrays()[-1][0])  # softmax_stats = (row_max, row_sum), per query
        empty = np.isneginf(row_max)
    else:
        return None
    if not empty.any():
        return None
    first = tuple(int(i) for i in np.argwhere(empty)[0])
    return int(empty.sum()), int(empty.size), first


def _inline(made_at):
    return made_at.replace("\n  made at", ",").replace("\n  in module", ", in module")


def _forward_outside(node):
    """The hint when the NaN was made by a forward that detect_anomaly did not watch."""
    in_forward_order = list(reversed(autograd.topological_order(node)))
    first = next((n for n in in_forward_order if any(_has_nan(a) for a in n._saved_arrays())), node)
    producers = [edge for edge in first.edges if type(edge) is autograd.Context]
    lines = [f"\n  {node.name}'s saved values already held NaN: it came from the forward pass, which "
             f"ran outside detect_anomaly, so the op that made it was not checked."]
    lines.append(f"  The first op (in forward order) whose saved values hold NaN: {first.name}"
                 + _inline(_made_at(first)))
    for producer in producers:
        lines.append(f"  its input came from {producer.name}" + _inline(_made_at(producer)))
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
    module: str = None

    def __str__(self):
        where = f" made at {self.created_at}" if self.created_at else ""
        module = f" in {self.module}" if self.module else ""
        return (f"the first op whose backward disagrees with finite differences: {self.op}{module}{where}\n"
                f"{self.report}")


@dataclasses.dataclass
class OpCheck:
    """One op of fn(*inputs) re-checked alone: node is its node in the float64 run, relative_error
    gradcheck's (mt.gradcheck.relative_error), report gradcheck's report when it failed."""

    op: str
    node: autograd.Context
    created_at: str
    module: str
    passed: bool
    relative_error: float
    report: str


def _recorded_run(fn, inputs):
    """fn on float64 copies of the inputs, every op's call kept: (output, calls in forward order)."""
    from .tensor import Tensor

    copies = [Tensor(np.array(x.data, dtype=np.float64), requires_grad=x.requires_grad)
              if isinstance(x, Tensor) and x.dtype.kind == "f" else x for x in inputs]
    with _RecordCalls() as recorder:
        output = fn(*copies)
    return output, recorder.calls


def _checked_ops(calls, eps=1e-6, atol=1e-5, rtol=1e-3, max_checked=400):
    """Each recorded call's backward against central differences of its own forward, on the inputs
    it received, with mt.gradcheck's own measurement: an OpCheck per op, in forward order (an op
    with no input that requires grad is skipped). A generator, so find_wrong_op stops at the first."""
    from .gradcheck import measure
    from .tensor import Tensor

    for function, ctx, arrays, options in calls:
        tensors = [Tensor(np.ascontiguousarray(a, dtype=np.float64) if a.dtype.kind == "f" else a,
                          requires_grad=a.dtype.kind == "f" and wanted)
                   for a, wanted in zip(arrays, ctx.needs_input_grad)]
        if not any(t.requires_grad for t in tensors):
            continue

        def alone(*ts, function=function, options=options):
            return function.apply(*ts, **options)

        alone.__name__ = function.__name__  # so gradcheck's report names the op
        measured = measure(alone, *tensors, eps=eps, atol=atol, rtol=rtol, max_checked=max_checked)
        yield OpCheck(function.__name__, ctx, created_at(ctx), module_path(ctx), measured.passed,
                      measured.relative_error, measured.details)


def find_wrong_op(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Re-check every op of fn(*inputs) alone, in the order forward ran them: each op's backward
    against central differences of its own forward, on the inputs it received. Returns a WrongOp
    naming the first that disagrees (op, where it was made, its module, the worst element), or None."""
    _, calls = _recorded_run(fn, inputs)
    for checked in _checked_ops(calls, eps=eps, atol=atol, rtol=rtol):
        if not checked.passed:
            return WrongOp(checked.op, checked.created_at, checked.report, checked.module)
    return None
