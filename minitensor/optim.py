"""Optimizers (SGD, Adam, AdamW), gradient clipping and learning-rate schedules.

Each optimizer keeps `param_groups`, a list of dicts with a "params" list and
that group's settings, so weight decay can apply to matrices and not to gains
and biases (see `decay_groups`). Updates happen in place on the parameters'
arrays, as in torch.optim, and are checked step by step against it in the tests.

Everything is checked before anything changes: the parameters and settings when
the optimizer is made (with torch.optim's words), and at each step() the
settings again (a schedule or a user may have changed them) and every gradient's
shape, so a step either updates every parameter or none.
"""

import math
import numbers

import numpy as np

from .autograd import no_grad
from .tensor import Tensor
from .views import increment_version


class Optimizer:
    def __init__(self, params, defaults):
        name = type(self).__name__
        if isinstance(params, (Tensor, dict, set)):
            raise TypeError(
                f"{name}: params should be an iterable of Tensors or of dicts (parameter groups), "
                f"but got {_describe_value(params)}; pass a list, e.g. {name}([p], ...) or "
                f"{name}(model.parameters(), ...)"
            )
        params = list(params)
        if not params:
            raise ValueError(f"{name}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for index, group in enumerate(groups):
            if not isinstance(group, dict):
                raise TypeError(
                    f"{name}: params mixes parameter groups (dicts) with {_describe_value(group)} at "
                    f"position {index}; give either Tensors or dicts, not both"
                )
            if "params" not in group:
                raise ValueError(f"{name}: parameter group {index} has no 'params' entry")
            unknown = set(group) - set(defaults) - {"params"}
            if unknown:
                raise ValueError(f"{name}: unknown settings {sorted(unknown)}")
            members = group["params"]
            members = [members] if isinstance(members, Tensor) else list(members)
            full = {**defaults, **group, "params": members}
            _check_settings(name, full)
            self.param_groups.append(full)
        _check_parameters(name, self.param_groups)
        self.state = {}  # id(parameter) -> that parameter's running statistics
        self.step_count = 0

    def zero_grad(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def step(self):
        name = type(self).__name__
        for group in self.param_groups:  # a schedule or a user may have changed a setting since
            _check_settings(name, group)
        _check_gradients(name, self.param_groups)
        self.step_count += 1
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self.update(p, p.grad, group, self.state.setdefault(id(p), {}))
                        increment_version(p)  # the parameter changed in place

    def update(self, p, grad, group, state):
        raise NotImplementedError


def _describe_value(value):
    """'a Parameter of shape (3,)', 'int 3', 'str '0.1'': what a caller gave, for an error."""
    if isinstance(value, Tensor):
        return f"a {type(value).__name__} of shape {value.shape}"
    return f"{type(value).__name__} {value!r}"


def _describe_parameter(p, group_index, position):
    label = f" ({p.name!r})" if p.name else ""
    return f"parameter {position} of group {group_index}{label}, shape {p.shape}"


def _check_parameters(name, groups):
    """Every parameter is a leaf Tensor and appears once in all the groups (twice would update it twice)."""
    seen = {}
    for group_index, group in enumerate(groups):
        for position, p in enumerate(group["params"]):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{name}: can only optimize Tensors, but parameter {position} of group {group_index} "
                    f"is {_describe_value(p)}"
                )
            if p.grad_fn is not None:
                raise ValueError(
                    f"{name}: can't optimize a non-leaf Tensor ({_describe_parameter(p, group_index, position)} "
                    f"was computed by {p.grad_fn.name}); optimize the Parameters it was computed from"
                )
            if id(p) in seen:
                first_group, first_position = seen[id(p)]
                where = "more than one parameter group" if first_group != group_index else f"group {group_index} twice"
                raise ValueError(
                    f"{name}: some parameters appear in {where}: parameter {first_position} of group "
                    f"{first_group} is also {_describe_parameter(p, group_index, position)}; "
                    f"each parameter must be listed once, or it is updated twice per step"
                )
            seen[id(p)] = (group_index, position)


def _check_settings(name, group):
    """Refuse what torch.optim refuses, with its words: a negative lr, eps, weight_decay or
    momentum, betas outside [0, 1), and settings that are not numbers (lr="0.1")."""
    for key in ("lr", "eps", "weight_decay", "momentum", "dampening"):
        if key in group and not _is_number(group[key]):
            raise TypeError(f"{name}: {key} must be a number, got {_describe_value(group[key])}")
    words = {
        "lr": "learning rate",
        "eps": "epsilon value",
        "weight_decay": "weight_decay value",
        "momentum": "momentum value",
    }
    for key, word in words.items():
        if key in group and not 0.0 <= group[key]:  # `not <=` also refuses NaN
            raise ValueError(f"{name}: Invalid {word}: {group[key]!r} ({key} must be >= 0)")
    if "betas" in group:
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2 or not all(_is_number(b) for b in betas):
            raise TypeError(f"{name}: betas must be a pair of numbers (beta1, beta2), got {_describe_value(betas)}")
        for index, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"{name}: Invalid beta parameter at index {index}: {beta!r} (betas must be in [0, 1))")
    if group.get("nesterov") and (group["momentum"] <= 0 or group["dampening"] != 0):
        raise ValueError(f"{name}: nesterov needs momentum > 0 and dampening = 0")


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_gradients(name, groups):
    """Each gradient is an array of its parameter's shape; a wrong one would be broadcast into the update."""
    for group_index, group in enumerate(groups):
        for position, p in enumerate(group["params"]):
            grad = p.grad
            if grad is None:
                continue
            if isinstance(grad, Tensor) or not hasattr(grad, "shape"):
                raise TypeError(
                    f"{name}.step: the gradient of {_describe_parameter(p, group_index, position)} must be "
                    f"an array, got {_describe_value(grad)}; set p.grad to an array (t.data for a Tensor t)"
                )
            if tuple(grad.shape) != p.shape:
                raise ValueError(
                    f"{name}.step: the gradient of {_describe_parameter(p, group_index, position)} has shape "
                    f"{tuple(grad.shape)}, not the parameter's shape {p.shape}; nothing was updated"
                )


