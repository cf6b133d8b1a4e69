"""Layer norm, fused: one row at a time, rows in parallel (forward and backward).

The backward sums dweight and dbias over rows without two threads ever writing the same
memory: each chunk of rows adds into its own row of partial sums, added up afterwards.
"""

import math

import numba
import numpy as np
from numba import njit, prange

from . import layout
from ..conventions import common_dtype
from .settings import ROW_FLAGS



@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def _layer_norm_rows(x, weight, bias, eps, y, mean, rstd):
    """One row at a time: mean, biased variance (two passes, for accuracy), normalise, affine."""
    n = x.shape[1]
    for r in prange(x.shape[0]):
        total = 0.0
        for c in range(n):
            total += x[r, c]
        row_mean = total / n
        squares = 0.0
        for c in range(n):
            squares += (x[r, c] - row_mean) ** 2
        row_rstd = 1.0 / math.sqrt(squares / n + eps)
        for c in range(n):
            value = (x[r, c] - row_mean) * row_rstd
            if weight.shape[0]:
                value = value * weight[c] + bias[c]
            y[r, c] = value
        mean[r] = row_mean
        rstd[r] = row_rstd


# BEGIN SOLUTION layer_norm_backward
@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def _layer_norm_backward_rows(dy, x, weight, mean, rstd, dx, dweight_parts, dbias_parts):
    """dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)), g = dy * weight, in one pass per row.

    dweight and dbias sum over rows; each thread's chunk of rows adds into its own
    row of *_parts (no two threads write the same memory), summed afterwards.
    """
    rows, n = x.shape
    chunks = dweight_parts.shape[0]
    for chunk in prange(chunks):
        for r in range(chunk * rows // chunks, (chunk + 1) * rows // chunks):
            g_sum = 0.0
            g_xhat_sum = 0.0
            for c in range(n):
                x_hat = (x[r, c] - mean[r]) * rstd[r]
                g = dy[r, c] * weight[c] if weight.shape[0] else dy[r, c]
                g_sum += g
                g_xhat_sum += g * x_hat
                if weight.shape[0]:
                    dweight_parts[chunk, c] += dy[r, c] * x_hat
                    dbias_parts[chunk, c] += dy[r, c]
            g_mean = g_sum / n
            g_xhat_mean = g_xhat_sum / n
            for c in range(n):
                x_hat = (x[r, c] - mean[r]) * rstd[r]
                g = dy[r, c] * weight[c] if weight.shape[0] else dy[r, c]
                dx[r, c] = rstd[r] * (g - g_mean - x_hat * g_xhat_mean)
# END SOLUTION


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    dtype = common_dtype(x, weight, bias)  # the ops' rule (conventions.common_dtype)
    rows = layout.as_input(x, (math.prod(x.shape[:-1]), x.shape[-1]), dtype)  # not -1: a last axis of 0
    empty = np.zeros(0, dtype=dtype)
    weight = layout.as_input(empty if weight is None else weight, -1, dtype)
    bias = layout.as_input(np.zeros_like(weight) if bias is None else bias, -1, dtype)
    y = np.empty_like(rows)
    mean = np.empty(rows.shape[0], dtype=dtype)
    rstd = np.empty(rows.shape[0], dtype=dtype)
    if rows.size:
        _layer_norm_rows(rows, weight, bias, eps, y, mean, rstd)
    stats_shape = x.shape[:-1] + (1,)
    return y.reshape(x.shape), mean.reshape(stats_shape), rstd.reshape(stats_shape)


# BEGIN SOLUTION layer_norm_backward
def layer_norm_backward(dy, x, weight, mean, rstd):
    dtype = common_dtype(x, weight, mean)
    rows = layout.as_input(x, (math.prod(x.shape[:-1]), x.shape[-1]), dtype)  # not -1: a last axis of 0
    dy_rows = layout.as_input(dy, rows.shape, dtype)
    w = layout.as_input(np.zeros(0) if weight is None else weight, -1, dtype)
    chunks = max(1, min(rows.shape[0], 4 * numba.get_num_threads()))
    parts_width = rows.shape[1] if weight is not None else 0
    dweight_parts = np.zeros((chunks, parts_width), dtype=np.float64)
    dbias_parts = np.zeros((chunks, parts_width), dtype=np.float64)
    dx = np.empty_like(rows)
    if rows.size:
        mean, rstd = layout.as_input(mean, -1, dtype), layout.as_input(rstd, -1, dtype)
        _layer_norm_backward_rows(dy_rows, rows, w, mean, rstd, dx, dweight_parts, dbias_parts)
    if weight is None:
        return dx.reshape(x.shape), None, None
    return dx.reshape(x.shape), dweight_parts.sum(axis=0).astype(dtype), dbias_parts.sum(axis=0).astype(dtype)
# END SOLUTION
