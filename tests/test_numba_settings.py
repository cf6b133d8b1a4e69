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
