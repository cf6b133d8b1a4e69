"""Every process-wide setting the Numba backend makes, in one place.

Importing the backend runs this module first; nothing else in the package changes anything
outside itself. What it sets, and how to override each:

- Numba's threading layer: "workqueue", unless NUMBA_THREADING_LAYER is set.
- SciPy's own OpenBLAS (the copy Numba's np.dot calls): one thread. NumPy's BLAS is not
  touched here; blas_threads.py chooses its threads per product.
- Numba's thread count: Numba's default (every core), or NUMBA_NUM_THREADS.
- The on-disk cache: every kernel is compiled with cache=True, so a second process loads it
  instead of compiling again; NUMBA_CACHE_DIR moves the cache (the homework grader does).
  Numba keys a kernel's cache on its own file only, so `drop_stale_cache` (below) drops the
  package's cache when any of its files changed.
- NUMBA_DISABLE_JIT=1 makes every kernel an ordinary Python function, to step into with pdb.

And the floating-point flags the kernels compile with (LLVM's fast-math flags, chosen per
kernel family; see each set's comment).
"""

import os
import pathlib

import numba

# Numba's threads and OpenBLAS's threads fight for the same cores: the default (OpenMP) layer
# spins its waiting threads while BLAS runs, the workqueue layer does not
# (compare: NUMBA_THREADING_LAYER=omp python -m benchmarks block). A user's own choice wins.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"


def single_threaded_blas_for_numba():
    """Numba reaches BLAS through SciPy's own OpenBLAS (a second copy, beside NumPy's).
    Every BLAS call from our kernels happens inside a parallel loop that already uses
    every core, so that copy's threads only fight ours and slow the kernels down
    (`python -m benchmarks kernels` times them). NumPy's BLAS (the big products outside
    the kernels) keeps all its threads."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # the limit is a speed-up, not a requirement
        return
    # Load that copy now, so that it is there to limit: Numba loads it only at a kernel's first
    # np.dot, long after this (and nothing else in minitensor imports SciPy at start: ops/special.py).
    import scipy.linalg.cython_blas  # noqa: F401
    controller = ThreadpoolController()
    scipy_paths = [lib.filepath for lib in controller.lib_controllers if "scipy.libs" in lib.filepath]
    scipy_blas = controller.select(filepath=scipy_paths)
    scipy_blas.limit(limits=1)


single_threaded_blas_for_numba()



# Fast-math flags. The elementwise kernels (exp, erf, GELU): not full fastmath, because
# reassociation would fold t - k*LN2_HI - k*LN2_LO into t - k*ln2 and lose the exactness of
# exp's split, and regrouped GELU's x * du * s * (1 - s) so that a product of two huge factors
# overflowed before the tiny ones could cancel it; infinities must stay (exp(-inf) = 0 for
# hidden scores).
EXP_FLAGS = {"nsz", "arcp", "contract", "afn"}

# The row kernels (softmax, layer norm, attention) may also reorder their sums ("reassoc"),
# which is what lets the compiler vectorise a reduction; they keep IEEE infinities and NaNs
# (no "ninf"/"nnan"), because a fully masked row is recognised by its maximum being -inf.
ROW_FLAGS = EXP_FLAGS | {"reassoc"}


def drop_stale_cache(kernel):
    """Drop every cached kernel of this package that is older than its newest file.

    Numba checks a cached kernel against its own file only, and the kernels compile in helpers
    from other files (exp from elementwise.py into softmax and attention, the tile helpers into
    both attention paths): after an edit to a helper they would load their old code. A kernel
    whose index is dropped compiles again on its next call, once. `kernel` is any cached kernel
    of the package (they share one cache folder)."""
    try:
        folder = pathlib.Path(kernel._cache._cache_path)  # Numba's own choice of folder
    except AttributeError:  # NUMBA_DISABLE_JIT=1 (nothing cached), or another Numba's internals
        return
    newest = max(path.stat().st_mtime for path in pathlib.Path(__file__).parent.glob("*.py"))
    for index in folder.glob("*.nbi"):
        try:
            if index.stat().st_mtime < newest:
                index.unlink()
        except OSError:  # another process dropped or rewrote it first
            pass
