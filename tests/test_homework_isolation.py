"""What a worker can reach, at every isolation level this machine has; submissions that are not
plain files; limits a worker could exhaust. Each test is a cheat or an attack a student could
write, planted and run as the grader runs it."""

import io
import json
import os
import pathlib
import re
import resource
import struct
import shutil
import socket
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import homework
from homework import isolation, processes, sandbox, submission, uids
import planted
from round_trip import ROOT, grade

PROBE = '''
def probe_reach(paths, grader_pid, grader_cmdline):
    """What this worker can read of each path, and of the grader's process."""
    import os
    found = {}
    for path in paths:
        try:
            if os.path.isdir(path):
                found[path] = "listed %d" % len(os.listdir(path))
            else:
                with open(path, "rb") as file:
                    found[path] = "read %d" % len(file.read(64))
        except Exception as error:
            found[path] = type(error).__name__
    try:
        with open(f"/proc/{grader_pid}/cmdline", "rb") as file:
            found["grader"] = "read" if file.read() == grader_cmdline.encode() else "another process"
    except Exception as error:
        found["grader"] = type(error).__name__
    try:
        found["processes"] = len([p for p in os.listdir("/proc") if p.isdigit()])
    except Exception as error:
        found["processes"] = type(error).__name__
    try:
        import torch  # noqa: F401
        found["torch"] = "imported"
    except Exception as error:
        found["torch"] = type(error).__name__
    with open(os.path.join(os.environ["HOME"], "left-by-a-worker"), "w") as file:
        file.write("a probe's argument, saved")
    found["uid"] = os.getuid()
    return found
'''


def run_as(uid, code):
    """`python -c code` as user `uid`: this Python, or Debian's where that user cannot run this one."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            done = subprocess.run([python, "-I", "-S", "-c", code], preexec_fn=uids.drop_to(uid), cwd="/",
                                  capture_output=True, text=True, timeout=60)
        except PermissionError:
            continue
        if done.returncode == 0 or "Permission denied" not in done.stderr:
            return done
    return done


def _levels():
    """The levels this machine can run a worker at (the floor is uid as root, none otherwise)."""
    levels = []
    if isolation.bubblewrap_path():
        levels.append("bubblewrap")
    if isolation.landlock_abi():
        levels.append("landlock")
    return levels + ["uid" if os.geteuid() == 0 else "none"]


def _grader_secrets(tmp_path):
    """Files a worker must not read: the grader's scratch (0700, as grade makes it) and a
    teacher-only file."""
    scratch = tmp_path / "grader-scratch"
    scratch.mkdir(mode=0o700)
    (scratch / "test_hidden.py").write_text("SECRET")
    return scratch / "test_hidden.py"


@pytest.mark.parametrize("level", _levels())
def test_a_worker_reaches_nothing_but_the_copy(level, worker_python, tmp_path, monkeypatch):
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    hidden_file = _grader_secrets(tmp_path)
    torch_file = pathlib.Path(__import__("torch").__file__)
    cmdline = pathlib.Path(f"/proc/{os.getpid()}/cmdline").read_bytes().decode()
    box = sandbox.Sandbox(ROOT, python=worker_python)
    first, second = box.worker("one"), box.worker("two")
    try:
        assert box.level == level
        paths = [str(ROOT / "README.md"), str(ROOT / "minitensor" / "ops"), "/etc/shadow", str(hidden_file),
                 str(torch_file), str(first.home / "left-by-a-worker")]
        planted.call(first, PROBE, "probe_reach", (paths, os.getpid(), cmdline), seconds=60)
        first.stop()
        found = planted.call(second, PROBE, "probe_reach", (paths, os.getpid(), cmdline), seconds=60)
    finally:
        first.stop()
        second.stop()
        box.close()
    teacher, teacher_folder, shadow, hidden, grader_torch, other_worker = paths
    assert found["torch"] == "ImportError" and found[other_worker] != "read 25"
    if os.geteuid() == 0:
        assert found["uid"] != 0 and found[shadow] != "read 64" and found[hidden].endswith("Error")
    if level in ("bubblewrap", "landlock"):
        for path in (teacher, teacher_folder, shadow, hidden, grader_torch, other_worker):
            assert found[path].endswith("Error"), (path, found[path])
        assert found["grader"] != "read"
    if level == "bubblewrap":
        assert found["processes"] <= 3  # bwrap's init, the worker, and nothing of the machine's


NETWORK_PROBE = """
def probe(port):
    import socket
    found = {}
    for kind, family, style in (("tcp", socket.AF_INET, socket.SOCK_STREAM), ("udp", socket.AF_INET, socket.SOCK_DGRAM)):
        try:
            with socket.socket(family, style) as sock:
                sock.settimeout(2)
                sock.connect(("127.0.0.1", port))
                sock.send(b"out")
                found[kind] = "sent"
        except Exception as error:
            found[kind] = type(error).__name__
    return found
