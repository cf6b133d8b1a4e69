"""Where each node of the graph was made, and what your code calls the models and leaves in it.

The engine's observer (minitensor/debug/observer.py) records a site for every op that makes a
node (in ctx.site), so a node carries it from the moment it is made:

    created_at(node)     "file:line: source" of your code (with the models/ lines that led there)
    module_path(node)    the module that made it, by the name your code gives the model: block.ln1
    part_of(node)        (name, submodule) of the model that made it: ("attn", the attention)
    leaf_labels(loss)    id(leaf) -> x.name, else its parameter name in the model: block.ln1.weight
    module_of(node)      the innermost Module that made it (module_text: "block.ln1 (LayerNorm)")
    models_of(nodes), parameter_names(models)   the models that made nodes; their parameters' names
    short_path(filename) models/layernorm.py for the library's files, yours relative to the cwd
    record_site()        what the observer stores in ctx.site, once for each op that makes a node

Every tool in mt.debug, mt.gradcheck's report and the backward page show nodes and leaves
through these. This module imports only the engine and nn.module, so that gradcheck and the
tools can both use it without importing each other.
"""

import linecache
import os
import sys
import weakref

from . import autograd
from .nn.module import Module

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_MODELS = os.path.join(os.path.dirname(_PACKAGE.rstrip(os.sep)), "models") + os.sep
_LIBRARY = (_PACKAGE, _MODELS)
_MODULE_CALL = Module.__call__.__code__
_getframe = sys._getframe

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
# step out of), models/ (kept, with the line of yours that led there), or yours. Looked up in a
# dict, once per frame, rather than tested with startswith: a site is recorded for every op, so
# this sits in the per-op cost (benchmarks/overhead.py prints what recording costs), and a code
# object's filename string is shared by all its functions and caches its hash, so the lookup is
# about as cheap as reading an attribute.
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


def record_site():
    """The site of the op Function.apply is recording (see above): the engine's observer calls
    this once for every op that makes a node, so it is the whole per-op cost of sites. One walk
    up the frames from apply's caller: out of minitensor's own frames (x.sigmoid() is two frames
    deep), and, in the common case, it stops at the first frame, yours."""
    frame = _getframe(2)  # 0 here, 1 Function.apply, 2 its caller
    code = frame.f_code
    place = _places.get(code.co_filename) or _place(code.co_filename)
    while place is _ENGINE and code is not _MODULE_CALL and frame.f_back is not None:
        frame = frame.f_back
        code = frame.f_code
        place = _places.get(code.co_filename) or _place(code.co_filename)
    if place is _YOURS and code.co_name != "forward":
        return code, frame.f_lasti  # your code called the op: the common case
    return _walk_from(frame)  # inside a model: the same walk goes on, to your line


def _walk_from(frame):
    """The site of an op whose caller's frames start at frame, a frame of models/, of a Module
    call or of a forward method (see above). Frames inside minitensor/ are skipped; frames inside
    models/ (and forward methods of your own Modules) are kept, up to and including the first
    other frame of your code."""
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


def short_path(filename):
    """models/layernorm.py for the library's files; yours relative to the working directory
    when inside it."""
    if filename.startswith(_LIBRARY):
        return os.path.relpath(filename, os.path.dirname(_PACKAGE.rstrip(os.sep)))
    short = os.path.relpath(filename)
    return filename if short.startswith("..") else short


def _format_frame(code, offset, with_source=True):
    line = _line(code, offset)
    where = f"{short_path(code.co_filename)}:{line}"
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


def parameter_names(modules):
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


def module_text(node):
    """"gpt.blocks.1.attn (MultiHeadAttention)", or None."""
    path = module_path(node)
    if path is None:
        return None
    return f"{path} ({type(module_of(node)).__name__})"


def module_of(node):
    """The innermost Module whose forward made node (the one module_path names), or None."""
    site = getattr(getattr(node, "grad_fn", node), "site", None)
    inner = _unpack(site)[3] if site is not None else None
    return inner() if inner is not None else None


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


def models_of(nodes):
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
    names = parameter_names(models_of(nodes))
    labels = {}
    leaves = [root] if not nodes else [e for n in nodes for e in n.edges
                                        if e is not None and type(e) is not autograd.Context]
    for leaf in leaves:
        labels[id(leaf)] = leaf.name if leaf.name is not None else names.get(id(leaf))
    return labels
