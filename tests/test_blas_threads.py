"""Small products run on one BLAS thread, large ones on the cores other processes leave
free, and the count is put back (issue 12: OpenBLAS's spinning threads stall on a busy machine)."""

import os

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from minitensor.backends import blas_threads, machine_load, numba_backend, numpy_backend


def _numpy_blas_threads():
    return [lib["num_threads"] for lib in threadpool_info()
            if lib["user_api"] == "blas" and "scipy.libs" not in lib["filepath"]]


@pytest.mark.parametrize("backend", [numpy_backend, numba_backend])
@pytest.mark.parametrize("shapes, one_thread", [(((64, 64), (64, 192)), True), (((3, 8, 64, 64), (64, 32)), True),
                                               (((600, 600), (600, 600)), False),
                                               (((64, 200, 200), (64, 200, 200)), True)])  # 64 calls, each small
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
    monkeypatch.setattr(blas_threads, "free_cores", lambda: 64)  # an idle machine
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


def test_a_batch_is_as_many_blas_calls_as_matrices():
    assert blas_threads.multiply_adds_per_call(np.ones((5, 2, 3)), np.ones((5, 3, 4))) == 2 * 3 * 4
    assert blas_threads.multiply_adds_per_call(np.ones((600, 600)), np.ones((600, 600))) == 600**3


@pytest.mark.parametrize("free, expected", [(1, 1), (2, 2), (64, 2)])
def test_a_large_product_uses_only_the_cores_left_free(monkeypatch, free, expected):
    if not _numpy_blas_threads():
        pytest.skip("threadpoolctl sees no BLAS")
    seen = []
    real_matmul = np.matmul

    def recording(x, y):
        seen.append(_numpy_blas_threads())
        return real_matmul(x, y)

    monkeypatch.setattr(blas_threads, "ONE_THREAD_BELOW", 10**3)
    monkeypatch.setattr(blas_threads, "free_cores", lambda: free)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _numpy_blas_threads()
        monkeypatch.setattr(np, "matmul", recording)
        numpy_backend.matmul(np.ones((20, 20)), np.ones((20, 20)))
        monkeypatch.setattr(np, "matmul", real_matmul)
        assert _numpy_blas_threads() == before
    assert seen == [[expected] * len(before)]


def test_spare_cores_counts_other_processes_not_our_own_threads(monkeypatch):
    monkeypatch.setattr(machine_load, "_look", {"at": None, "machine": None, "ours": None, "free": 2})
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert machine_load.spare_cores(machine=100.0, ours=10.0, now=50.0) is None  # the first look
    # one second later: the machine was busy 3 CPU-seconds, 2 of them ours -> others used 1 core
    assert machine_load.spare_cores(machine=103.0, ours=12.0, now=51.0) == pytest.approx(3.0)
    # half a second later: all the busy time was ours (our BLAS threads) -> every core is spare
    assert machine_load.spare_cores(machine=104.0, ours=13.0, now=51.5) == pytest.approx(4.0)


def test_free_cores_follows_the_machine_and_keeps_at_least_one(monkeypatch):
    looks = iter([(0.0, 0.0), (1.8, 0.0), (3.8, 2.0), (4.0, 2.2)])  # (machine, ours) busy seconds
    clock = iter([0.0, 1.0, 2.0, 3.0])
    monkeypatch.setattr(machine_load, "_look", {"at": None, "machine": None, "ours": None, "free": 2})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    state = {}

    def machine():
        state["machine"], state["ours"] = next(looks)
        return state["machine"]

    monkeypatch.setattr(machine_load, "_machine_busy_seconds", machine)
    monkeypatch.setattr(machine_load, "_our_busy_seconds", lambda: state["ours"])
    monkeypatch.setattr(machine_load.time, "monotonic", lambda: next(clock))
    assert machine_load.free_cores() == 2  # no second look yet: every core is taken to be free
    assert machine_load.free_cores() == 1  # others kept 1.8 cores busy: at least one is left
    assert machine_load.free_cores() == 2  # all 2 busy seconds were ours
    assert machine_load.free_cores() == 2  # others used 0.2 core: noise, not a core taken
