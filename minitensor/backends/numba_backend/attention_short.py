"""Attention for up to SHORT_KEYS keys: a block of queries against every key it may see at once.

No running max and no rescaling: a block's scores fit in the cache, so each row is a plain
softmax (max, exp, sum) between two BLAS products. Causal, a block stops at its last query's
last visible key. The arrays are (batch*heads, T, d), as layout.heads makes them.
"""

import numpy as np
from numba import njit, prange

from .score_tiles import add_into, copy_into, exp_block, mask_tile, visible_row_max
from .settings import ROW_FLAGS


# BEGIN SOLUTION tiled_attention
@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def forward(q, k, v, hidden, bias, causal, causal_offset, scale, query_block, out, row_max, row_sum):
    """out = softmax(q k^T * scale + bias, hidden) v, a block of queries against every key it
    may see at once (up to SHORT_KEYS keys), one block per job. Causal, a block stops at its
    last query's last visible key."""
    heads, queries, _ = q.shape
    blocks = (queries + query_block - 1) // query_block
    for job in prange(heads * blocks):
        bh = job // blocks
        i0 = (job % blocks) * query_block
        i1 = min(i0 + query_block, queries)
        key_end = min(k.shape[1], i1 + causal_offset) if causal else k.shape[1]
        if key_end <= 0:  # these queries see no key: zero output (the policy), l = 0
            out[bh, i0:i1] = 0.0
            row_max[bh, i0:i1] = -np.inf
            row_sum[bh, i0:i1] = 0.0
            continue
        scores = np.dot(q[bh, i0:i1], k[bh, :key_end].T)  # (block, keys), BLAS
        mask_tile(scores, bh, i0, 0, hidden, bias, causal, causal_offset, scale)
        visible_row_max(scores, row_max[bh, i0:i1])
        weights = np.empty(scores.shape, dtype=q.dtype)
        exp_block(scores, row_max[bh, i0:i1], weights)  # exp(s - m), not yet divided by l
        for a in range(i1 - i0):
            total = 0.0
            for b in range(key_end):
                total += weights[a, b]
            row_sum[bh, i0 + a] = total
            if total != total and row_max[bh, i0 + a] != np.inf:  # a NaN score: the row's max is NaN
                row_max[bh, i0 + a] = total
        block_out = np.dot(weights, v[bh, :key_end])  # (block, dv), BLAS
        for a in range(i1 - i0):
            # a fully masked row (l = 0) outputs zero (the policy); "!= 0" lets a NaN through
            inverse = 1.0 / row_sum[bh, i0 + a] if row_sum[bh, i0 + a] != 0 else 0.0
            for c in range(out.shape[2]):
                out[bh, i0 + a, c] = block_out[a, c] * inverse


@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def backward(q, k, v, out, row_max, row_sum, dout, hidden, bias, causal, causal_offset, scale, query_block,
             dq, dk, dv):
    """attention_tiled.backward with one tile holding every key a block of queries sees, and 1 / l
    folded into the small factors: with W = exp(S - m) and P = W / l,
    dV = W^T (dO / l), dS = W * (dO V^T - D) / l, dQ = scale dS K, dK = scale dS^T Q.
    One (batch*head) per job, so no two threads add into the same dK or dV (zeros on entry)."""
    heads, queries, _ = q.shape
    for job in prange(heads):
        bh = np.int64(job)  # (the parfor index alone is typed as a float inside mask_tile)
        for i0 in range(0, queries, query_block):
            i1 = min(i0 + query_block, queries)
            key_end = min(k.shape[1], i1 + causal_offset) if causal else k.shape[1]
            if key_end <= 0:
                dq[bh, i0:i1] = 0.0
                continue
            scores = np.dot(q[bh, i0:i1], k[bh, :key_end].T)
            mask_tile(scores, bh, i0, 0, hidden, bias, causal, causal_offset, scale)
            inverse = np.empty(i1 - i0, dtype=q.dtype)  # 1 / l, and 0 for a fully masked row (no gradient)
            for a in range(i1 - i0):
                inverse[a] = 1.0 / row_sum[bh, i0 + a] if row_sum[bh, i0 + a] != 0 else 0.0
            weights = np.empty(scores.shape, dtype=q.dtype)
            exp_block(scores, row_max[bh, i0:i1], weights)
            dout_over_l = np.empty((i1 - i0, dout.shape[2]), dtype=q.dtype)
            for a in range(i1 - i0):
                for c in range(dout.shape[2]):
                    dout_over_l[a, c] = dout[bh, i0 + a, c] * inverse[a]
            add_into(dv[bh, :key_end], np.dot(weights.T, dout_over_l))
            dS = np.dot(dout[bh, i0:i1], v[bh, :key_end].T)  # dP, then dS in place
            for a in range(i1 - i0):
                D = 0.0
                for c in range(out.shape[2]):
                    D += dout[bh, i0 + a, c] * out[bh, i0 + a, c]
                factor = inverse[a] * scale
                for b in range(key_end):
                    dS[a, b] = weights[a, b] * (dS[a, b] - D) * factor
            copy_into(dq[bh, i0:i1], np.dot(dS, k[bh, :key_end]))
            add_into(dk[bh, :key_end], np.dot(dS.T, q[bh, i0:i1]))
# END SOLUTION
