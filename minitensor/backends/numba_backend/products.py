"""Matrix products: BLAS does the work; this only hands it the largest calls it can."""

import numpy as np

from .. import blas_threads


def matmul(a, b):
    """a @ b. A stack of matrices times one matrix (x @ W in every Linear layer) becomes
    one large BLAS call on (batch * n, k) rows; everything else is np.matmul.

    A Numba kernel running a batch of matrices in parallel (np.dot per matrix) was
    slower than np.matmul, so there is none: NumPy already hands each matrix to BLAS.
    """
    if b.ndim == 2 and a.ndim > 2 and a.dtype == b.dtype:
        flat = np.ascontiguousarray(a).reshape(int(np.prod(a.shape[:-1])), a.shape[-1])  # (batch * n, k)
        return blas_threads.product(np.dot, flat, b).reshape(a.shape[:-1] + (b.shape[-1],))
    return blas_threads.product(np.matmul, a, b)  # a small product on one BLAS thread
