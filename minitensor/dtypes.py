"""dtypes: the default floating dtype, the devices a tensor can live on, which arrays can
require gradients, and the array mt.tensor(data) makes of lists and numbers."""

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


def as_array(data, dtype=None, tensor_type=()):
    """The array mt.tensor(data) holds. NumPy arrays (and NumPy scalars) keep their dtype; Python
    floats and lists of floats take the default dtype; Python ints stay int64, bools stay bool.
    (`tensor_type`: Tensor, whose instances in a nested list are refused where they require grad.)"""
    if dtype is not None:
        return np.array(data, dtype=dtype)
    if isinstance(data, (np.ndarray, np.generic)):
        return np.array(data)
    if isinstance(data, (list, tuple)):
        _refuse_tensors_in_graph(data, tensor_type)
    try:
        array = np.array(data)
    except ValueError as error:  # a ragged list: NumPy's message names no op
        raise ValueError(f"tensor(): the nested lists are ragged (rows of different lengths): {error}") from None
    if array.dtype.kind not in "biufc":
        raise TypeError(
            f"tensor(): {type(data).__name__} {data!r:.60} gives a NumPy array of dtype {array.dtype}, not "
            f"numbers; a tensor holds booleans, integers or floats (as torch.tensor, which refuses it too)"
        )
    if array.dtype.kind == "f":
        array = array.astype(get_default_dtype())
    return array


def _refuse_tensors_in_graph(items, tensor_type):
    """mt.tensor([t1, t2]) would copy the values and drop the graph (and cast float64 to the
    default dtype): refuse it for tensors that require grad, and name the op that keeps both.
    (torch.tensor only warns and detaches; a silently missing gradient is worse to debug.)"""
    pending = [items]
    while pending:
        for item in pending.pop():
            if isinstance(item, (list, tuple)):
                pending.append(item)
            elif isinstance(item, tensor_type) and item.requires_grad:
                raise TypeError(
                    f"tensor(): the list holds a tensor that requires grad (shape {item.shape}, dtype "
                    f"{item.dtype}); copying it into a new tensor would cut it from the graph and give "
                    f"it no gradient. Use mt.stack([...]) (or mt.cat) to build the tensor inside the "
                    f"graph, keeping the dtype; or pass t.detach() to copy the values on purpose."
                )


def promotion(dtype, other_dtype, other_is_float_number, divide):
    """The dtypes two operands of an arithmetic op are cast to, as PyTorch promotes them (NumPy
    would give float64): an integer or bool operand meeting a float tensor takes its dtype; meeting
    a Python float, or in a true division of two integers, both take the default float dtype."""
    integral, other_integral = dtype.kind in "biu", other_dtype.kind in "biu"
    if integral and other_is_float_number:
        return _default_dtype, _default_dtype
    if integral and other_integral:
        return (_default_dtype, _default_dtype) if divide else (dtype, other_dtype)
    if integral and other_dtype.kind == "f":
        return other_dtype, other_dtype
    if other_integral and dtype.kind == "f":
        return dtype, dtype
    return dtype, other_dtype
