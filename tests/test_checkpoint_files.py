"""Module.save's temporary file is named after its target, and one left by a killed save is
removed by the next save of the same target (issue 13, section 4)."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from minitensor import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_model():
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def dead_pid():
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_temporary_is_named_after_its_target(tmp_path, monkeypatch):
    seen = []
    real_savez = np.savez

    def watching_savez(file, **arrays):
        seen.append(sorted(os.listdir(tmp_path)))
        real_savez(file, **arrays)

    monkeypatch.setattr(np, "savez", watching_savez)
    make_model().save(tmp_path / "model.npz")
    assert seen == [[f".model.npz.tmp-{os.getpid()}.npz"]]
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]


@pytest.mark.skipif(os.name != "posix", reason="telling a running process from a dead one needs POSIX")
def test_a_stale_temporary_of_the_target_is_removed_and_others_are_kept(tmp_path):
    gone = dead_pid()
    stale = tmp_path / f".model.npz.tmp-{gone}.npz"
    other_target = tmp_path / f".other.npz.tmp-{gone}.npz"
    still_saving = tmp_path / f".model.npz.tmp-{os.getppid()}.npz"  # a live process: it may be saving now
    for path in (stale, other_target, still_saving):
        path.write_bytes(b"half a checkpoint")
    make_model().save(tmp_path / "model.npz")
    assert sorted(os.listdir(tmp_path)) == sorted(["model.npz", other_target.name, still_saving.name])


KILLED_WHILE_SAVING = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from minitensor import nn

    def slow_savez(file, **arrays):
        file.write(b"half a checkpoint")
        file.flush()
        print("saving", flush=True)
        time.sleep(60)

    np.savez = slow_savez
    nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).save(sys.argv[1])
    """
)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL and process checks need POSIX")
def test_a_save_killed_midway_leaves_the_checkpoint_and_its_temporary_goes_on_the_next_save(tmp_path):
    path = tmp_path / "model.npz"
    model = make_model()
    model.save(path)
    original = path.read_bytes()

    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_SAVING, str(path)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout.readline() == b"saving\n"
        os.kill(child.pid, signal.SIGKILL)  # no except clause runs: the temporary stays
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    left = f".model.npz.tmp-{child.pid}.npz"
    assert sorted(os.listdir(tmp_path)) == sorted(["model.npz", left])
    assert path.read_bytes() == original

    model.save(path)
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]
    loaded = make_model()
    loaded.load(path)
    for name, value in loaded.state_dict().items():
        np.testing.assert_array_equal(value, model.state_dict()[name], err_msg=name)
