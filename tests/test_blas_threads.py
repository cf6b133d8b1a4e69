"""Small products run on one BLAS thread, large ones on all, and the count is put back
(issue 12: OpenBLAS's spinning threads stall on a busy machine)."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from minitensor.backends import blas_threads, numba_backend, numpy_backend


def _numpy_blas_threads():
    return [lib["num_threads"] for lib in threadpool_info()
            if lib["user_api"] == "blas" and "scipy.libs" not in lib["filepath"]]


@pytest.mark.parametrize("backend", [numpy_backend, numba_backend])
@pytest.mark.parametrize("shapes, one_thread", [(((64, 64), (64, 192)), True), (((3, 8, 64, 64), (64, 32)), True),
                                               (((600, 600), (600, 600)), False)])
def test_small_products_use_one_blas_thread_and_put_the_count_back(monkeypatch, backend, shapes, one_thread):
    if not _numpy_blas_threads():
        pytest.skip("threadpoolctl sees no BLAS")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s) for s in shapes)
    seen = []
    real_matmul, real_dot = np.matmul, np.dot

    def recording(real):
        def call(x, y):
            seen.append(_numpy_blas_threads())
            return real(x, y)
        return call

    monkeypatch.setattr(blas_threads, "ONE_THREAD_BELOW", 600**3)  # 600^3 multiply-adds: large
    with threadpool_limits(limits=2, user_api="blas"):
        before = _numpy_blas_threads()
        monkeypatch.setattr(np, "matmul", recording(real_matmul))
        monkeypatch.setattr(np, "dot", recording(real_dot))
        result = backend.matmul(a, b)
        monkeypatch.undo()
        after = _numpy_blas_threads()
    np.testing.assert_allclose(result, np.matmul(a, b), rtol=1e-12)
    assert after == before
    assert seen and all(threads == ([1] * len(before) if one_thread else before) for threads in seen)


def test_multiply_adds_counts_batches_on_either_side():
    assert blas_threads.multiply_adds(np.ones((5, 2, 3)), np.ones((3, 4))) == 5 * 2 * 3 * 4
    assert blas_threads.multiply_adds(np.ones((2, 3)), np.ones((5, 3, 4))) == 5 * 2 * 3 * 4
    assert blas_threads.multiply_adds(np.ones(3), np.ones(3)) == 3
