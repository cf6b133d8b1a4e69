"""Scaled dot-product attention as one fused op, computed tile by tile by the backend."""

import numpy as np

from .. import backends
from ..autograd import Function
from ..backends.numpy_backend import default_scale
from .axes import check_mask


def check_attention_inputs(q, k, v, mask):
    """Raise a ValueError naming the shapes when q, k, v (and mask) do not fit together;
    return the mask as the backends take it (ops.axes.check_mask: the one mask rule)."""
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(
            f"attention: q, k and v need at least 2 axes (..., T, d), got shapes {q.shape}, {k.shape}, {v.shape}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: q {q.shape} and k {k.shape} must have the same last axis (d_k)")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k {k.shape} and v {v.shape} must have the same number of keys (axis -2)")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"attention: the batch axes of q {q.shape}, k {k.shape} and v {v.shape} do not broadcast"
        ) from None
    if mask is None:
        return None
    return check_mask(mask, batch + (q.shape[-2], k.shape[-2]), "attention", scores_dtype=q.dtype)


class Attention(Function):
    """out = softmax(q k^T * scale + mask) v,   scale = 1 / sqrt(d_k) unless given.

    q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v); the batch axes broadcast.
    mask: boolean (True hides a key from a query) or float (added to the scores),
    broadcasting to (..., Tq, Tk). is_causal: query i sees keys j <= i + Tk - Tq.
    A query that sees no key gets a zero output (never NaN).

    The backend computes it a tile of keys at a time with a running softmax
    (see backends/numpy_backend.py: attention), saving the output and, per query,
    the largest score m and the normaliser l = sum exp(s - m); backward rebuilds
    the weights tile by tile from them:
        P = exp(S - m) / l,  dV = P^T dout,  dS = P * (dout V^T - rowsum(dout * out)),
        dQ = scale dS K,   dK = scale dS^T Q.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask=None, scale=None, is_causal=False):
        mask = check_attention_inputs(q, k, v, mask)
        scale = default_scale(q.shape[-1]) if scale is None else scale
        out, softmax_stats = backends.active().attention(q, k, v, mask, scale, is_causal)
        ctx.save_for_backward(q, k, v, out, softmax_stats)
        ctx.mask, ctx.scale, ctx.is_causal = mask, scale, is_causal
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, softmax_stats = ctx.saved_tensors
        dq, dk, dv = backends.active().attention_backward(
            q, k, v, out, softmax_stats, grad, ctx.mask, ctx.scale, ctx.is_causal
        )
        return dq, dk, dv
