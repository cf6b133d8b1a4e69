"""The observer the engine calls, and the base of every debugging tool.

autograd.set_observer(_observer) runs on import (mt.debug is always imported). Function.apply
then calls after_forward for each op, and the walk of backward calls call_backward and
after_backward for each node while a tool is active (watching_backward). The observer records
where each node was made (minitensor/sites.py), forwards every call to the active tools, and,
when a tool wants to stop in a node's backward (break_on), runs that backward under pdb in
_debug_backward below.
"""

import sys

from .. import autograd, grad_mode, sites
from ..sites import _ENGINE, _MODULE_CALL, _YOURS, _place, _record_site, created_at, module_path
from .show import describe

_getframe = sys._getframe
# sites' filename -> place dict, bound here by assignment: CPython compiles `name.get(...)` as a
# method call only when no import statement bound the name (else as an attribute load and a call,
# which costs more), and after_forward calls it for every op.
_places = sites._places
_tools = []  # the active tools, innermost last


class _Observer:
    """Installed in autograd on import: records every recorded node's site and forwards each
    forward and backward call to the active tools."""

    watching_backward = False  # True while a tool is active

    def after_forward(self, function, ctx, arrays, options, output):
        if True in ctx.needs_input_grad and grad_mode.enabled:  # a node will be recorded
            # sites.py's recording, its common case inlined here: this runs for every op.
            frame = _getframe(2)  # 0 here, 1 Function.apply, 2 its caller
            code = frame.f_code
            place = _places.get(code.co_filename) or _place(code.co_filename)
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

    def site_of(self, node, position):
        """(where your code made node, its module path, where its input `position` comes from: a
        leaf's name, through the views between, net.fc1.weight through Transpose): the engine's
        errors name them."""
        edge, views = node.edges[position], []
        while type(edge) is autograd.Context and edge.function.returns_view and len(edge.edges) == 1:
            views.append(edge.name)
            edge = edge.edges[0]
        source = None
        if type(edge) is autograd.Context:
            source = f"the output of {edge.label or edge.name}"
        elif edge is not None:
            label = sites.leaf_labels(node).get(id(edge))
            source = f"the leaf {label or edge.shape}" + (f" through {', '.join(views)}" if views else "")
        return created_at(node), module_path(node), source

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
