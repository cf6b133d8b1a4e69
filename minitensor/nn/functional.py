"""Functions on tensors, named as in torch.nn.functional (imported as F)."""

import numpy as np

from .. import ops
from ..autograd_errors import not_a_tensor
from ..backends.conventions import common_dtype, default_scale
from ..ops.attention import check_attention_inputs
from ..ops.axes import axis_or_dim
from ..ops.masks import check_mask
from ..random import generator
from ..tensor import Tensor
from .normalization import last_axis_size
from .normalization import layer_norm as fused_layer_norm


def linear(x, weight, bias=None):
    """y = x W^T + b, with W of shape (out_features, in_features), as torch's Linear."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"linear: weight must be a Tensor of shape (out_features, {x.shape[-1]}), got {weight!r:.40}")
    y = x @ weight.T
    return y if bias is None else y + bias


def relu(x):
    return ops.ReLU.apply(x)


def gelu(x, approximate="none"):
    """GELU: exact (erf) by default, or approximate="tanh" as GPT-2."""
    return ops.GELU.apply(x, approximate=approximate)


def silu(x):
    return ops.SiLU.apply(x)


def softmax(x, axis=None, *, dim=None):
    """Softmax along axis; dim= is axis= (PyTorch's name). Without either, the last axis, for
    inputs of up to 2 axes; for more, say which (_implicit_axis)."""
    return ops.Softmax.apply(x, axis=_implicit_axis(x, axis_or_dim(axis, dim, "softmax", None), "softmax"))


def log_softmax(x, axis=None, *, dim=None):
    return ops.LogSoftmax.apply(x, axis=_implicit_axis(x, axis_or_dim(axis, dim, "log_softmax", None), "log_softmax"))


def _implicit_axis(x, axis, op):
    """PyTorch's F.softmax without dim picks dim 0 for 3-D inputs and dim 1 for 4-D ones (with a
    deprecation warning): a ported call would silently normalise another axis here, so it is refused."""
    if axis is not None:
        return axis
    if x.ndim > 2:
        raise TypeError(f"{op}: say which axis for an input of shape {x.shape} (dim=-1 for the last): PyTorch's "
                        f"implicit choice for {x.ndim} axes is dim={0 if x.ndim == 3 else 1}, not the last")
    return -1


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm over the last axis (normalized_shape must be its size):
    the fused op mt.nn.LayerNorm and the models use (nn/normalization.py)."""
    if x.ndim == 0 or last_axis_size(normalized_shape, "layer_norm") != x.shape[-1]:
        raise ValueError(
            f"layer_norm: normalized_shape {normalized_shape!r} is not the last axis of the input {x.shape}"
        )
    return fused_layer_norm(x, weight, bias, eps)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *, mask=None,
                                 causal_alignment="top_left"):
    """softmax(q k^T * scale + mask) v as one fused, tiled op (see ops/attention.py);
    scale = 1 / sqrt(d_k) unless given.

    Two ways to pass a mask, one per convention, so that neither is guessed:
    attn_mask  PyTorch's argument, with PyTorch's meaning (it is also the fourth positional
               argument, as in torch.nn.functional.scaled_dot_product_attention): a boolean
               mask marks with True the keys that TAKE PART; a float mask is added.
    mask       keyword only, the seeds' and nn.MultiheadAttention's meaning used everywhere
               else in minitensor: a boolean mask marks with True the HIDDEN keys; a float
               mask is added (in the scores' dtype).
    Either may be a NumPy array or a Tensor (the rule: ops/masks.py, check_mask, called once here;
    the op below takes the checked array); giving both is refused. dropout_p is accepted for
    PyTorch's positions only as 0.

    is_causal with Tq queries and Tk != Tk keys: causal_alignment="top_left" (the default, PyTorch's
    answer under its name) lets query i see keys j <= i; "bottom_right" takes the queries as the
    last Tq of the Tk positions (query i sees j <= i + Tk - Tq: a KV cache's alignment, which
    models.attention's function of the same name uses by default). With Tq = Tk they agree.
    """
    scores_shape = attention_scores_shape(q, k, v)  # (batch..., Tq, Tk)
    if causal_alignment not in ("top_left", "bottom_right"):
        raise ValueError(f"scaled_dot_product_attention: causal_alignment must be 'top_left' or 'bottom_right', "
                         f"got {causal_alignment!r}")
    bias = attn_mask if attn_mask is not None else mask
    hidden = attention_mask(mask, scores_shape, "scaled_dot_product_attention", common_dtype(q, k, v),
                            attn_mask=attn_mask, dropout_p=dropout_p)
    if isinstance(bias, Tensor) and bias.requires_grad:  # a learned bias (relative positions, ALiBi): it trains
        return _attention_with_learned_bias(q, k, v, bias, scale, is_causal, causal_alignment)
    if is_causal and causal_alignment == "top_left" and q.shape[-2] != k.shape[-2]:
        hidden, is_causal = _with_top_left_causal(hidden, q, k), False
    return ops.Attention.apply(q, k, v, mask=hidden, scale=scale, is_causal=is_causal)


