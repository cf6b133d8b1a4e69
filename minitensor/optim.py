"""Optimizers (SGD, Adam, AdamW), gradient clipping and learning-rate schedules.

Each optimizer keeps `param_groups`, a list of dicts with a "params" list and
that group's settings, so weight decay can apply to matrices and not to gains
and biases (see `decay_groups`). Updates happen in place on the parameters'
arrays, as in torch.optim, and are checked step by step against it in the tests.
"""

import math

import numpy as np

from .autograd import no_grad


class Optimizer:
    def __init__(self, params, defaults):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for group in groups:
            unknown = set(group) - set(defaults) - {"params"}
            if unknown:
                raise ValueError(f"{type(self).__name__}: unknown settings {sorted(unknown)}")
            self.param_groups.append({**defaults, **group, "params": list(group["params"])})
        self.state = {}  # id(parameter) -> that parameter's running statistics
        self.step_count = 0

    def zero_grad(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def step(self):
        self.step_count += 1
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self.update(p, p.grad, group, self.state.setdefault(id(p), {}))
                        p._bump_version()  # the parameter changed in place

    def update(self, p, grad, group, state):
        raise NotImplementedError


class SGD(Optimizer):
    """p -= lr * v, with v = momentum * v + (1 - dampening) * (g + weight_decay * p)
    (v = g without momentum; nesterov uses g + momentum * v), as torch.optim.SGD."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def update(self, p, grad, group, state):
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * p.data
        if group["momentum"]:
            if "velocity" not in state:
                state["velocity"] = grad.copy()
            else:
                state["velocity"] = group["momentum"] * state["velocity"] + (1 - group["dampening"]) * grad
            grad = grad + group["momentum"] * state["velocity"] if group["nesterov"] else state["velocity"]
        p.data -= (group["lr"] * grad).astype(p.dtype, copy=False)


class Adam(Optimizer):
    """m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g**2,
    p -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps).
    weight_decay adds weight_decay * p to g (L2, coupled: Adam's original form)."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

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
        t = state["t"]
        state["m"] = beta1 * state["m"] + (1 - beta1) * grad
        state["v"] = beta2 * state["v"] + (1 - beta2) * grad * grad
        m_hat = state["m"] / (1 - beta1**t)
        v_hat = state["v"] / (1 - beta2**t)
        p.data -= (group["lr"] * m_hat / (np.sqrt(v_hat) + group["eps"])).astype(p.dtype, copy=False)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


def decay_groups(model, weight_decay):
    """Two parameter groups, as current recipes want: matrices (2 or more axes) decay,
    gains, biases and other vectors do not."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": matrices, "weight_decay": weight_decay}, {"params": vectors, "weight_decay": 0.0}]


def clip_grad_norm_(parameters, max_norm):
    """Scale every gradient by min(1, max_norm / total norm); return the total norm (before)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for g in grads:
            g *= scale
    return total


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
