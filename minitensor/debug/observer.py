"""The observer the engine calls, and the base of every debugging tool.

autograd.set_observer(engine_observer) runs on import (mt.debug is always imported). Function.apply
then calls record_site for each op that makes a node (one call: sites.record_site, which reads
the line of your code), and, while a tool is active (watching), after_forward for each op; the walk
of backward calls call_backward and after_backward for each node. The observer forwards every
call to the active tools and, when a tool wants to stop in a node's backward (break_on), runs
that backward under pdb in _debug_backward below.
"""

from .. import autograd, sites
from ..sites import created_at, module_path

_tools = []  # the active tools, innermost last


class _Observer:
    """Installed in autograd on import: records every recorded node's site and forwards each
    forward and backward call to the active tools."""

    watching = False  # True while a tool is active
    record_site = staticmethod(sites.record_site)  # the site of each node, as the engine records it

    def after_forward(self, function, ctx, arrays, options, output):
        for tool in list(_tools):
            tool.after_forward(function, ctx, arrays, options, output)

    def call_backward(self, node, grad_output):
        for tool in reversed(_tools):
            if tool.wants_to_stop(node, grad_output):
                tool.stops += 1
                return _debug_backward(node, grad_output, getattr(tool, "reason", None))
        return node.function.backward(node, grad_output)

    def describe(self, node):
        from .show import describe  # the tools' text, loaded when a node is first shown

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


engine_observer = _Observer()
autograd.set_observer(engine_observer)


def _debug_backward(node, grad, reason=None):
    """Run node's backward under pdb (mt.debug.break_on stopped here). Named locals: node (`p
    node` shows its inputs, saved arrays, site and module), op, made_at, module, reason (why it
    stopped), grad (the incoming gradient, as the op's backward calls it), saved (what forward
    saved, by name). `step` twice enters the op's backward (the line below the breakpoint)."""
    op = node.name  # noqa: F841 (named locals for you to print)
    made_at = created_at(node)  # noqa: F841 (not `where`: that is a pdb command)
    module = module_path(node)  # noqa: F841
    saved = dict(node.saved)  # noqa: F841 (a plain dict: `p saved` prints the arrays by name)
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
        engine_observer.watching = True
        return self

    def __exit__(self, *exc_info):
        _tools.remove(self)
        engine_observer.watching = bool(_tools)
        return False

    def after_forward(self, function, ctx, arrays, options, output):
        pass

    def wants_to_stop(self, node, grad_output):
        return False

    def after_backward(self, node, grad_output, grad_inputs, summed):
        pass
