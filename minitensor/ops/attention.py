"""Scaled dot-product attention as one op, computed a tile of keys at a time, forward and backward."""

import numpy as np

from .. import backends
from ..autograd import Function
from ..backends.conventions import array_module, common_dtype, default_scale
from ..backends.numpy_backend import matmul as product  # BLAS; not active().matmul: these products are attention's

KEY_TILE = 128  # keys per tile: only (..., Tq, KEY_TILE) scores exist at a time, never (..., Tq, Tk)


def check_attention_inputs(q, k, v):
    """Raise a ValueError naming the shapes when q, k and v do not fit together; return the
    scores' shape (batch..., Tq, Tk), the shape a mask is checked against (ops.masks.check_mask)."""
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
    return batch + (q.shape[-2], k.shape[-2])


class Attention(Function):
    """out = softmax(q k^T * scale + mask) v,   scale = 1 / sqrt(d_k) unless given.

    q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v); the batch axes broadcast.
    mask: boolean (True hides a key from a query) or float (added to the scores),
    broadcasting to (..., Tq, Tk), as ops.masks.check_mask returns it: the entry that takes
    the user's mask (F.scaled_dot_product_attention, models.attention) checks it once; this
    op takes it as checked. is_causal: no query sees a key after its own position,
    the queries being the last Tq of the Tk positions (as when generating with a KV cache).
    A query that sees no key gets a zero output (never NaN). Mixed dtypes: q, k and v are
    cast to their common dtype first (float32 with float64 computes in float64), the rule
    of every backend; each gradient comes back in its input's dtype.

    Forward visits the keys a tile at a time (KEY_TILE of them), so the (..., Tq, Tk) scores
    never exist, and saves the output and, per query, the largest score m and the normaliser
    l = sum exp(s - m). Backward rebuilds the weights tile by tile from them. Both are the
    homework task tiled_attention. (m and l are kept apart, not as lse = m + log l: at a score
    of 1e30, or 1e7 in float32, m + log l rounds to m and the weights lose their normaliser.)
    A fully masked row has m = -inf and l = 0.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask=None, scale=None, is_causal=False):
        check_attention_inputs(q, k, v)
        dtype = common_dtype(q, k, v)
        q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
        scale = default_scale(q.shape[-1]) if scale is None else scale
        fast = backends.accelerator_for("attention", q, k, v)  # None by default: the lines below run
        if fast is not None:
            out, softmax_stats = fast(q, k, v, mask, scale, is_causal)
        else:
            # BEGIN SOLUTION tiled_attention
            # For each query keep a running max m, a running normaliser l = sum exp(s - m) and a
            # running weighted sum acc = sum exp(s - m) v. A new tile with a larger max rescales the
            # old l and acc by exp(m_old - m_new). At the end out = acc / l.
            xp = array_module(q)
            full_mask = _full_mask(mask, q, k)
            batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
            qb, kb, vb = (xp.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))  # views: each tile's
            # block then has the whole batch shape, so that the steps below can work on it in place
            running_max = xp.full(batch + (q.shape[-2], 1), -xp.inf, dtype=dtype)
            normaliser = xp.zeros(batch + (q.shape[-2], 1), dtype=dtype)
            acc = xp.zeros(batch + (q.shape[-2], v.shape[-1]), dtype=dtype)
            for start in range(0, k.shape[-2], KEY_TILE):
                k_tile, v_tile = kb[..., start : start + KEY_TILE, :], vb[..., start : start + KEY_TILE, :]
                scores = tile_scores(qb, k_tile, k.shape[-2], scale, start, full_mask, is_causal)  # (..., Tq, tile)
                new_max = xp.maximum(running_max, scores.max(axis=-1, keepdims=True))  # NaN if a score is
                safe_max = xp.where(new_max == -xp.inf, 0, new_max)  # rows with nothing visible yet
                # The (..., Tq, tile) block is the large array here: every step on it works in place,
                # so the tile costs one new block (the scores) and one pass per step.
                scores -= safe_max
                weights = xp.exp(scores, out=scores)  # exp(s - m), 0 for hidden keys (exp(-inf) = 0)
                correction = xp.exp(running_max - safe_max)  # rescales what was summed so far
                normaliser = normaliser * correction + weights.sum(axis=-1, keepdims=True)
                acc *= correction
                acc += product(weights, v_tile)
                running_max = new_max
            # A fully masked row has l = 0 and acc = 0, so out = 0 (the policy). "!= 0", not "> 0":
            # a NaN normaliser must stay visible and carry its NaN into the output.
            out = acc
            out /= xp.where(normaliser != 0, normaliser, 1)
            softmax_stats = (running_max[..., 0], normaliser[..., 0])
            # END SOLUTION
        ctx.save_for_backward(q, k, v, out, softmax_stats)
        ctx.mask, ctx.scale, ctx.is_causal = mask, scale, is_causal
        return out

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION tiled_attention
        """dq, dk, dv given grad = dL/dout, rebuilding each tile's weights from the saved m and l
        (no (..., Tq, Tk) array either).

        With P = exp(S - m) / l (the softmax weights) and D = rowsum(dout * out) (D_i = sum_c dout_ic out_ic):
            dV = P^T dout,   dP = dout V^T,   dS = P * (dP - D),
            dQ = scale * dS K,   dK = scale * dS^T Q.
        Each tile rebuilds W = exp(S - m), so P = W / l; 1 / l goes into the small factors,
        (..., Tq, dv) and (..., Tq, 1), and scale into dQ and dK, rather than over the
        (..., Tq, tile) block:   dV = W^T (dout / l),   dS = W * ((dout / l) V^T - D / l).
        The gradients have the broadcast batch shape; where q, k or v was broadcast, the
        engine's unbroadcast sums them back, as for any op."""
        q, k, v, out, softmax_stats = ctx.saved_tensors
        scale, mask, is_causal = ctx.scale, ctx.mask, ctx.is_causal
        fast = backends.accelerator_for("attention_backward", q, k, v)  # None by default
        if fast is not None:
            return fast(q, k, v, out, softmax_stats, grad, mask, scale, is_causal)
        xp = array_module(q)
        mask = _full_mask(mask, q, k)
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        q, k, v = (xp.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))  # views, as in forward
        row_max, row_sum = (s[..., None] for s in softmax_stats)  # (..., Tq, 1)
        visible = row_sum != 0  # a fully masked row (l = 0) has no weights and gets no gradient
        safe_max = xp.where(row_max == -xp.inf, 0, row_max)
        inverse_sum = xp.where(visible, 1 / xp.where(visible, row_sum, 1), 0)  # 1 / l, and 0 where l = 0
        D = (grad * out).sum(axis=-1, keepdims=True)  # (..., Tq, 1)
        dout_over_l, D_over_l = grad * inverse_sum, D * inverse_sum
        dq = xp.zeros(q.shape, dtype=common_dtype(q, k, v))
        dk_tiles, dv_tiles = [], []
        for start in range(0, k.shape[-2], KEY_TILE):
            k_tile, v_tile = k[..., start : start + KEY_TILE, :], v[..., start : start + KEY_TILE, :]
            scores = tile_scores(q, k_tile, k.shape[-2], scale, start, mask, is_causal)
            scores -= safe_max
            W = xp.exp(scores, out=scores)  # (..., Tq, tile), in place: P = W / l
            dv_tiles.append(product(xp.swapaxes(W, -1, -2), dout_over_l))
            dS = product(dout_over_l, xp.swapaxes(v_tile, -1, -2))  # dP / l
            dS -= D_over_l
            dS *= W  # dS = P * (dP - D), in place
            dq += product(dS, k_tile)
            dk_tiles.append(product(xp.swapaxes(dS, -1, -2), q))
        dq *= scale
        dk = xp.concatenate(dk_tiles, axis=-2) if dk_tiles else xp.zeros_like(k)
        dk *= scale
        dv = xp.concatenate(dv_tiles, axis=-2) if dv_tiles else xp.zeros_like(v)
        return dq, dk, dv
        # END SOLUTION


