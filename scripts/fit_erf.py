"""Fit the coefficients of the Numba backend's float32 erf (numba_backend/elementwise.py).

    |z| < 0.875:   erf(z) = z + z * P(z^2),      P(0) = 2/sqrt(pi) - 1 (rounded to float32)
    0.875 <= t:    erf(t) = 1 - exp(Q(t)),       Q(t) ~ log erfc(t) on [0.875, 4]

P minimises the largest relative error of erf (what ulps measure near 0), Q the largest
absolute error of 1 - exp(Q) (what ulps measure near 1). Each is a minimax fit by Lawson's
iteration (least squares, reweighted towards the worst points), then rounded to float32 one
coefficient at a time, highest degree first, with the lower ones refitted around the rounded
ones, so the rounding errors are absorbed rather than added up.

Run: python scripts/fit_erf.py   (prints the two tuples to paste; tests/test_erf.py checks them)
"""

import numpy as np
from scipy.special import erf, erfc

SWITCH, CLAMP = 0.875, 4.0
P_TERMS, Q_TERMS = 6, 8


def minimax(basis, target, weight, iterations=300):
    """Coefficients c minimising max |weight * (basis @ c - target)| (Lawson's iteration)."""
    lawson = np.ones(len(target))
    for _ in range(iterations):
        scale = np.sqrt(lawson) * weight
        coefficients, *_ = np.linalg.lstsq(basis * scale[:, None], target * scale, rcond=None)
        error = np.abs((basis @ coefficients - target) * weight)
        lawson = lawson * error
        lawson /= lawson.sum()
    return coefficients


def minimax_in_float32(basis, target, weight):
    """minimax(), with each coefficient rounded to float32 and the lower ones refitted."""
    rounded = {}
    for degree in reversed(range(basis.shape[1])):
        rest = target - sum(value * basis[:, d] for d, value in rounded.items())
        free = [d for d in range(basis.shape[1]) if d not in rounded]
        coefficients = minimax(basis[:, free], rest, weight)
        rounded[degree] = float(np.float32(coefficients[free.index(degree)]))
    return [rounded[d] for d in range(basis.shape[1])]


def fit_p():
    z = np.linspace(0, SWITCH, 20001)[1:]
    p0 = float(np.float32(2 / np.sqrt(np.pi) - 1))  # erf(z) / z at 0, held fixed
    basis = np.stack([(z * z) ** d for d in range(1, P_TERMS)], axis=1)
    target = (erf(z) - z) / z - p0  # P(z^2) - p0
    return [p0] + minimax_in_float32(basis, target, weight=z / erf(z))


def fit_q():
    t = np.linspace(SWITCH, CLAMP, 30001)
    basis = np.stack([t**d for d in range(Q_TERMS)], axis=1)
    return minimax_in_float32(basis, np.log(erfc(t)), weight=erfc(t))


if __name__ == "__main__":
    for name, coefficients in (("_ERF_P", fit_p()), ("_ERF_Q", fit_q())):
        print(f"{name} = (" + ", ".join(repr(np.float32(c)) for c in coefficients) + ")")  # np.float32(...)
