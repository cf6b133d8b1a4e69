"""What the ops' own code and every accelerator agree on, in one place (it imports nothing of ours)."""

import math

import numpy as np


def common_dtype(*arrays):
    """The dtype a kernel computes in when its inputs' dtypes differ: NumPy's promotion of
    all of them (float32 with float64 is float64), the rule every backend follows (None
    stands for an absent weight or bias)."""
    return np.result_type(*(a.dtype for a in arrays if a is not None))


def default_scale(d_k):
    """1 / sqrt(d_k); with d_k = 0 every score is an empty sum, 0, and any scale gives 0
    (PyTorch returns the mean of the values there, and so do we)."""
    return 1 / math.sqrt(d_k) if d_k else 1.0


def array_module(array):
    """numpy for NumPy arrays, cupy for CuPy arrays: the ops' own code runs on either."""
    if isinstance(array, (np.ndarray, np.generic)):
        return np
    import cupy  # only ever reached with a CuPy array in hand

    return cupy.get_array_module(array)
