"""How many threads NumPy's BLAS uses for one product, chosen by its size and by how busy
the machine is.

    with blas_threads.for_product(a, b):
        np.matmul(a, b)

OpenBLAS's threads wait for each other by spinning. When anything else runs on the machine,
a thread that loses its core stalls the others, and a small product that one thread finishes
quickly can take many times longer on two (`python -m benchmarks train` times a GRU step
beside a busy process). So:

- a small product always runs on one thread: a second one gains little even when idle;
- a large one runs on as many of NumPy's BLAS threads as there are cores other processes
  leave free (machine_load.py: the machine's CPU counters less this process's own CPU time):
  all of them on an idle machine, one on two cores with one busy process beside it.
"""


# Multiply-adds below which a product runs on one BLAS thread. Every product of the GRU step
# ((64, 64) @ (64, 192) and its backward: 2**19.6) is below it, where a second thread gains
# nothing idle and costs several times over beside a busy process. The products of the
# adding-problem transformer ((6464, 64) @ (64, 64): 2**24.7, up to 2**26.7) are above it,
# where two idle cores share the work, which is most of why PyTorch (which threads them) was
# faster per step. `python -m benchmarks train` (the GRU beside a busy
# process, and the transformer's step) is how to move it.
ONE_THREAD_BELOW = 2**22

_blas = None  # [controller] for NumPy's BLAS, found on first use


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


def free_cores():
    """machine_load.free_cores(), that module imported at the first product large enough to share."""
    from .machine_load import free_cores as measured

    return measured()


def multiply_adds_per_call(a, b):
    """The multiply-adds of one BLAS call of a @ b: NumPy's matmul makes one call per matrix of a
    batch, and each call wakes (and waits for) the BLAS threads again. A batch of attention's small
    products, (16, 4, 128, 32) @ (16, 4, 32, 128), is 64 calls of 2**19 multiply-adds: one thread
    each, however large the batch."""
    n = a.shape[-2] if a.ndim > 1 else 1
    k = a.shape[-1]
    m = b.shape[-1] if b.ndim > 1 else 1
    return n * k * m


class for_product:
    """`with for_product(a, b):` NumPy's BLAS on the threads chosen above for a @ b inside the
    block; the thread count is put back afterwards, so NumPy code outside minitensor keeps
    whatever it had."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __enter__(self):
        self.put_back = []
        if not _numpy_blas():
            return self
        use = 1 if multiply_adds_per_call(self.a, self.b) < ONE_THREAD_BELOW else free_cores()
        for lib in _blas:
            count = lib.get_num_threads()
            if count > use:
                lib.set_num_threads(use)
                self.put_back.append((lib, count))
        return self

    def __exit__(self, *exc_info):
        for lib, count in self.put_back:
            lib.set_num_threads(count)
        return False


def product(matmul, a, b):
    """matmul(a, b) on the BLAS threads chosen above (for np.dot, or a wrapper that records)."""
    with for_product(a, b):
        return matmul(a, b)
