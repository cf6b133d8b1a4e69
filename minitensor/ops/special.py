"""SciPy's special functions (expit, erf, ndtr), imported on first use.

scipy.special takes about half a second to import, and every process that imports minitensor
paid it, though most never call one: each graded task's worker (about 150 per run of the test
suite), a script that only builds a graph. The first sigmoid, SiLU or GELU imports it."""


def scipy_special():
    """The scipy.special module (imported here the first time, then Python's cached module)."""
    import scipy.special

    return scipy.special


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x)), without overflow: scipy.special.expit."""
    return scipy_special().expit(x)
