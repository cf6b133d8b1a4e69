"""When a value of your model departs from the reference's: compare's tolerance, shared by the
judging of minitensor references (compare.py) and of PyTorch ones (compare_torch.py)."""

import numpy as np

NOISE_MARGIN = 8.0  # a node departs when farther from the reference than 8 times the reference's own error
ROUNDING_UNITS = 64  # ... plus 64 units of rounding of the dtype, times the reference's largest magnitude


def _rounding(dtype):
    return np.finfo(dtype).eps if np.dtype(dtype).kind == "f" else 0.0


def difference(mine, reference, noise=None):
    """None when `mine` agrees with `reference` within the tolerance, else (worst index, mine's value,
    the reference's value, |difference|, tolerance). `noise` is the reference's own float64 error."""
    mine, reference = np.asarray(mine), np.asarray(reference)
    if mine.shape != reference.shape:
        return ((), f"shape {mine.shape}", f"shape {reference.shape}", np.inf, 0.0)
    if reference.dtype.kind not in "fc" or mine.size == 0:
        equal = np.array_equal(mine, reference)
        return None if equal else ((), "other values", "", np.inf, 0.0)
    wide_mine, wide_reference = mine.astype(np.float64), reference.astype(np.float64)
    gap = np.abs(wide_mine - wide_reference)
    gap = np.where(np.isnan(wide_mine) & np.isnan(wide_reference), 0.0, gap)
    gap = np.where(np.isnan(gap), np.inf, gap)  # NaN on one side only
    scale = float(np.nanmax(np.abs(wide_reference), initial=0.0))
    tolerance = NOISE_MARGIN * (noise or 0.0) + ROUNDING_UNITS * _rounding(reference.dtype) * scale
    if not (gap.max() > tolerance):
        return None
    worst = np.unravel_index(int(np.argmax(gap)), gap.shape)
    return worst, mine[worst].item(), reference[worst].item(), float(gap[worst]), float(tolerance)