def _attention_with_learned_bias(q, k, v, bias, scale, is_causal, causal_alignment):
    """softmax(q k^T * scale + bias) v written with the ops (not the fused kernel, which takes a
    mask as a constant), so that the bias gets its gradient: dL/dbias is dL/dscores, summed over
    the axes the bias was broadcast along (the engine's unbroadcast). The caller checked it."""
    if bias.dtype.kind != "f":
        raise TypeError(f"scaled_dot_product_attention: a mask that requires grad must be a float bias (added to "
                        f"the scores), got dtype {bias.dtype}")
    queries, keys = q.shape[-2], k.shape[-2]
    scale = default_scale(q.shape[-1]) if scale is None else scale
    scores = (q * scale) @ k.swapaxes(-1, -2) + bias.to(q.dtype)  # (..., Tq, Tk): the scores keep their dtype
    if is_causal:
        offset = 0 if causal_alignment == "top_left" else keys - queries
        future = np.triu(np.ones((queries, keys), dtype=bool), k=1 + offset)
        scores = scores.masked_fill(future, -np.inf)
    return scores.softmax(axis=-1) @ v


def _with_top_left_causal(hidden, q, k):
    """The mask `hidden` (None, boolean True hides, or float added) with PyTorch's is_causal for
    Tq != Tk added: query i sees keys j <= i (torch's default tril alignment)."""
    future = np.triu(np.ones((q.shape[-2], k.shape[-2]), dtype=bool), k=1)
    if hidden is None:
        return future
    if hidden.dtype == np.bool_:
        return hidden | future
    return np.where(future, -np.inf, hidden).astype(hidden.dtype, copy=False)


def attention_mask(mask, scores_shape, op, scores_dtype, *, attn_mask=None, dropout_p=0.0):
    """The mask of one attention call, checked once by the one mask rule (ops/masks.py: check_mask)
    against scores of shape scores_shape = (batch..., queries, keys): an array, boolean with True
    hiding a key or float in the scores' dtype, or None. `mask` is minitensor's (True hides),
    `attn_mask` PyTorch's (True takes part; giving both is refused), dropout_p must be 0. For
    the entries of attention (F.scaled_dot_product_attention, a layer that must check its mask
    before it changes anything, such as a KV cache), with errors that name the op and its shapes;
    what they pass down is not checked again."""
    if dropout_p != 0:
        raise ValueError(
            f"{op}: dropout_p={dropout_p!r}: minitensor's attention has no dropout on the weights "
            f"(apply F.dropout to the output, or pass the mask as mask=/attn_mask= and is_causal by keyword)"
        )
    if attn_mask is not None and mask is not None:
        raise ValueError(
            f"{op}: give attn_mask (PyTorch's: True takes part) or mask (minitensor's: True hides), not both"
        )
    if attn_mask is not None:
        return check_mask(attn_mask, scores_shape, op, scores_dtype, true_means="taking part")
    return None if mask is None else check_mask(mask, scores_shape, op, scores_dtype)


def attention_scores_shape(q, k, v):
    """(batch..., Tq, Tk), the shape of the scores of attention over q, k, v (Tensors), after
    checking that they fit together (a ValueError naming the shapes if not)."""
    for argument in (q, k, v):
        if not isinstance(argument, Tensor):  # the error Attention.apply would raise
            raise not_a_tensor(ops.Attention, (q, k, v), argument)
    return check_attention_inputs(q.data, k.data, v.data)


def attention_scale(d_k):
    """The attention scores' default scale, 1 / sqrt(d_k) (1 for d_k = 0, where every score is 0)."""
    return default_scale(d_k)


