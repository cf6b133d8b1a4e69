"""Loss functions: cross-entropy (stable, with ignore_index and label smoothing) and MSE."""

import numpy as np

from ..autograd import Function
from .softmax import LogSoftmax

REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(op, reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


class CrossEntropy(Function):
    """Cross-entropy between softmax(logits) and targets, as torch.nn.functional.cross_entropy.

    Shapes (PyTorch's): logits (N, C) with targets (N,); or (C,) with a scalar
    target; or (N, C, d1, ...) with targets (N, d1, ...): the classes are on axis 1.
    Targets are class indices (integers) or, with the logits' shape, probabilities.

    With log p = log_softmax(logits) over the classes and smoothing eps, the
    target distribution of one row is q = (1 - eps) onehot(t) + eps / C, and
        loss = -sum_c q_c log p_c,           dloss/dlogits = p * sum_c q_c - q.
    Rows whose target is ignore_index contribute nothing and are not counted in
    the mean. (If every row is ignored the mean is 0 / 0 = nan and its gradient 0, as in PyTorch.)
    Probability targets are an input like the logits: dloss/dt_c = -(1 - eps) log p_c, and
    they take no ignore_index (PyTorch refuses one >= 0 there too).

    Forward is two steps, each its own function: log p = LogSoftmax.of(logits) (log-softmax's
    own lines), then the negative log-likelihood of each row (nll_of_indices, nll_of_probabilities).
    The composed reference it is tested against: tests/test_fused_ops.py, composed_cross_entropy.
    """

    @staticmethod
    def forward(ctx, logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        class_axis, soft = check_cross_entropy(logits, target, ignore_index, label_smoothing, reduction)
        num_classes = logits.shape[class_axis]
        rows = np.moveaxis(logits, class_axis, -1).reshape(-1, num_classes)  # (M, C): one row per prediction
        with np.errstate(invalid="ignore"):  # a row of only -inf logits gives nan, as in PyTorch
            log_p = LogSoftmax.of(rows, 1)  # (M, C)
        if soft:
            target_rows = np.moveaxis(target, class_axis, -1).reshape(-1, num_classes)  # (M, C)
            per_row, q, counted = nll_of_probabilities(log_p, target_rows, label_smoothing)
        else:
            per_row, q, counted = nll_of_indices(log_p, target.reshape(-1), ignore_index, label_smoothing)
        ctx.save_for_backward(log_p, q)
        ctx.logits_shape, ctx.class_axis, ctx.reduction = logits.shape, class_axis, reduction
        ctx.count = int(counted.sum())
        ctx.soft, ctx.label_smoothing = soft, label_smoothing
        if reduction == "none":
            return per_row.reshape(logits.shape[:class_axis] + logits.shape[class_axis + 1 :])
        if reduction == "sum":
            return per_row.sum()
        with np.errstate(invalid="ignore"):
            return per_row.sum() / np.asarray(ctx.count, dtype=per_row.dtype)

    @staticmethod
    def backward(ctx, grad):
        log_p, q = ctx.saved_tensors
        p = np.exp(log_p)
        grad_rows = p * q.sum(axis=1, keepdims=True) - q  # (M, C): dloss_row / dlogits
        grad_logits = _as_logits(_reduced(grad_rows, grad, ctx), ctx)
        if not (ctx.soft and ctx.needs_input_grad[1]):
            return grad_logits, None
        # q = (1 - eps) t + eps / C enters the loss as -sum_c q_c log p_c, so dloss/dt = -(1 - eps) log p,
        # scaled by the reduction exactly as the logits' gradient is
        grad_target_rows = -(1 - ctx.label_smoothing) * log_p  # (M, C)
        return grad_logits, _as_logits(_reduced(grad_target_rows, grad, ctx), ctx)


def check_cross_entropy(logits, target, ignore_index, label_smoothing, reduction):
    """Raise the error that names cross_entropy's arguments and shapes; return the class axis and
    whether the targets are probabilities (a float dtype) rather than class indices."""
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if logits.ndim == 0:
        raise ValueError("cross_entropy: logits need a class axis, got a 0-d tensor")
    class_axis = 0 if logits.ndim == 1 else 1
    soft = np.issubdtype(target.dtype, np.floating)
    if soft and ignore_index >= 0:
        raise ValueError(
            f"cross_entropy: ignore_index={ignore_index} needs class-index targets, but the targets "
            f"are probabilities (dtype {target.dtype}, shape {target.shape}); a row of "
            f"probabilities names no single class to ignore (PyTorch refuses this too). Give "
            f"the rows to skip zero weight, or pass integer class indices."
        )
    expected = logits.shape if soft else logits.shape[:class_axis] + logits.shape[class_axis + 1 :]
    if target.shape != expected:
        raise ValueError(
            f"cross_entropy: logits of shape {logits.shape} (classes on axis {class_axis}) need "
            f"{'probability' if soft else 'class-index'} targets of shape {expected}, "
            f"got targets of shape {target.shape}"
        )
    return class_axis, soft


def nll_of_indices(log_p, t, ignore_index, label_smoothing):
    """-sum_c q_c log p_c per row for class indices t (M,), q = (1 - eps) onehot(t) + eps / C.
    Returns the (M,) losses, q (M, C) and which rows count (t != ignore_index; the others have
    q = 0: no loss, no gradient)."""
    num_classes = log_p.shape[1]
    counted = t != ignore_index
    bad = counted & ((t < 0) | (t >= num_classes))
    if bad.any():
        raise IndexError(
            f"cross_entropy: target {t[bad][0]} is out of range for {num_classes} classes "
            f"(valid targets are 0..{num_classes - 1}, or ignore_index={ignore_index})"
        )
    rows, classes = np.arange(len(t))[counted], t[counted]
    q = np.zeros_like(log_p)
    q[rows, classes] = 1 - label_smoothing
    q[counted] += label_smoothing / num_classes
    # Pick each row's target log p rather than summing q * log p over all classes: a class
    # masked out with a -inf logit has log p = -inf where q = 0, and 0 * -inf is nan.
    target_log_p = np.zeros(len(t), dtype=log_p.dtype)
    target_log_p[counted] = log_p[rows, classes]
    per_row = -(1 - label_smoothing) * target_log_p  # (M,)
    if label_smoothing > 0:
        per_row = per_row - label_smoothing / num_classes * np.where(counted, log_p.sum(axis=1), 0)
    return per_row, q, counted


def nll_of_probabilities(log_p, target_rows, label_smoothing):
    """-sum_c q_c log p_c per row for probability targets (M, C), q = (1 - eps) t + eps / C; every
    row counts. A -inf logit gives 0 * -inf = nan, as in PyTorch."""
    q = (1 - label_smoothing) * target_rows.astype(log_p.dtype) + label_smoothing / log_p.shape[1]
    return -(q * log_p).sum(axis=1), q, np.ones(len(log_p), dtype=bool)


def _reduced(grad_rows, grad, ctx):
    """A per-row gradient (M, C) times what the reduction passes each row of dL/dloss."""
    if ctx.reduction == "none":
        return grad_rows * grad.reshape(-1, 1)
    if ctx.reduction == "sum":
        return grad_rows * grad
    if ctx.count == 0:
        return np.zeros_like(grad_rows)  # every row ignored: the loss is 0/0, no row moves it (as PyTorch)
    return grad_rows * (grad / ctx.count)


def _as_logits(grad_rows, ctx):
    """(M, C) rows back to the logits' shape, the classes back on their axis."""
    moved_shape = list(ctx.logits_shape)
    moved_shape.append(moved_shape.pop(ctx.class_axis))  # the shape the rows were cut from
    return np.moveaxis(grad_rows.reshape(moved_shape), -1, ctx.class_axis)


class MSELoss(Function):
    """loss = mean((prediction - target)**2)  (or the sum, or no reduction).

    dloss/dprediction = 2 (prediction - target) / n,   dloss/dtarget = the negative of that.
    """

    @staticmethod
    def forward(ctx, prediction, target, reduction="mean"):
        _check_reduction("mse_loss", reduction)
        if prediction.shape != target.shape:
            raise ValueError(
                f"mse_loss: prediction of shape {prediction.shape} and target of shape "
                f"{target.shape} must have the same shape"
            )
        difference = prediction - target
        ctx.save_for_backward(difference)
        ctx.reduction = reduction
        squared = difference * difference
        if reduction == "none":
            return squared
        return squared.sum() if reduction == "sum" else squared.mean()

    @staticmethod
    def backward(ctx, grad):
        (difference,) = ctx.saved_tensors
        if ctx.reduction == "mean":
            grad_prediction = 2 * difference * (grad / difference.size)
        else:
            grad_prediction = 2 * difference * grad
        grad_target = -grad_prediction if ctx.needs_input_grad[1] else None
        return grad_prediction, grad_target
