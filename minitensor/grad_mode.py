"""Grad mode: whether ops record the graph. `with mt.no_grad():` turns it off (evaluation,
optimizer steps); `with mt.enable_grad():` turns it back on inside. Function.apply reads
`grad_mode.enabled` on every op."""

import functools

enabled = True


def is_grad_enabled():
    """True when ops record the graph (outside `no_grad()`)."""
    return enabled


class _GradMode:
    """Set grad mode inside a `with` block (or a decorated function), then restore it."""

    enabled = True

    def __enter__(self):
        global enabled
        self._previous = enabled
        enabled = self.enabled
        return self

    def __exit__(self, *exc_info):
        global enabled
        enabled = self._previous
        return False

    def __call__(self, fn):
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