class SGD(Optimizer):
    """p -= lr * v, with v = momentum * v + (1 - dampening) * (g + weight_decay * p)
    (v = g without momentum; nesterov uses g + momentum * v), as torch.optim.SGD."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def update(self, p, grad, group, state):
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * p.data
        if group["momentum"]:
            if "velocity" not in state:
                state["velocity"] = np.array(grad, dtype=p.dtype)  # an array, even for a 0-d parameter
            else:  # v = momentum v + (1 - dampening) g, in place (see Adam.update)
                velocity = state["velocity"]
                velocity *= group["momentum"]
                velocity += (1 - group["dampening"]) * grad
            grad = grad + group["momentum"] * state["velocity"] if group["nesterov"] else state["velocity"]
        p.data -= (group["lr"] * grad).astype(p.dtype, copy=False)


class Adam(Optimizer):
    """m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g**2,
    p -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps).
    weight_decay adds weight_decay * p to g (L2, coupled: Adam's original form). amsgrad=True
    divides by the largest v so far instead of v (Reddi et al., 2018), as torch's amsgrad."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=bool(amsgrad)))

    def update(self, p, grad, group, state):
        beta1, beta2 = group["betas"]
        if group["weight_decay"]:
            if self.decoupled:  # AdamW: shrink the weights directly, outside the adaptive step
                p.data *= 1 - group["lr"] * group["weight_decay"]
            else:
                grad = grad + group["weight_decay"] * p.data
        if not state:
            state["t"], state["m"], state["v"] = 0, np.zeros_like(p.data), np.zeros_like(p.data)
        state["t"] += 1
        t, m, v = state["t"], state["m"], state["v"]
        # In place, as torch.optim does: m, v and the step are each as large as the parameter, and
        # a fresh array for every operation (nine per parameter) cost more than the arithmetic.
        m *= beta1
        m += (1 - beta1) * grad  # m = b1 m + (1 - b1) g
        v *= beta2
        v += (1 - beta2) * np.square(grad)  # v = b2 v + (1 - b2) g**2
        if group.get("amsgrad"):
            if "v_max" not in state:
                state["v_max"] = v.copy()
            v = np.maximum(state["v_max"], v, out=state["v_max"])  # the largest v so far
        # p -= lr * m_hat / (sqrt(v_hat) + eps), with m_hat = m / (1 - b1**t), v_hat = v / (1 - b2**t),
        # grouped as torch.optim.Adam groups it: (lr / (1 - b1**t)) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)
        denominator = np.sqrt(v, out=np.empty_like(v))  # (out=: a 0-d v gives a 0-d array, not a scalar)
        denominator /= math.sqrt(1 - beta2**t)
        denominator += group["eps"]
        step = np.divide(m, denominator, out=denominator)
        step *= group["lr"] / (1 - beta1**t)
        p.data -= step.astype(p.dtype, copy=False)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)


