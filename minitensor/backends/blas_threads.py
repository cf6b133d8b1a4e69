"""How many threads NumPy's BLAS uses for one product, chosen by the product's size.

OpenBLAS's threads wait for each other by spinning. On a machine where anything else runs
(a student's laptop always has something), a thread that loses its core stalls the others,
and a product that takes a fraction of a millisecond on one thread can take orders of
magnitude longer on two (`python -m benchmarks train`, the GRU step beside a busy process).
Small products gain little from a second thread even on an idle machine, so they run on one;
large ones keep the threads NumPy's BLAS has.
"""

# Multiply-adds below which a product runs on one BLAS thread: every product of the seed's
# adding-problem model (the largest, (6464, 64) @ (64, 256), is 2**26.7) is below it; the
# MLP products of the block benchmark ((2048, 256) @ (256, 1024): 2**29) are above it.
# `python -m benchmarks train` and `block` are how to move it.
ONE_THREAD_BELOW = 2**27

_blas = None  # [(controller, threads)] for NumPy's BLAS, found on first use


def _numpy_blas():
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # a speed-up, not a requirement
            _blas = []
            return _blas
        # SciPy's own BLAS (Numba's) is not NumPy's: the numba backend keeps it at one thread.
        _blas = [lib for lib in ThreadpoolController().lib_controllers
                 if lib.user_api == "blas" and "scipy.libs" not in lib.filepath]
    return _blas


def multiply_adds(a, b):
    """The multiply-adds of a @ b (batch x n x k x m)."""
    n = a.shape[-2] if a.ndim > 1 else 1
    m = b.shape[-1] if b.ndim > 1 else 1
    return max(a.size * m, b.size * n)


def product(matmul, a, b):
    """matmul(a, b), on one BLAS thread if the product is small; the thread count is put
    back afterwards, so NumPy code outside minitensor keeps whatever it had."""
    if multiply_adds(a, b) >= ONE_THREAD_BELOW or not _numpy_blas():
        return matmul(a, b)
    threads = [lib.get_num_threads() for lib in _blas]
    for lib in _blas:
        lib.set_num_threads(1)
    try:
        return matmul(a, b)
    finally:
        for lib, count in zip(_blas, threads):
            lib.set_num_threads(count)
