"""No accelerator: under "numpy" (the default) every op computes with its own code.

accelerator_for finds none of the KERNELS here, so Softmax.backward, LayerNormFunction.backward,
Attention.forward, ... run the lines you read in minitensor/ops/. What is left is the matrix
product, which every setting needs: NumPy's matmul on BLAS.
"""

import numpy as np

from . import blas_threads

xp = np
name = "numpy"


def matmul(a, b):
    """a @ b with NumPy's batching rules. BLAS does the work, on the threads blas_threads.py
    chooses for its size (one for a small product, which a busy machine cannot stall).
    Code that swaps or wraps `matmul` (demos/model_size.py counts the matrix products of the
    linear layers that way) sees only the products the ops ask for: attention's own are its own."""
    if not isinstance(a, np.ndarray):  # a CuPy array: cuBLAS chooses for itself
        return a @ b
    with blas_threads.for_product(a, b):
        return np.matmul(a, b)
