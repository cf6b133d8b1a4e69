"""The mask rule: one function, called once at the entry of every op or layer that takes a mask."""

import numpy as np


def check_mask(mask, shape, op, scores_dtype=None, true_means="hidden"):
    """Convert `mask` to an array and check it against the rule; return the array the ops take.

    The rule, for every op that takes a mask (softmax, masked_fill, attention) and every backend
    (the README states it under "Backends"):

    - It may be a NumPy or CuPy array, a Tensor (its data), nested lists or a Python bool.
    - A boolean mask marks hidden positions with True. PyTorch's `attn_mask` means the opposite
      (True takes part): `true_means="taking part"` reads it so and returns it inverted.
    - Attention (the callers that pass `scores_dtype`) also takes a floating-point mask, added to
      the scores; it is cast to the scores' dtype, so a mask never changes the result's dtype.
    - Nothing else: an integer 0/1 mask is ambiguous (a bias of 0 and 1, or hide where 1?)
      and PyTorch refuses it too.
    - Its shape broadcasts to `shape` without growing it (a 0-d mask, a (T, 1) mask, a
      (B, 1, 1, T) padding mask against (B, heads, T, T) scores, ...).

    It is called once per call, at the outermost entry (Tensor.softmax, Tensor.masked_fill,
    F.scaled_dot_product_attention, models.attention's layers); the ops below an entry take the
    array it returns as checked, and do not check it again.
    """
    if mask is None:
        raise TypeError(f"{op}: the mask is None; give a boolean mask (True hides) of a shape that broadcasts "
                        f"to {shape}")
    if hasattr(mask, "_requires_grad"):  # a Tensor (ops never import Tensor: it is known by its slot)
        mask = mask.data
    elif not hasattr(mask, "dtype"):  # nested lists, a Python bool
        mask = np.asarray(mask)
    is_float = np.issubdtype(mask.dtype, np.floating)
    if mask.dtype != np.bool_ and not (is_float and scores_dtype is not None):
        accepted = "boolean (True marks a hidden position)" + (
            " or floating point (added to the scores)" if scores_dtype is not None else ""
        )
        raise TypeError(
            f"{op}: the mask must be {accepted}, got dtype {mask.dtype}; for a 0/1 mask "
            f"where 1 hides a position, pass `mask != 0`"
        )
    shape = tuple(shape)
    try:
        fits = np.broadcast_shapes(mask.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        target = (f"the scores' shape {shape} (batch..., queries, keys)" if scores_dtype is not None
                  else f"the tensor's shape {shape}")
        raise ValueError(f"{op}: a mask of shape {tuple(mask.shape)} does not broadcast to {target}")
    if is_float:
        return mask.astype(scores_dtype, copy=False)
    return ~mask if true_means == "taking part" else mask