def _full_mask(mask, q, k):
    """The mask with its last two axes grown to (Tq, Tk) (a view, no copy), so that a tile
    of keys can be sliced from it: a (Tq, 1) or 0-d mask has no key axis to slice. A float
    mask takes the scores' dtype (it never changes the result's dtype)."""
    if mask is None:
        return None
    xp = array_module(q)
    mask = xp.asarray(mask)  # (a NumPy mask, for CuPy scores)
    if mask.dtype != bool:
        mask = mask.astype(q.dtype, copy=False)
    return xp.broadcast_to(mask, mask.shape[:-2] + (q.shape[-2], k.shape[-2]))


def tile_scores(q, k_tile, k_total, scale, key_start, mask, is_causal):
    """Scores of every query against one tile of keys; hidden ones set to -inf. A new array, so
    the caller may overwrite it."""
    xp = array_module(q)
    # q is scaled before the product, as PyTorch does: in float32 a product q k^T past 3.4e38
    # overflows to inf even where the scaled score would not
    scores = product(q * q.dtype.type(scale), xp.swapaxes(k_tile, -1, -2))  # (..., Tq, tile)
    key_end = key_start + k_tile.shape[-2]
    if mask is not None:
        if mask.dtype == bool:
            scores = xp.where(mask[..., key_start:key_end], -xp.inf, scores)
        else:  # a float mask is added to the scores (ALiBi, relative biases)
            scores = scores + mask[..., key_start:key_end]
    if is_causal:
        # The queries are the last Tq of the Tk positions (Tq = Tk in training; Tq = 1 when
        # generating with a KV cache): hide each query's future keys in this tile.
        # BEGIN SOLUTION attention_masks
        offset = k_total - q.shape[-2]  # query i sees keys j <= i + (Tk - Tq)
        queries = xp.arange(q.shape[-2])[:, None]
        keys = xp.arange(key_start, key_end)[None, :]
        xp.copyto(scores, -xp.inf, where=keys > queries + offset)
        # END SOLUTION
    return scores
