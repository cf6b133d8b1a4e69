"""Attention over any number of keys, one tile of keys at a time (FlashAttention on a CPU).

Each block of QUERY_BLOCK queries walks the keys KEY_TILE at a time, keeping a running max and
normaliser per query and rescaling what it has summed so far when the max grows; the scores of
a block never outgrow the cache, whatever the sequence length. The backward recomputes each
tile's weights from the saved (row_max, row_sum) instead of storing them.
"""

import math

import numpy as np
from numba import njit, prange

from .elementwise import exp_into
from .score_tiles import add_into, copy_into, mask_tile

QUERY_BLOCK = 64  # queries handled together in attention (one BLAS call per key tile)
KEY_TILE = 128  # keys per tile


# BEGIN SOLUTION tiled_attention
@njit(parallel=True, cache=True)
def forward(q, k, v, hidden, bias, causal, causal_offset, scale, out, row_max, row_sum):
    """out = softmax(q k^T * scale + bias, hidden) v per (batch*head), one query block per job."""
    heads, queries, _ = q.shape
    keys = k.shape[1]
    query_blocks = (queries + QUERY_BLOCK - 1) // QUERY_BLOCK
    for job in prange(heads * query_blocks):
        bh = job // query_blocks
        i0 = (job % query_blocks) * QUERY_BLOCK
        i1 = min(i0 + QUERY_BLOCK, queries)
        q_block = q[bh, i0:i1]
        running_max = np.full(i1 - i0, -np.inf)
        normaliser = np.zeros(i1 - i0)
        acc = np.zeros((i1 - i0, v.shape[2]), dtype=q.dtype)
        weights = np.empty(KEY_TILE, dtype=q.dtype)  # one row of exp(scores - max)
        for j0 in range(0, keys, KEY_TILE):
            if causal and j0 > i1 - 1 + causal_offset:
                break  # every later key is in every query's future
            j1 = min(j0 + KEY_TILE, keys)
            scores = np.dot(q_block, k[bh, j0:j1].T)  # (block, tile), BLAS
            mask_tile(scores, bh, i0, j0, hidden, bias, causal, causal_offset, scale)
            for a in range(i1 - i0):
                new_max = running_max[a]
                for b in range(j1 - j0):
                    if scores[a, b] > new_max or scores[a, b] != scores[a, b]:  # NaN wins
                        new_max = scores[a, b]
                if new_max == -np.inf:  # nothing visible yet in this row
                    for b in range(j1 - j0):
                        scores[a, b] = 0.0
                    continue
                correction = math.exp(running_max[a] - new_max)  # 0 when nothing was seen
                exp_into(scores[a], new_max, weights[: j1 - j0])  # 0 for hidden keys (-inf)
                tile_sum = 0.0
                for b in range(j1 - j0):
                    scores[a, b] = weights[b]
                    tile_sum += weights[b]
                normaliser[a] = normaliser[a] * correction + tile_sum
                for c in range(acc.shape[1]):
                    acc[a, c] *= correction
                running_max[a] = new_max
            add_into(acc, np.dot(scores, v[bh, j0:j1]))  # (block, dv), BLAS
        for a in range(i1 - i0):
            # a fully masked row (l = 0) outputs zero (the policy); "!= 0" lets a NaN through
            inverse = 1.0 / normaliser[a] if normaliser[a] != 0 else 0.0
            for c in range(acc.shape[1]):
                out[bh, i0 + a, c] = acc[a, c] * inverse
            row_max[bh, i0 + a] = running_max[a]
            row_sum[bh, i0 + a] = normaliser[a]


@njit(parallel=True, cache=True)
def backward(q, k, v, out, row_max, row_sum, dout, hidden, bias, causal, causal_offset, scale, dq, dk, dv):
    """Recompute each tile's weights P = exp(S - m) / l and accumulate
    dV += P^T dO, dS = P * (dO V^T - D), dQ += scale dS K, dK += scale dS^T Q.
    One (batch*head) per job, so no two threads add into the same dK or dV."""
    heads, queries, _ = q.shape
    keys = k.shape[1]
    for job in prange(heads):
        bh = np.int64(job)  # (the parfor index alone is typed as a float inside mask_tile)
        for i0 in range(0, queries, QUERY_BLOCK):
            i1 = min(i0 + QUERY_BLOCK, queries)
            q_block = q[bh, i0:i1]
            dout_block = dout[bh, i0:i1]
            D = np.zeros(i1 - i0, dtype=q.dtype)
            for a in range(i1 - i0):
                for c in range(out.shape[2]):
                    D[a] += dout_block[a, c] * out[bh, i0 + a, c]
            dq_block = np.zeros((i1 - i0, q.shape[2]), dtype=q.dtype)
            weights = np.empty(KEY_TILE, dtype=q.dtype)
            for j0 in range(0, keys, KEY_TILE):
                if causal and j0 > i1 - 1 + causal_offset:
                    break
                j1 = min(j0 + KEY_TILE, keys)
                P = np.dot(q_block, k[bh, j0:j1].T)
                mask_tile(P, bh, i0, j0, hidden, bias, causal, causal_offset, scale)
                for a in range(i1 - i0):
                    total = row_sum[bh, i0 + a]
                    if total == 0:  # a fully masked row: no weights, no gradient
                        P[a, :] = 0.0
                        continue
                    exp_into(P[a], row_max[bh, i0 + a], weights[: j1 - j0])
                    inverse = 1.0 / total
                    for b in range(j1 - j0):
                        P[a, b] = weights[b] * inverse
                add_into(dv[bh, j0:j1], np.dot(P.T, dout_block))
                dS = np.dot(dout_block, v[bh, j0:j1].T)  # dP, then dS in place
                for a in range(i1 - i0):
                    for b in range(j1 - j0):
                        dS[a, b] = P[a, b] * (dS[a, b] - D[a]) * scale
                add_into(dq_block, np.dot(dS, k[bh, j0:j1]))
                add_into(dk[bh, j0:j1], np.dot(dS.T, q_block))
            copy_into(dq[bh, i0:i1], dq_block)
# END SOLUTION
