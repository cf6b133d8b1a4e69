"""Hypothesis strategies: shapes (with size-1 and empty axes), broadcasting pairs,
and float64 arrays in several memory layouts so stride bugs surface."""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
nonempty_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
broadcast_pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=4)

LAYOUTS = ("contiguous", "fortran", "strided", "reversed")


def _with_layout(values, layout):
    """The same values, stored differently: C order, Fortran order, every other
    element of a bigger array, or a negative-stride view."""
    if values.ndim == 0 or values.size == 0:
        return values
    if layout == "fortran":
        return np.asfortranarray(values)
    if layout == "strided":
        bigger = np.zeros(values.shape[:-1] + (2 * values.shape[-1],), dtype=values.dtype)
        bigger[..., ::2] = values
        return bigger[..., ::2]
    if layout == "reversed":
        return values[..., ::-1].copy()[..., ::-1]
    return values


@st.composite
def arrays(draw, shape, low=None, high=None, dtype=np.float64):
    """A random array of `shape` (values from a seeded NumPy generator) in a random layout."""
    seed = draw(st.integers(0, 2**32 - 1))
    layout = draw(st.sampled_from(LAYOUTS))
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if low is not None:
        values = rng.uniform(low, high, size=shape)
    return _with_layout(values.astype(dtype), layout)
