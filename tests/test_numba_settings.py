"""The numba backend's process-wide settings (backends/numba_backend/settings.py) do what they
say: a cached kernel older than a file of the package is dropped (Numba checks a kernel's own
file only, and the kernels compile in helpers from other files)."""

import os
import pathlib

import pytest

pytest.importorskip("numba")


def test_a_cached_kernel_older_than_a_file_of_the_package_is_dropped(tmp_path):
    from minitensor.backends.numba_backend import settings

    class Cache:
        _cache_path = str(tmp_path)

    class Kernel:
        _cache = Cache()

    old, new = tmp_path / "old.nbi", tmp_path / "new.nbi"
    old.write_text("")
    new.write_text("")
    newest = max(path.stat().st_mtime for path in pathlib.Path(settings.__file__).parent.glob("*.py"))
    os.utime(old, (newest - 10, newest - 10))
    os.utime(new, (newest + 10, newest + 10))
    settings.drop_stale_cache(Kernel())
    assert not old.exists() and new.exists()


def test_a_second_process_loads_a_kernel_from_the_cache_and_compiles_nothing(tmp_path):
    """What lets the suite's processes (pytest-xdist) and the next run share the kernels: cache=True
    writes each compiled kernel to the on-disk cache, and another process that finds it there loads
    it instead of compiling it again."""
    import subprocess
    import sys

    code = ("import numpy as np\n"
            "from minitensor.backends.numba_backend import elementwise\n"
            "elementwise.exp(np.linspace(-3.0, 3.0, 16))\n"
            "stats = elementwise.exp_into.stats\n"
            "print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))  # an empty cache of this test's own
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=300)
            for _ in range(2)]
    (hits1, misses1), (hits2, misses2) = [tuple(map(int, run.stdout.split())) for run in runs]
    assert (hits1, misses1) == (0, 1), runs[0].stdout  # the first process compiled it and wrote it
    assert (hits2, misses2) == (1, 0), runs[1].stdout  # the second loaded it
