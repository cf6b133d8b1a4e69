"""Loss functions: cross-entropy (stable, with ignore_index and label smoothing) and MSE."""

import numpy as np

from .. import backends
from ..autograd import Function

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
    """

    @staticmethod
    def forward(ctx, logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        _check_reduction("cross_entropy", reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
        if logits.ndim == 0:
            raise ValueError("cross_entropy: logits need a class axis, got a 0-d tensor")
        class_axis = 0 if logits.ndim == 1 else 1
        num_classes = logits.shape[class_axis]
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
        rows = np.moveaxis(logits, class_axis, -1).reshape(-1, num_classes)  # (M, C)
        fast = backends.accelerator_for("log_softmax", rows)  # None by default: LogSoftmax's lines
        with np.errstate(invalid="ignore"):  # a row of only -inf logits gives nan, as in PyTorch
            shifted = rows - rows.max(axis=1, keepdims=True)
            log_p = fast(rows, 1) if fast else shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))  # (M, C)

        if soft:
            q = np.moveaxis(target, class_axis, -1).reshape(-1, num_classes).astype(log_p.dtype)
            q = (1 - label_smoothing) * q + label_smoothing / num_classes
            counted = np.ones(len(rows), dtype=bool)
            per_row = -(q * log_p).sum(axis=1)  # (M,); a -inf logit gives 0 * -inf = nan, as in PyTorch
        else:
            t = target.reshape(-1)
            counted = t != ignore_index
            bad = counted & ((t < 0) | (t >= num_classes))
            if bad.any():
                raise IndexError(
                    f"cross_entropy: target {t[bad][0]} is out of range for {num_classes} classes "
                    f"(valid targets are 0..{num_classes - 1}, or ignore_index={ignore_index})"
                )
            q = np.zeros_like(log_p)
            q[np.arange(len(t))[counted], t[counted]] = 1 - label_smoothing
            q[counted] += label_smoothing / num_classes  # ignored rows keep q = 0: no loss, no gradient
            # Pick each row's target log p rather than summing q * log p over all classes: a class
            # masked out with a -inf logit has log p = -inf where q = 0, and 0 * -inf is nan.
            target_log_p = np.zeros(len(t), dtype=log_p.dtype)
            target_log_p[counted] = log_p[np.arange(len(t))[counted], t[counted]]
            per_row = -(1 - label_smoothing) * target_log_p  # (M,)
            if label_smoothing > 0:
                per_row = per_row - label_smoothing / num_classes * np.where(counted, log_p.sum(axis=1), 0)
        ctx.save_for_backward(log_p, q)
        ctx.logits_shape, ctx.class_axis, ctx.reduction = logits.shape, class_axis, reduction
        ctx.count = int(counted.sum())
        ctx.soft, ctx.label_smoothing = soft, label_smoothing
        if reduction == "none":
            return per_row.reshape(expected if not soft else expected[:class_axis] + expected[class_axis + 1 :])
        if reduction == "sum":
            return per_row.sum()
        with np.errstate(invalid="ignore"):
            return per_row.sum() / np.asarray(ctx.count, dtype=per_row.dtype)

    @staticmethod
    def backward(ctx, grad):
        log_p, q = ctx.saved_tensors
        p = np.exp(log_p)
        grad_rows = p * q.sum(axis=1, keepdims=True) - q  # (M, C): dloss_row / dlogits
        if ctx.reduction == "none":
            grad_rows = grad_rows * grad.reshape(-1, 1)
        elif ctx.reduction == "mean" and ctx.count == 0:
            grad_rows = np.zeros_like(grad_rows)  # every row ignored: the loss is 0/0, no row moves it (as PyTorch)
        elif ctx.reduction == "mean":
            grad_rows = grad_rows * (grad / ctx.count)
        else:
            grad_rows = grad_rows * grad
        class_axis = ctx.class_axis
        moved_shape = np.moveaxis(np.empty(ctx.logits_shape, dtype=bool), class_axis, -1).shape
        grad_logits = np.moveaxis(grad_rows.reshape(moved_shape), -1, class_axis)
        if not (ctx.soft and ctx.needs_input_grad[1]):
            return grad_logits, None
        # q = (1 - eps) t + eps / C enters the loss as -sum_c q_c log p_c, so dloss/dt = -(1 - eps) log p,
        # scaled by the reduction exactly as the logits' gradient is
        grad_target_rows = -(1 - ctx.label_smoothing) * log_p  # (M, C)
        if ctx.reduction == "none":
            grad_target_rows = grad_target_rows * grad.reshape(-1, 1)
        elif ctx.reduction == "mean":
            grad_target_rows = grad_target_rows * (grad / max(ctx.count, 1))
        else:
            grad_target_rows = grad_target_rows * grad
        return grad_logits, np.moveaxis(grad_target_rows.reshape(moved_shape), -1, class_axis)


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