"""


@pytest.mark.parametrize("level", _levels())
def test_a_worker_reaches_no_network(level, monkeypatch):
    """No TCP and no UDP out of the worker (Landlock covers TCP only; a seccomp filter refuses
    every socket but a Unix one where there is no network namespace)."""
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp.bind(("127.0.0.1", tcp.getsockname()[1]))
        udp.settimeout(1)
        box = sandbox.Sandbox(ROOT)
        worker = box.worker("net")
        try:
            answer = planted.call(worker, NETWORK_PROBE, "probe", (tcp.getsockname()[1],), seconds=60)
        finally:
            worker.stop()
            box.close()
        try:
            received = udp.recv(16)
        except OSError:
            received = b""
    if level == "none":
        pytest.skip("at level none the worker is the grading user, network included (README)")
    assert answer["tcp"] != "sent" and received != b"out", answer


def test_grading_refuses_a_level_below_the_one_asked(monkeypatch, tmp_path):
    level = "landlock" if isolation.landlock_abi() else ("uid" if os.geteuid() == 0 else "none")
    stronger = isolation.LEVELS[isolation.rank(level) + 1]
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    copy = homework.strip(tmp_path / "student", keep=["topological_order"])
    with pytest.raises(homework.HomeworkError, match=rf"cannot be isolated at level '{stronger}' or stronger"):
        grade(copy, task="topological_order", isolation_at_least=stronger)
    if level != "uid":  # the control: the same grading with its level accepted grades (at uid, a readable
        ok, rows, table = grade(copy, task="topological_order", isolation_at_least=level)  # repository refuses)
        assert ok and f"student code ran at isolation level {level}" in table, table
    with pytest.raises(homework.HomeworkError, match=r"grade --isolation: 'paper' is not a level"):
        grade(copy, task="topological_order", isolation_at_least="paper")


def test_a_sandbox_refuses_a_level_below_the_weakest_accepted_and_takes_one_at_it(monkeypatch, tmp_path):
    """The same sandbox, asked for the level it can have and for the next one up (issue 47: with
    the check of the weakest accepted level gone, the second would run at the first)."""
    secret = _grader_secrets(tmp_path)  # under a 0700 folder: no level refuses for it
    for level in _levels():
        stronger = isolation.LEVELS[isolation.rank(level) + 1] if level != "bubblewrap" else None
        monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
        box = sandbox.Sandbox(ROOT, isolation_at_least=level, sensitive=[secret])
        box.close()
        assert box.level == level
        if stronger:
            with pytest.raises(sandbox.IsolationError, match=rf"cannot be isolated at level '{stronger}' or stronger"):
                sandbox.Sandbox(ROOT, isolation_at_least=stronger, sensitive=[secret])


@pytest.mark.parametrize("level", [level for level in _levels() if level in ("bubblewrap", "landlock")])
def test_bubblewrap_and_landlock_refuse_a_student_environment_that_shows_a_sensitive_path(level, monkeypatch,
                                                                                           tmp_path):
    """A path no worker may read, inside what the student environment shows (here: NumPy's
    __init__.py), refuses the level; the control: a sensitive path elsewhere does not (issue 47)."""
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    environment = isolation.StudentEnvironment(os.environ.get("MINITENSOR_WORKER_PYTHON") or sys.executable)
    numpy_init = os.path.join(next(path for path in environment.packages if os.path.basename(path) == "numpy"),
                              "__init__.py")
    with pytest.raises(sandbox.IsolationError,
                       match=rf"{level}: the student environment holds {re.escape(os.path.realpath(numpy_init))}"):
        sandbox.Sandbox(ROOT, sensitive=[numpy_init])
    box = sandbox.Sandbox(ROOT, sensitive=[_grader_secrets(tmp_path)])
    box.close()
    assert box.level == level


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid level exists as root only")
def test_the_uid_level_refuses_when_what_it_must_hide_is_readable_by_others(tmp_path, monkeypatch):
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", "uid")
    hidden_file = _grader_secrets(tmp_path)  # under a 0700 folder: the uid level can keep it
    box = sandbox.Sandbox(ROOT, sensitive=[hidden_file])
    box.close()
    assert box.level == "uid"
    readable = pathlib.Path(tempfile.mkdtemp(prefix="minitensor-teacher-tests-"))  # as a teacher's repository often is
    readable.chmod(0o755)
    try:
        with pytest.raises(sandbox.IsolationError, match=rf"uid: the worker's user could read {readable}"):
            sandbox.Sandbox(ROOT, sensitive=[readable])
    finally:
        readable.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: the question is whether student code would run as root")
def test_student_code_never_runs_as_root(tmp_path):
    private = tmp_path / "private"  # a Python other users cannot run: under a 0700 folder, as pyenv's under /root
    private.mkdir(mode=0o700)
    python = private / "python"
    python.symlink_to(sys.executable)
    with pytest.raises(sandbox.IsolationError, match=r"student code never runs as root, and another user cannot run"):
        sandbox.Sandbox(ROOT, python=str(python))


@pytest.mark.skipif(os.geteuid() != 0, reason="user ids are reserved only as root")
def test_a_dead_graders_uid_reservation_is_reclaimed_and_a_live_one_is_not(monkeypatch):
    # Three ids of this test's own, below the range graders draw from (a grader in the other test
    # process, as make test runs two, must neither take nor lose them): a dead grader's, with a
    # process and a file of its user left, a live grader's (this process), and a free one.
    base = uids.FIRST_UID - 10_000 + (os.getpid() % 900) * 3
    monkeypatch.setattr(uids, "FIRST_UID", base)
    monkeypatch.setattr(uids, "UID_RANGE", 3)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale, live = sandbox.reservation(base), sandbox.reservation(base + 1)
    pathlib.Path(stale).write_text(f"{dead.pid} 1\n")
    pathlib.Path(live).write_text(f"{os.getpid()} {processes.started_at(os.getpid())}\n")
    left = subprocess.Popen(["sleep", "60"], preexec_fn=uids.drop_to(base))
    shm = pathlib.Path("/dev/shm") / f"minitensor-left-{os.getpid()}"
    shm.write_text("a dead grading's worker left this")
    os.chown(shm, base, base)
    try:
        taken = sandbox.unused_uid()
        assert taken == base + 2  # neither the dead grading's id (passed over) nor the live one's
        assert not os.path.exists(stale) and os.path.exists(live)
        # the dead grading's leftovers removed: its 60 s sleep ended within 10 s (killed; the status may
        # read 0 when the grader's clean-up reaped it first, as a subreaper does)
        assert left.wait(timeout=10) in (-9, 0) and not shm.exists()
        assert sandbox.unused_uid() == base  # clean now, and no longer reserved
        with pytest.raises(sandbox.IsolationError, match="no unused user id"):
            sandbox.unused_uid()
    finally:
        left.kill()
        shm.unlink(missing_ok=True)
        for uid in range(base, base + 3):
            pathlib.Path(sandbox.reservation(uid)).unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="user ids are reserved only as root")
def test_a_uid_that_owns_anything_is_not_drawn_until_it_is_cleaned(monkeypatch):
    """A user id with a SysV segment left (no reservation, no process: a grading that cleaned up
    only its files) is passed over and its leftovers removed; the next draw may take it."""
    base = uids.FIRST_UID - 20_000 + os.getpid() % 900
    monkeypatch.setattr(uids, "FIRST_UID", base)
    monkeypatch.setattr(uids, "UID_RANGE", 1)
    make = "import ctypes; print(ctypes.CDLL(None).shmget(0, 4096, 0o1666))"  # IPC_PRIVATE, IPC_CREAT | 0666
    segment = int(run_as(base, make).stdout)
    try:
        assert ("shm", segment) in uids.leftovers_of(base)["ipc"]
        with pytest.raises(sandbox.IsolationError, match="no unused user id"):
            sandbox.unused_uid()
        assert uids.leftovers_of(base) == {"processes": [], "ipc": [], "files": []}
        assert sandbox.unused_uid() == base
    finally:
        uids.remove_ipc_of(base)
        pathlib.Path(sandbox.reservation(base)).unlink(missing_ok=True)


# ----------------------------------------------------------------------------
# Submissions that are not plain files
# ----------------------------------------------------------------------------


def _submission(tmp_path):
    folder = tmp_path / "submission"
    for name in ("minitensor", "models", "demos"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text("")
    return folder


@pytest.mark.parametrize("plant, message", [
    (lambda s: (s / "minitensor" / "solved.py").symlink_to(ROOT / "minitensor" / "autograd.py"),
     "a symbolic link, minitensor/solved.py"),
    (lambda s: (s / "models" / "loop").symlink_to(s), "a symbolic link, models/loop"),
    (lambda s: (s / "demos" / "shadow").symlink_to("/etc/shadow"), "a symbolic link, demos/shadow"),
    (lambda s: os.link(s / "models" / "__init__.py", s / "models" / "twin.py"), "a hard link, models/__init__.py"),
    (lambda s: os.mkfifo(s / "demos" / "pipe"), "a FIFO, demos/pipe"),
    (lambda s: [(s / "demos" / f"f{i}.py").write_text("") for i in range(6)], "more than 5 files"),
    (lambda s: (s / "models" / "/".join("d" * 30)).mkdir(parents=True), "deeper than 24 levels"),
])
def test_a_submission_that_is_not_plain_files_is_refused_naming_the_path(plant, message, tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILES", 5)
    folder = _submission(tmp_path)
    plant(folder)
    with pytest.raises(submission.SubmissionRefused, match=message):
        submission.copy_submission(folder, tmp_path / "copy", sandbox.PACKAGES)


def test_a_linked_submission_gets_a_results_file_and_leaves_nothing_behind(tmp_path, monkeypatch):
    # A temporary folder of this test's own: the other test process (make test runs two) grades
    # beside it and leaves its own minitensor-* folders in /tmp while it runs.
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(sandbox.tempfile, "tempdir", str(private))
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "minitensor", folder / "minitensor", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("models", "demos"):
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text("")
    (folder / "models" / "attention.py").symlink_to(ROOT / "models" / "attention.py")
    (folder / "demos" / "again").symlink_to(folder)
    before = set(pathlib.Path(sandbox.tempfile.gettempdir()).glob("minitensor-*"))
    results = tmp_path / "results.json"
    ok, rows, table = grade(folder, task="topological_order", gradescope=results)
    document = json.loads(results.read_text())
    assert not ok and document["score"] == 0
    assert "the submission was refused" in document["output"] and "models/attention.py" in document["output"]
    assert set(pathlib.Path(sandbox.tempfile.gettempdir()).glob("minitensor-*")) <= before


# ----------------------------------------------------------------------------
# What a worker could exhaust: processes, disk, the grader's memory
# ----------------------------------------------------------------------------

HOSTILE = {
    "elementwise_backward": (  # a fork bomb, from a backward: forks until the process limit stops it
        "import os as _os, time as _time\nimport minitensor.ops.elementwise as _e\n"
        "def _bomb(ctx, grad):\n"
        "    children = 0\n"
        "    while children < 5000:\n"
        "        try:\n            pid = _os.fork()\n"
        "        except OSError:\n            raise RuntimeError(f'the fork bomb stopped after {children} processes')\n"
        "        if pid == 0:\n            _time.sleep(60)\n            _os._exit(0)\n"
        "        children += 1\n"
        "    raise RuntimeError('the fork bomb was not stopped')\n"
        "_e.Mul.backward = staticmethod(_bomb)\n"),
    "gradcheck_central_difference": (  # an answer of a gigabyte
        "import importlib as _il, numpy as _np\n_g = _il.import_module('minitensor.gradcheck')\n"
        "_g._central_difference = lambda *a, **k: _np.ones(135_000_000)\n"),
}


FILL_THE_DISK = (  # from a demo function: the worker's home and the folder it shares with the others
    "    import os\n"
    "    for folder in (os.environ['HOME'], os.environ['NUMBA_CACHE_DIR']):\n"
    "        for number in range(3):\n"
    "            try:\n"
    "                with open(os.path.join(folder, f'fill{number}'), 'wb') as f:\n"
    "                    f.write(b'x' * 200 * 2**20)\n"
    "            except OSError:\n"
    "                break\n"
    "    return 0\n")


def test_a_fork_bomb_a_gigabyte_answer_and_a_full_disk_fail_their_tests_alone(tmp_path, worker_python):
    tasks = ["topological_order", "elementwise_backward", "demo_multihead", "gradcheck_central_difference"]
    copy = homework.strip(tmp_path / "student", keep=["topological_order"])
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\n" + "\n".join(HOSTILE.values()))
    demo = copy / "demos" / "multihead.py"
    stub = next(line for line in demo.read_text().splitlines() if "NotImplementedError" in line)
    demo.write_text(demo.read_text().replace(stub + "\n", FILL_THE_DISK))
    results = tmp_path / "results.json"
    ok, rows, table = grade(copy, tasks=tasks, python=worker_python, gradescope=results, timeout=60, verbose=True)
    points = {row.task: row.points for row in rows}
    assert points == {"topological_order": 10.0, "elementwise_backward": 0.0, "demo_multihead": 0.0,
                      "gradcheck_central_difference": 0.0}, table
    assert "over the limit of 67108864" in table  # the gigabyte answer, refused before it was read
    assert re.search(r"wrote \d+ MB to disk during this test, over the limit of 512 MB", table), table
    children = int(re.search(r"the fork bomb stopped after (\d+) processes", table).group(1))
    assert children <= sandbox.PROCESSES, table
    document = json.loads(results.read_text())
    assert document["extra_data"]["isolation"] in isolation.LEVELS
    survivors = [p for p in sandbox.descendants(os.getpid()) if sandbox.is_alive(p)]
    assert not survivors, "a worker's process survived (grade made this process a subreaper)"


def _message_with_array_header(shape, data):
    """A wire message of one array whose .npy header claims `shape` over the bytes `data`."""
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"descr": "<f8", "fortran_order": False, "shape": shape})
    array = npy.getvalue() + data
    header = json.dumps({"a": 0}).encode()
    return struct.pack("<QI", len(header), 1) + header + struct.pack("<Q", len(array)) + array


def test_the_graders_memory_stays_bounded_whatever_the_worker_sends():
    """An array header that claims more than its bytes is refused before anything is allocated;
    an honest one is read."""
    from homework import worker as wire

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=r"malformed message: an array of shape \(900000000,\)"):
        wire.decode(_message_with_array_header((900_000_000,), bytes(32)))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # kilobytes
    assert np.array_equal(wire.decode(_message_with_array_header((4,), np.arange(4.0).tobytes())), np.arange(4.0))


def test_a_worker_that_cannot_start_says_so(tmp_path):
    copy = homework.strip(tmp_path / "student", keep=["topological_order"])
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\nimport os\nos._exit(3)\n")
    ok, rows, table = grade(copy, task="topological_order")
    assert "the copy does not import: the worker could not start (exit status 3)" in table, table


# ----------------------------------------------------------------------------
# Nothing of one run reaches the next
# ----------------------------------------------------------------------------

STASH = (  # every probe the worker compiles saved wherever the worker can write; shown in a public test
    "import builtins as _b, os as _os\n"
    "_PLACES = [_os.environ.get('HOME', ''), _os.environ.get('NUMBA_CACHE_DIR', ''), '/tmp', '/var/tmp', '/dev/shm']\n"
    "_compile = _b.compile\n"
    "def _saving_compile(source, *args, **kwargs):\n"
    "    for place in _PLACES:\n"
    "        try:\n"
    "            with open(_os.path.join(place, 'minitensor-stash'), 'a') as file:\n"
    "                file.write(str(source))\n"
    "        except (OSError, TypeError):\n"
    "            pass\n"
    "    return _compile(source, *args, **kwargs)\n"
    "_b.compile = _saving_compile\n"
    "_found = ''\n"
    "for _place in _PLACES:\n"
    "    try:\n"
    "        _found += open(_os.path.join(_place, 'minitensor-stash')).read()\n"
    "    except OSError:\n"
    "        pass\n"
    "import minitensor.autograd as _a\n"
    "def _show(*args, **kwargs):\n"
    "    raise RuntimeError('stash: ' + _found[-3000:])\n"
    "_a.summed_axes = _show\n")

HIDDEN_PROBE = (
    "import pytest\n\n"
    "def probe_with_a_secret(side):\n"
    "    side.module('minitensor')\n"
    "    return 'SECRET_MARK'\n\n"
    "@pytest.mark.task('unbroadcast')\n"
    "def test_a_hidden_probe(student):\n"
    "    assert student.call(probe_with_a_secret) == 'SECRET_MARK'\n"
)


def test_a_hidden_probe_saved_by_one_run_never_reaches_the_next_runs_feedback(tmp_path):
    secret = f"secret-{os.urandom(8).hex()}"
    copy = homework.strip(tmp_path / "student")
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\n" + STASH)
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_hidden_probe.py").write_text(HIDDEN_PROBE.replace("SECRET_MARK", secret))
    for run in range(2):
        results = tmp_path / f"results{run}.json"
        ok, rows, table = grade(copy, task="unbroadcast", extra=hidden, gradescope=results, verbose=True)
        visible = [test["output"] for test in json.loads(results.read_text())["tests"] if test["visibility"] == "visible"]
        assert "stash: " in "".join(visible), table  # the cheat ran and showed what it found
        assert secret not in "".join(visible) and secret not in json.loads(results.read_text())["output"]


def test_rehearse_runs_the_autograder_as_gradescope_would(tmp_path):
    copy = homework.strip(tmp_path / "student", keep=homework.TASK_NAMES)  # solved (kv_cache needs earlier tasks)
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=["kv_cache"])
    run = subprocess.run([sys.executable, "-m", "homework", "rehearse", str(archive), str(copy), "--keep",
                          str(tmp_path / "layout")], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "\nscore 10 / 10, in " in run.stdout and "public tests passed" in run.stdout, run.stdout  # after the table
    results = json.loads((tmp_path / "layout" / "results" / "results.json").read_text())
    assert results["score"] == 10 and results["extra_data"]["isolation"] in ("bubblewrap", "landlock")
    assert re.search(r"isolation (bubblewrap|landlock)", run.stdout)
    bad = subprocess.run([sys.executable, "-m", "homework", "rehearse", str(copy), str(copy)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not an autograder zip" in bad.stderr


def test_rehearse_says_to_see_why_on_the_submission_it_was_given(stripped_copy, tmp_path):
    """The table's last line tells the student the command that shows why a task failed: it names
    the submission `rehearse` was given, not the rehearsal's copy of it (removed by then)."""
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=["topological_order"])
    run = subprocess.run([sys.executable, "-m", "homework", "rehearse", str(archive), str(stripped_copy)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert f"to see why: python -m homework grade {stripped_copy} --task topological_order -v" in run.stdout, run.stdout
    assert "minitensor-rehearsal-" not in run.stdout, run.stdout


def test_check_task_lists_what_a_new_task_still_lacks(tmp_path):
    from homework import check_task

    text, missing = check_task.report("softmax_backward")
    assert not missing and text.count("ok  ") == 8 and "numba_backend" in text and "cupy_backend.py" in text, text
    text, missing = check_task.report("positional_encoding")  # a task being added: nothing done yet
    assert missing and text.count("TODO") == 6, text
    assert "add ('positional_encoding', 'what to derive" in text and "# BEGIN SOLUTION positional_encoding" in text
    number = len(homework.TASKS) + 1  # the task being added counts as the next one, past twenty-five too
    assert f"positional_encoding is {number}" in text and f"'{check_task.in_words(number).capitalize()} tasks" in text
    run = subprocess.run([sys.executable, "-m", "homework", "check-task", "positional_encoding"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and run.stdout == text + "\n"


@pytest.mark.parametrize("number, words", [(13, "thirteen"), (20, "twenty"), (25, "twenty-five"), (26, "twenty-six"),
                                           (40, "forty"), (99, "ninety-nine"), (120, "120")])
def test_check_task_writes_a_count_as_the_readme_does(number, words):
    from homework import check_task

    assert check_task.in_words(number) == words


def test_check_task_finds_a_student_table_out_of_course_order(tmp_path):
    from homework import check_task

    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    student = (ROOT / homework.STUDENT_README).read_text()
    swapped = student.replace("| 1 | `topological_order` |", "| 2 | `topological_order` |", 1)
    (tmp_path / homework.STUDENT_README).write_text(swapped)
    steps = dict(check_task.lacks("softmax_backward", tmp_path))
    assert "topological_order is 1" in steps[f"{homework.STUDENT_README}'s table numbered in course order"]


def test_a_memory_limit_holds_when_the_copy_patches_resource(tmp_path):
    """The limit of a memory-limited call is set in a fresh worker before the copy is imported, so
    a copy that disables setrlimit at import (to build a (T, T) matrix) changes nothing."""
    folder = tmp_path / "copy"
    (folder / "minitensor").mkdir(parents=True)
    (folder / "minitensor" / "__init__.py").write_text(
        "import resource as _r\n_set = _r.setrlimit\n"
        "_r.setrlimit = lambda what, limits: None if what == _r.RLIMIT_AS else _set(what, limits)\n")
    source = "def big(megabytes):\n    import numpy\n    return float(numpy.ones(megabytes * 2**17).sum())\n"
    box = sandbox.Sandbox(folder)
    worker = box.worker("memory")
    try:
        assert planted.call(worker, source, "big", (100,), seconds=60) == 100 * 2**17  # no limit: 100 MB is fine
        worker.stop()
        worker.start(memory_mb=40)
        with pytest.raises(sandbox.StudentError, match="MemoryError"):
            planted.call(worker, source, "big", (100,), seconds=60, last=True)
    finally:
        worker.stop()
        box.close()


def test_a_message_the_grader_cannot_print_still_gets_a_results_file(tmp_path):
    copy = homework.strip(tmp_path / "student")
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + '\nraise ValueError("boom \\ud800")\n')
    results = tmp_path / "results.json"
    ok, rows, table = grade(copy, task="topological_order", gradescope=results)
    document = json.loads(results.read_text())
    assert document["score"] == 0 and "the copy does not import" in document["output"] and "boom" in table


def test_a_header_of_many_small_items_is_refused_before_it_is_parsed():
    from homework import worker as wire

    items = json.dumps({"l": [{"v": 0}] * 300_000}).encode()  # 2.4 MB of JSON: a few hundred MB of objects
    message = struct.pack("<QI", len(items), 0) + items
    with pytest.raises(ValueError, match=r"a header of \d+ bytes"):
        wire.decode(message)


def test_the_student_environment_holds_no_bytecode_or_path_files_of_the_graders():
    environment = isolation.StudentEnvironment(os.environ.get("MINITENSOR_WORKER_PYTHON") or sys.executable)
    names = [os.path.basename(path) for path in environment.packages]
    assert "numpy" in names and "scipy" in names
    assert not [n for n in names if n == "__pycache__" or n.endswith(".pth") or n.startswith(("__editable__", "torch"))]
