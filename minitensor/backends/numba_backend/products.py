"""Matrix products: BLAS does the work, on the threads blas_threads.py chooses for the size.

A stack of rows times one matrix (x @ W in every linear layer) reaches this already as one
large product: ops/linalg.py's MatMul hands every backend (batch * n, k) @ (k, m), so there is
nothing to flatten here. A Numba kernel running a batch of matrices in parallel (np.dot per
matrix) was slower than np.matmul, so there is none.
"""

import numpy as np

from .. import blas_threads


def matmul(a, b):
    """a @ b with NumPy's batching rules."""
    return blas_threads.product(np.matmul, a, b)