def decay_groups(model, weight_decay):
    """Two parameter groups, as current recipes want: matrices (2 or more axes) decay,
    gains, biases and other vectors do not."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": matrices, "weight_decay": weight_decay}, {"params": vectors, "weight_decay": 0.0}]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale every gradient by min(1, max_norm / total norm); return the total norm (before).
    `parameters` is an iterable of Tensors or one Tensor, as in torch.nn.utils; norm_type is the
    p of the p-norm over all the gradients together (2, 1, float("inf"), ...), as torch's.

    A NaN or infinite total norm is not hidden, as in PyTorch: the scale max_norm / total is
    then NaN (every gradient becomes NaN) or 0 (a finite gradient becomes 0, an infinite one
    NaN), so the next step shows the problem. error_if_nonfinite=True raises instead,
    before any gradient is changed.
    """
    parameters = [parameters] if isinstance(parameters, Tensor) else parameters  # not its rows
    parameters = list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = _total_norm(grads, norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        shapes = [tuple(p.grad.shape) for p in parameters if p.grad is not None and not np.isfinite(p.grad).all()]
        raise RuntimeError(
            f"clip_grad_norm_: the total norm of the gradients is {total}, so they cannot be clipped; "
            f"the gradients of shape(s) {shapes} hold NaN or inf. Nothing was changed. To scale by the "
            f"non-finite norm anyway (the gradients become NaN), pass error_if_nonfinite=False."
        )
    scale = max_norm / (total + 1e-6)
    if not scale >= 1:  # (written so that a NaN scale passes, and makes every gradient NaN)
        with np.errstate(invalid="ignore"):  # inf * 0 = NaN is the answer here, not an accident
            for g in grads:
                g *= scale
    return total


def _total_norm(grads, norm_type):
    """The norm_type-norm of every gradient's elements together, in float64."""
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be a positive number or inf, got {norm_type!r}")
    if not grads:
        return 0.0
    if norm_type == math.inf:  # np.max, not max(): a NaN anywhere makes the norm NaN, as in PyTorch
        return float(np.max([np.abs(g).max(initial=0.0) for g in grads]))
    as_float64 = [g.astype(np.float64, copy=False).ravel() for g in grads]
    if norm_type == 2:  # the usual case: a dot product per gradient (no array of squares to make)
        return math.sqrt(sum(float(np.dot(a, a)) for a in as_float64))
    return float(sum(float(np.sum(np.abs(a) ** norm_type)) for a in as_float64) ** (1.0 / norm_type))


# ----------------------------------------------------------------------------
# Learning-rate schedules: a multiplier of each group's base lr, per step
# ----------------------------------------------------------------------------


class LRSchedule:
    """Sets lr = base_lr * factor(step) in every group; call step() after optimizer.step()."""

    def __init__(self, optimizer, factor):
        self.optimizer, self.factor = optimizer, factor
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.step_count = 0
        self._apply()

    def _apply(self):
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * self.factor(self.step_count)

    def step(self):
        self.step_count += 1
        self._apply()

    def lr(self):
        return [group["lr"] for group in self.optimizer.param_groups]


def warmup_cosine(optimizer, warmup_steps, total_steps, min_factor=0.0):
    """Linear warmup from 0 to the base lr over warmup_steps, then cosine decay to min_factor."""

    def factor(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_factor + (1 - min_factor) * 0.5 * (1 + math.cos(math.pi * progress))

    return LRSchedule(optimizer, factor)


def warmup_linear(optimizer, warmup_steps, total_steps, min_factor=0.0):
    """Linear warmup, then linear decay to min_factor at total_steps."""

    def factor(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return 1 - (1 - min_factor) * progress

    return LRSchedule(optimizer, factor)


def inverse_sqrt(optimizer, d_model, warmup_steps=4000):
    """The original transformer's schedule (set the optimizer's lr to 1):
    lr = d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5), steps counted from 1."""

    def factor(step):
        step = step + 1
        return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)

    return LRSchedule(optimizer, factor)
