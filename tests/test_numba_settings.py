"""The numba backend's process-wide settings (backends/numba_backend/settings.py) do what they
say: freed blocks are reused without page faults, a user's own malloc settings win, and a
cached kernel older than a file of the package is dropped."""

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("numba")

# A step's worth of activations (the adding-problem transformer's sizes, about 100 MB) made and
# freed a few times, then the page faults of one more step: glibc's defaults give the pages back
# between steps and fault them in anew.
FAULTS_OF_A_STEP = """
import resource
import numpy as np
import minitensor.backends.numba_backend

def step():
    kept = [np.ones(n, dtype=np.float32) for n in (413_696, 1_654_784, 103_424, 1_654_784, 6_619_136, 1_654_784) * 2]
    del kept

for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(env):
    result = subprocess.run([sys.executable, "-c", FAULTS_OF_A_STEP], env=env, capture_output=True,
                            text=True, check=True)
    return int(result.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_freed_blocks_are_reused_without_page_faults_unless_the_user_chose_otherwise():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    assert _faults(env) < 100  # the pages of the freed arrays are reused
    # glibc's default thresholds, set by the user: the backend leaves them, and the pages fault again
    assert _faults({**env, "MALLOC_TRIM_THRESHOLD_": str(128 * 1024), "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}) > 1000


def test_a_cached_kernel_older_than_a_file_of_the_package_is_dropped(tmp_path, monkeypatch):
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
