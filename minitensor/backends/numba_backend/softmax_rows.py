"""Softmax and log-softmax, fused: one pass over memory per row, rows in parallel.

Each wrapper lays its input out as rows (layout.py), runs one kernel over them and puts the
axis back. A mask is read as rows that repeat, never copied out to the scores' size.
"""

import math

import numpy as np
from numba import njit, prange

from . import layout
from .elementwise import exp_into
from .settings import ROW_FLAGS



@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def _softmax_rows(x, hidden, y):
    """y[r] = softmax(x[r]) over the entries not hidden; a fully hidden row is all zeros.
    Row r of x uses row r % len(hidden) of the mask (a mask shared by leading axes repeats).
    The loops use selects, not branches, so that they vectorise; a NaN is passed over by the
    max but not by exp, so a visible NaN still makes its whole row NaN (as in NumPy)."""
    use_mask = hidden.shape[0] > 0
    for r in prange(x.shape[0]):
        m = r % hidden.shape[0] if use_mask else 0
        row_max = -np.inf
        if use_mask:
            for c in range(x.shape[1]):
                row_max = max(row_max, -np.inf if hidden[m, c] else x[r, c])
        else:
            for c in range(x.shape[1]):
                row_max = max(row_max, x[r, c])
        if row_max == -np.inf:  # nothing visible (the policy: zeros, not 0 / 0), or only NaN
            y[r, :] = 0.0
            for c in range(x.shape[1]):
                if x[r, c] != x[r, c] and not (use_mask and hidden[m, c]):
                    y[r, :] = np.nan
            continue
        exp_into(x[r], row_max, y[r])
        total = 0.0
        if use_mask:
            h = hidden[m]
            for c in range(x.shape[1]):
                y[r, c] = 0.0 if h[c] else y[r, c]
                total += y[r, c]
        else:
            for c in range(x.shape[1]):
                total += y[r, c]
        inverse = 1.0 / total
        for c in range(x.shape[1]):
            y[r, c] *= inverse


# BEGIN SOLUTION softmax_backward
@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def _softmax_backward_rows(y, dy, dx):
    """dx[r] = y[r] * (dy[r] - sum(dy[r] * y[r])). A dy of one column is one number per row,
    the same for every entry (see layout.gradient_rows)."""
    for r in prange(y.shape[0]):
        if dy.shape[1] == 1:
            g = dy[r, 0]
            total = 0.0
            for c in range(y.shape[1]):
                total += y[r, c]
            dot = g * total
            for c in range(y.shape[1]):
                dx[r, c] = y[r, c] * (g - dot)
            continue
        dot = 0.0
        for c in range(y.shape[1]):
            dot += dy[r, c] * y[r, c]
        for c in range(y.shape[1]):
            dx[r, c] = y[r, c] * (dy[r, c] - dot)
# END SOLUTION


@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def _log_softmax_rows(x, y):
    """y[r] = (x[r] - max) - log sum exp(x[r] - max)."""
    for r in prange(x.shape[0]):
        row_max = -np.inf
        for c in range(x.shape[1]):
            row_max = max(row_max, x[r, c])  # passes over NaN (and vectorises); exp then does not
        exp_into(x[r], row_max, y[r])  # y as scratch for the exps
        total = 0.0
        for c in range(x.shape[1]):
            total += y[r, c]
        # y = (x - max) - log sum, the reference's order, in two passes. Grouped as
        # x - (max + log sum), max + log sum rounds to max once |max| dwarfs log sum (|x| ~ 1e14
        # in float64) and every y becomes 0. In one pass, "reassoc" lets the compiler hoist
        # max + log sum out of the loop, which is that grouping; the store between the passes
        # keeps the order.
        for c in range(x.shape[1]):
            y[r, c] = x[r, c] - row_max
        log_total = math.log(total)
        for c in range(x.shape[1]):
            y[r, c] -= log_total


def softmax(x, axis=-1, mask=None):
    rows, moved_shape = layout.rows(x, axis)
    hidden = layout.no_mask() if mask is None else layout.mask_rows(mask, x.shape, axis % x.ndim)
    y = np.empty_like(rows)
    if rows.size:
        _softmax_rows(rows, hidden, y)
    return layout.unrows(y, moved_shape, axis)


# BEGIN SOLUTION softmax_backward
def softmax_backward(y, dy, axis=-1):
    return layout.rows_backward(_softmax_backward_rows, y, dy, axis)
# END SOLUTION


def log_softmax(x, axis=-1):
    rows, moved_shape = layout.rows(x, axis)
    y = np.empty_like(rows)
    if rows.size:
        _log_softmax_rows(rows, y)
    return layout.unrows(y, moved_shape, axis)


# BEGIN SOLUTION softmax_backward
@njit(parallel=True, cache=True, fastmath=ROW_FLAGS)
def _log_softmax_backward_rows(y, dy, dx):
    """dx[r] = dy[r] - exp(y[r]) * sum(dy[r]). A dy of one column is one number per row,
    the same for every entry (see layout.gradient_rows)."""
    for r in prange(y.shape[0]):
        exp_into(y[r], 0.0, dx[r])  # dx as scratch for exp(y)
        if dy.shape[1] == 1:
            g = dy[r, 0]
            total = g * y.shape[1]
            for c in range(y.shape[1]):
                dx[r, c] = g - dx[r, c] * total
            continue
        total = 0.0
        for c in range(y.shape[1]):
            total += dy[r, c]
        for c in range(y.shape[1]):
            dx[r, c] = dy[r, c] - dx[r, c] * total


def log_softmax_backward(y, dy, axis=-1):
    return layout.rows_backward(_log_softmax_backward_rows, y, dy, axis)
# END SOLUTION