def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """Cross-entropy of raw logits against class indices (or probabilities).

    logits (N, C) with target (N,), or (N, C, d1, ...) with target (N, d1, ...):
    the class axis is 1, as in PyTorch. For (B, T, V) language-model logits use
    cross_entropy(logits.reshape(-1, V), targets.reshape(-1)).
    """
    target = target if isinstance(target, Tensor) else Tensor(np.asarray(target))
    if target.dtype.kind not in "iuf":  # a bool would index rows as a mask, not name classes
        raise TypeError(
            f"cross_entropy: targets must be class indices (integers) or probabilities (floats), "
            f"got dtype {target.dtype}; for 0/1 labels use target.astype(np.int64)"
        )
    return ops.CrossEntropy.apply(
        logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
    )


def mse_loss(prediction, target, reduction="mean"):
    target = target if isinstance(target, Tensor) else Tensor(np.asarray(target, dtype=prediction.dtype))
    return ops.MSELoss.apply(prediction, target, reduction=reduction)


def _reduced(loss, reduction, op):
    """A loss per element reduced as PyTorch's reduction= says."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _target_like(prediction, target, op):
    target = target if isinstance(target, Tensor) else Tensor(np.asarray(target, dtype=prediction.dtype))
    if target.shape != prediction.shape:
        raise ValueError(f"{op}: the target's shape {target.shape} differs from the input's {prediction.shape} "
                         f"(PyTorch would broadcast them with a warning; give them one shape)")
    return target


def l1_loss(prediction, target, reduction="mean"):
    """|prediction - target|, reduced (torch's l1_loss); the gradient at a tie is 0, as PyTorch's."""
    return _reduced((prediction - _target_like(prediction, target, "l1_loss")).abs(), reduction, "l1_loss")


def binary_cross_entropy_with_logits(logits, target, reduction="mean"):
    """-(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))), in the form that never overflows:
    max(x, 0) - x y + log(1 + exp(-|x|)) (torch's binary_cross_entropy_with_logits)."""
    target = _target_like(logits, target, "binary_cross_entropy_with_logits")
    loss = relu(logits) - logits * target + (1 + (-logits.abs()).exp()).log()
    return _reduced(loss, reduction, "binary_cross_entropy_with_logits")


def nll_loss(log_probabilities, target, reduction="mean"):
    """-log_probabilities[n, target[n]], reduced (torch's nll_loss, after log_softmax): (N, C) with
    integer targets (N,) in [0, C)."""
    target = target.data if isinstance(target, Tensor) else np.asarray(target)
    if log_probabilities.ndim != 2 or target.shape != log_probabilities.shape[:1] or target.dtype.kind not in "iu":
        raise ValueError(f"nll_loss: expects (N, C) log-probabilities and N integer targets, got "
                         f"{log_probabilities.shape} and {target.dtype} {target.shape}")
    if target.size and (target.min() < 0 or target.max() >= log_probabilities.shape[1]):
        raise IndexError(f"nll_loss: target {target.min()}..{target.max()} out of range for "
                         f"{log_probabilities.shape[1]} classes")
    picked = log_probabilities[np.arange(len(target)), target]
    return _reduced(-picked, reduction, "nll_loss")


def dropout(x, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1 / (1 - p)
    (inverted dropout: nothing changes at evaluation time). Seeded by mt.manual_seed."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = generator().random(x.shape) >= p
    scale = (keep / (1.0 - p)).astype(x.dtype)
    return x * Tensor(scale)


def embedding(indices, weight, padding_idx=None):
    """Rows of weight (num_embeddings, dim) picked by integer indices of any shape. Where an index
    is padding_idx (negative counts from the end), the row is returned but gets no gradient, as torch's."""
    indices = indices.data if isinstance(indices, Tensor) else np.asarray(indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be integers, got dtype {indices.dtype}")
    vocabulary = weight.shape[0]
    if indices.size and (indices.min() < 0 or indices.max() >= vocabulary):
        bad = indices[(indices < 0) | (indices >= vocabulary)].flat[0]
        raise IndexError(
            f"embedding: index {bad} is out of range for an embedding of {vocabulary} rows "
            f"(valid indices are 0..{vocabulary - 1})"
        )
    rows = weight[indices]
    if padding_idx is None:
        return rows
    if not -vocabulary <= padding_idx < vocabulary:
        raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for {vocabulary} rows")
    padded = (indices == padding_idx % vocabulary)[..., None]
    return ops.Where.apply(rows.detach(), rows, condition=padded) if padded.any() else rows
