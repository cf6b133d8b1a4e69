"""The numba backend's process-wide settings (backends/numba_backend/settings.py) do what they
say: a cached kernel older than a file of the package is dropped (Numba checks a kernel's own
file only, and the kernels compile in helpers from other files)."""

import ast
import os
import pathlib
import subprocess
import sys

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


def test_scipys_blas_which_numbas_kernels_call_runs_on_one_thread_in_a_fresh_process():
    """Numba's np.dot calls SciPy's own OpenBLAS from inside parallel loops that already use every
    core: its threads only fight ours. It must be limited to one thread even when nothing had loaded
    it when the backend was chosen (SciPy is imported lazily): after the lazy import it kept two
    threads, and the GPT step of `python -m benchmarks user_models` went from 1.7x PyTorch to 2.6x."""
    code = (
        "import numpy as np, minitensor as mt\n"
        "from threadpoolctl import threadpool_info\n"
        "mt.set_backend('numba')\n"
        "from minitensor.backends import numba_backend\n"
        "q = np.ones((2, 2, 8, 4), np.float32)\n"
        "numba_backend.attention(q, q, q)\n"
        "print([(i['filepath'], i['num_threads']) for i in threadpool_info() if i['user_api'] == 'blas'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, OPENBLAS_NUM_THREADS="2"))
    assert result.returncode == 0, result.stderr
    blas = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    scipys = [threads for path, threads in blas if "scipy.libs" in path]
    assert scipys == [1], f"SciPy's BLAS threads after a kernel ran: {blas}"
