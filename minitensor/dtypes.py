"""dtypes: the default floating dtype, the devices a tensor can live on, and which arrays
can require gradients."""

import numpy as np

_default_dtype = np.dtype(np.float32)
DEVICES = {"numpy": "numpy", "cpu": "numpy", "cupy": "cupy", "cuda": "cupy"}


def set_default_dtype(dtype):
    """The dtype Python floats and lists of floats become (float32 unless changed)."""
    global _default_dtype
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"set_default_dtype: the default must be a floating dtype, got {dtype}")
    _default_dtype = dtype


def get_default_dtype():
    return _default_dtype


def check_can_require_grad(array, requires_grad):
    """Only real floating-point arrays can require gradients: refuse the rest, saying why."""
    if requires_grad and array.dtype.kind == "c":
        raise TypeError(
            f"complex tensors cannot require gradients in minitensor (this one has shape "
            f"{array.shape} and dtype {array.dtype}): its ops differentiate real functions only, "
            f"so complex gradients would be wrong. Keep the real and imaginary parts as two "
            f"float tensors."
        )
    if requires_grad and array.dtype.kind != "f":
        raise TypeError(
            f"only floating-point tensors can require gradients, but this tensor "
            f"(shape {array.shape}) has dtype {array.dtype}. Create it as floats, e.g. "
            f"mt.tensor(x, dtype='float32', requires_grad=True)."
        )
