"""The names the debugging tools give a node's inputs and saved arrays, read off the op's code.

`Softmax.forward(ctx, x, axis=-1)` calls its input x; `ctx.save_for_backward(y)` names its
saved array y. The engine records nothing for names: a tool that shows a node asks
`ctx.input_names` / `ctx.saved_names` (autograd.py), which read them here, once per op.
"""

import ast
import inspect
import textwrap

_save_calls = {}  # forward function -> the argument names of each save_for_backward call in it


def input_names(forward, count):
    """The names of count inputs, as forward's signature gives them (forward(ctx, q, k, v)
    -> q, k, v); inputs taken as *arrays are arrays[0], arrays[1], ..."""
    code = forward.__code__
    named = code.co_varnames[1:code.co_argcount]  # after ctx; keywords with defaults are options
    star = code.co_varnames[code.co_argcount + code.co_kwonlyargcount] if code.co_flags & inspect.CO_VARARGS else None
    names = []
    for position in range(count):
        if position < len(named):
            names.append(named[position])
        else:
            names.append(f"{star or 'input'}[{position - len(named)}]")
    return tuple(names)


def saved_names(forward, saved):
    """One name per array a node saved (saved: what forward passed to save_for_backward, a tuple,
    or a dict for keywords): its keyword (save_for_backward(y=y)); else the argument of forward's
    ctx.save_for_backward(...) call with that many arguments: a variable gives its name (q),
    `a if needs_b else None` gives a, anything else its source text; else saved[i] (forward's
    source cannot be read, or has no such call)."""
    if type(saved) is dict:
        return tuple(saved)
    count = len(saved or ())
    calls = _save_calls.get(forward)
    if calls is None:
        calls = _save_calls[forward] = _read_save_calls(forward)
    names = next((names for names in calls if len(names) == count), None)
    return names or tuple(f"saved[{i}]" for i in range(count))


def _read_save_calls(forward):
    """The argument names of every positional ctx.save_for_backward(...) call in forward's source."""
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
