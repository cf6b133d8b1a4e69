"""What one grading leaves and what a worker could see beside it (issue 43): each test plants the
attack a student could write (as root, at each isolation level this machine has) and expects it
to fail. A worker leaves SysV shared memory, a semaphore set, a message queue, files in /dev/shm,
/tmp, /var/tmp and its home, Unix sockets (a file and an abstract name) and a detached process;
the next worker of the same grading, a later grading, and a grading at the same time must find
none of them. The sandbox's folder is closed to other users; the IPC namespace is the worker's
own where the kernel gives one; results.json says what a worker could see."""

import json
import os
import pathlib
import re
import secrets
import subprocess
import sys

import pytest

import homework
from homework import isolation, sandbox, uids
import planted
from round_trip import ROOT, grade

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="user ids and namespaces of the worker's own: as root only")

PLANT = r'''
def plant(token, key):
    """Leave `token` everywhere this worker can: SysV IPC under `key`, files, sockets, a process."""
    import ctypes, os, socket, time
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    made = {}
    shm = libc.shmget(key, 4096, 0o1666)  # IPC_CREAT, readable and writable by anyone
    if shm >= 0:
        address = libc.shmat(shm, None, 0)
        ctypes.memmove(address, token.encode(), len(token))
        libc.shmdt(ctypes.c_void_p(address))
    made["shm"] = shm
    made["sem"] = libc.semget(key, 1, 0o1666)
    made["msg"] = queue = libc.msgget(key, 0o1666)
    if queue >= 0:
        message = ctypes.create_string_buffer(8 + len(token))
        ctypes.memmove(message, ctypes.byref(ctypes.c_long(1)), 8)
        ctypes.memmove(ctypes.byref(message, 8), token.encode(), len(token))
        libc.msgsnd(queue, message, len(token), 0)
    for place in ("/dev/shm", "/tmp", "/var/tmp", os.environ["HOME"]):
        path = os.path.join(place, "minitensor-" + token)
        try:
            with open(path, "w") as file:
                file.write(token)
            os.chmod(path, 0o666)
            made[place] = "made"
        except OSError as error:
            made[place] = type(error).__name__
    sockets = []
    for name, address in (("socket file", "/tmp/minitensor-%s.sock" % token), ("abstract socket", "\0minitensor-" + token)):
        try:
            server = socket.socket(socket.AF_UNIX)
            server.bind(address)
            server.listen()
            if not address.startswith("\0"):
                os.chmod(address, 0o777)
            sockets.append(server)
            made[name] = "made"
        except OSError as error:
            made[name] = type(error).__name__
    if os.fork() == 0:  # a detached process that keeps the sockets open
        os.setsid()
        time.sleep(600)
        os._exit(0)
    globals()["_kept"] = sockets
    return made
'''

FIND = r'''
def find(token, key, ids, places):
    """What of `token` this worker finds: the SysV objects (by key, and by the ids they had, if
    the object there still has the key), the files (by name, or listed), the sockets."""
    import ctypes, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    found = []
    for kind, get in (("shm", lambda: libc.shmget(key, 0, 0)), ("sem", lambda: libc.semget(key, 0, 0)),
                      ("msg", lambda: libc.msgget(key, 0, 0))):
        if get() >= 0:
            found.append(kind + " by key")
    status = ctypes.create_string_buffer(1024)  # struct ipc_perm comes first: its key first of all
    for kind, number in ids:
        if number < 0:
            continue
        ask = {"shm": lambda: libc.shmctl(number, 2, status), "sem": lambda: libc.semctl(number, 0, 2, status),
               "msg": lambda: libc.msgctl(number, 2, status)}[kind]  # IPC_STAT
        if ask() >= 0 and ctypes.c_int32.from_buffer(status).value == key:
            found.append(kind + " by id")
    for place in places:
        try:
            if os.path.lexists(os.path.join(place, "minitensor-" + token)):
                found.append(place)
            elif any(token in name for name in os.listdir(place)):
                found.append(place + " (listed)")
        except OSError:
            pass
    for name, address in (("socket file", "/tmp/minitensor-%s.sock" % token), ("abstract socket", "\0minitensor-" + token)):
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(address)
                found.append(name)
        except OSError:
            pass
    return found
'''

LOOK = r'''
def look(paths):
    """What this worker can do with each path: list or read it, write into it."""
    import os
    seen = {}
    for path in paths:
        try:
            seen[path] = ("listed %d" % len(os.listdir(path))) if os.path.isdir(path) else "read %d" % len(open(path, "rb").read())
        except OSError as error:
            seen[path] = type(error).__name__
    for path in paths:
        if os.path.isdir(path):
            try:
                open(os.path.join(path, "planted-by-a-worker"), "w").close()
                seen["write " + path] = "written"
            except OSError as error:
                seen["write " + path] = type(error).__name__
    return seen
'''


def _levels():
    """(level, namespaces) for each level this machine can run a worker at; landlock and uid as
    root also without the namespaces private_namespaces makes (where a kernel refuses them, the
    grader's clean-up alone must hold)."""
    params = [pytest.param("bubblewrap", True, id="bubblewrap")] if isolation.bubblewrap_path() else []
    for level in (["landlock"] if isolation.landlock_abi() else []) + ["uid" if os.geteuid() == 0 else "none"]:
        params.append(pytest.param(level, True, id=level))
        if os.geteuid() == 0:
            params.append(pytest.param(level, False, id=f"{level}-no-namespaces"))
    return params


def _at(level, namespaces, monkeypatch):
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    if not namespaces:
        monkeypatch.setattr(sandbox, "NAMESPACE_STEPS", ())


def _key_of(kind, number):
    ident = {"shm": "shmid", "sem": "semid", "msg": "msqid"}[kind]
    lines = pathlib.Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
    columns = lines[0].split()
    for line in lines[1:]:
        values = line.split()
        if int(values[columns.index(ident)]) == number:
            return int(values[columns.index("key")])
    return None


def _host_traces(token, key):
    """What of the planted token the grader (in the machine's namespaces) can still see."""
    traces = [f"{kind} {number}" for kind, number, _ in uids.sysv_ipc_objects() if _key_of(kind, number) == key]
    for place in uids.SHARED_TMP:
        try:
            traces += [os.path.join(place, name) for name in os.listdir(place) if token in name]
        except OSError:
            pass
    return traces


def _expected(made):
    """What `find` must report in the worker that planted `made`."""
    expected = set()
    for kind in ("shm", "sem", "msg"):
        if made[kind] >= 0:
            expected |= {f"{kind} by key", f"{kind} by id"}
    return expected | {name for name, result in made.items() if result == "made"}


@pytest.mark.parametrize("level, namespaces", _levels())
def test_nothing_a_worker_leaves_reaches_the_next_worker_or_a_later_grading(level, namespaces, monkeypatch):
    if level == "none":
        pytest.skip("at level none the worker is the grading user (README): nothing of its own to remove")
    _at(level, namespaces, monkeypatch)
    token, key = secrets.token_hex(8), secrets.randbelow(2**30) + 1
    box = sandbox.Sandbox(ROOT)
    first, second = box.worker("one"), box.worker("two")
    uid = box.uid
    try:
        assert box.level == level
        made = planted.call(first, PLANT, "plant", (token, key), seconds=60)
        ids = [(kind, made[kind]) for kind in ("shm", "sem", "msg")]
        assert min(number for _, number in ids) >= 0, made  # SysV IPC: no level refuses to make it
        if level == "uid":
            assert all(made[name] == "made" for name in ("/dev/shm", "/tmp", "/var/tmp", "socket file",
                                                         "abstract socket")), made
        places = sorted({name for name in made if name.startswith("/")} | {str(first.home)})
        # the control: the worker that planted them finds them all (the finder can find)
        assert _expected(made) <= set(planted.call(first, FIND, "find", (token, key, ids, places), seconds=60)), made
        traces = _host_traces(token, key)
        ipc_traces = [trace for trace in traces if trace.startswith(("shm ", "sem ", "msg "))]
        if level == "bubblewrap" or namespaces:
            assert ipc_traces == [], traces  # its own IPC namespace: the machine's has nothing of it
        else:
            assert len(ipc_traces) == 3, traces  # the attack landed in the machine's IPC namespace
        if level == "uid":  # Landlock keeps the worker out of the shared folders; at uid only its namespace does
            assert any(trace.startswith("/tmp/") for trace in traces) == (not namespaces), traces
        first.stop()
        assert _host_traces(token, key) == []
        assert uids.leftovers_of(uid, keep=[box.root]) == {"processes": [], "ipc": [], "files": []}
        assert planted.call(second, FIND, "find", (token, key, ids, places), seconds=60) == []
    finally:
        first.stop()
        second.stop()
        box.close()
    assert uids.leftovers_of(uid) == {"processes": [], "ipc": [], "files": []}
    assert not os.path.exists(uids.reservation(uid))
    later = sandbox.Sandbox(ROOT)
    worker = later.worker("three")
    try:
        assert later.uid != uid
        assert planted.call(worker, FIND, "find", (token, key, ids, places), seconds=60) == []
    finally:
        worker.stop()
        later.close()
    assert _host_traces(token, key) == []


def run_as(uid, code, *args):
    """`python -c code args` as user `uid`: this Python, or Debian's where that user cannot run this one."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            done = subprocess.run([python, "-I", "-S", "-c", code, *args], preexec_fn=uids.drop_to(uid), cwd="/",
                                  capture_output=True, text=True, timeout=60)
        except PermissionError:
            continue
        if done.returncode == 0 or "Permission denied" not in done.stderr:
            return done
    return done


LEAVE = r"""
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
token, folder, other = sys.argv[1], sys.argv[2], int(sys.argv[3])
shm = libc.shmget(0, 4096, 0o1666)
status = ctypes.create_string_buffer(1024)
assert libc.shmctl(shm, 2, status) == 0  # IPC_STAT, then hand the segment to another user id (IPC_SET)
ctypes.memmove(ctypes.byref(status, 4), ctypes.byref(ctypes.c_uint32(other)), 4)
assert libc.shmctl(shm, 1, status) == 0, ctypes.get_errno()
libc.semget(0, 1, 0o1666)
libc.msgget(0, 0o1666)
deep = os.path.join(folder, "deeper")
os.mkdir(deep)  # a folder of its own inside someone else's open folder
open(os.path.join(deep, token), "w").close()
open(os.path.join(folder, token + ".file"), "w").close()
os.mkfifo(os.path.join(folder, token + ".fifo"))
socket.socket(socket.AF_UNIX).bind(os.path.join(folder, token + ".sock"))
with open("/dev/shm/" + token, "w") as file:  # POSIX shared memory is a file there
    file.write(token)
print(shm)
"""


@ROOT_ONLY
def test_clean_up_removes_what_a_uid_left_in_the_machines_shared_places(tmp_path):
    """Where no namespace can be had (Docker), the grader's clean-up alone removes a worker user's
    SysV objects (one handed to another owner, found by its creator), and its files, folders,
    FIFOs, sockets and POSIX shared memory, in a folder of someone else's that anyone may write."""
    uid = uids.FIRST_UID - 30_000 + os.getpid() % 900
    token = f"minitensor-left-{secrets.token_hex(6)}"
    folder = pathlib.Path("/tmp") / token
    folder.mkdir()
    folder.chmod(0o1777)  # another user's open folder, as /tmp itself is
    try:
        left = run_as(uid, LEAVE, token, str(folder), "65534")
        assert left.returncode == 0, left.stderr
        segment = int(left.stdout)
        assert ("shm", segment, {65534, uid}) in uids.sysv_ipc_objects()  # owned by another id now, made by uid
        found = uids.leftovers_of(uid)
        assert ("shm", segment) in found["ipc"] and {kind for kind, _ in found["ipc"]} == {"shm", "sem", "msg"}
        assert {os.path.basename(path) for path in found["files"]} >= {
            "deeper", token + ".file", token + ".fifo", token + ".sock", token}, found
        uids.clean_up(uid)
        assert uids.leftovers_of(uid) == {"processes": [], "ipc": [], "files": []}
        assert sorted(os.listdir(folder)) == [] and not os.path.exists(f"/dev/shm/{token}")
    finally:
        uids.clean_up(uid)
        folder.rmdir()


@pytest.mark.parametrize("level, namespaces", _levels())
def test_a_grading_at_the_same_time_can_neither_read_the_sandbox_nor_find_what_a_worker_leaves(
        level, namespaces, monkeypatch):
    _at(level, namespaces, monkeypatch)
    token, key = secrets.token_hex(8), secrets.randbelow(2**30) + 1
    mine, theirs = sandbox.Sandbox(ROOT), sandbox.Sandbox(ROOT)
    worker, other = mine.worker("one"), theirs.worker("two")
    try:
        info = os.stat(mine.root)
        if os.geteuid() == 0:  # the worker's group passes through; it cannot list, write or chmod its root
            assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (0, mine.uid, 0o710)
            assert theirs.uid != mine.uid
            outsider = run_as(uids.FIRST_UID - 40_000 + os.getpid() % 900,
                              f"import os; os.listdir({str(mine.root)!r})")
            assert "PermissionError" in outsider.stderr, outsider
        else:
            assert (info.st_uid, info.st_mode & 0o7777) == (os.getuid(), 0o700)
        code = mine.code / "minitensor"
        paths = [str(mine.root), str(mine.code), str(code), str(code / "__init__.py"), str(mine.worker_file)]
        own = planted.call(worker, LOOK, "look", (paths,), seconds=60)
        assert own[str(code / "__init__.py")].startswith("read") and own[str(mine.worker_file)].startswith("read")
        if level != "none":  # the copy is read-only (bubblewrap's root folder is a mount point on its private /tmp)
            written = [path for path in paths if own.get("write " + path) == "written"]
            assert written == ([str(mine.root)] if level == "bubblewrap" else []), own
        made = planted.call(worker, PLANT, "plant", (token, key), seconds=60)
        ids = [(kind, made[kind]) for kind in ("shm", "sem", "msg")]
        places = sorted({name for name in made if name.startswith("/")} | {str(worker.home)})
        seen = planted.call(other, LOOK, "look", (paths + [str(worker.home)],), seconds=60)
        if level != "none":
            assert [value for value in seen.values() if not value.endswith("Error")] == [], seen
        found = planted.call(other, FIND, "find", (token, key, ids, places), seconds=60)
        if level == "bubblewrap" or (namespaces and os.geteuid() == 0):
            assert found == [], found
        elif level != "none":
            # Without namespaces of its own, a worker's SysV objects (and at uid its files in /tmp) are
            # there for a grading at the same time while it runs; the clean-up removes them after it.
            assert "shm by key" in found, found
    finally:
        worker.stop()
        other.stop()
        mine.close()
        theirs.close()


SEEN_KEYS = {"other_processes", "other_processes_listed", "metadata_outside", "other_files_in_tmp",
             "own_ipc_namespace", "own_network", "own_mounts"}


@pytest.mark.parametrize("level, namespaces", _levels())
def test_what_a_worker_could_see_is_measured_at_its_level(level, namespaces, monkeypatch):
    _at(level, namespaces, monkeypatch)
    box = sandbox.Sandbox(ROOT)
    box.close()
    seen = box.could_see
    assert box.level == level and set(seen) == SEEN_KEYS, seen
    if level == "bubblewrap":
        assert seen == {"other_processes": 0, "other_processes_listed": 0, "metadata_outside": False,
                        "other_files_in_tmp": 0, "own_ipc_namespace": True, "own_network": True, "own_mounts": True}
        return
    assert seen["metadata_outside"] and seen["other_processes"] > 0  # what only bubblewrap hides: stat, kill(pid, 0)
    if level == "none":
        return
    if namespaces:
        assert {key: seen[key] for key in SEEN_KEYS - {"other_processes", "metadata_outside"}} == {
            "other_processes_listed": 0, "other_files_in_tmp": 0, "own_ipc_namespace": True, "own_network": True,
            "own_mounts": True}, seen
    else:
        assert not seen["own_ipc_namespace"] and not seen["own_network"] and not seen["own_mounts"], seen
        if level == "uid":  # the machine's /proc and /tmp, as they are
            assert seen["other_processes_listed"] > 0 and seen["other_files_in_tmp"] > 0, seen
        else:  # Landlock lets it list neither
            assert seen["other_processes_listed"] == 0 and seen["other_files_in_tmp"] == 0, seen


SHOW_UID = (  # in every public test of unbroadcast: the worker's user id, in the feedback
    "import os as _os\nimport minitensor.autograd as _a\n"
    "def _show(*args, **kwargs):\n"
    "    raise RuntimeError('worker uid %d' % _os.getuid())\n"
    "_a.summed_axes = _show\n")


@ROOT_ONLY
def test_a_submission_has_one_fresh_uid_for_its_import_check_and_its_tests(tmp_path, monkeypatch):
    """The import check's worker and the tests' workers run as one user id, drawn for the
    submission, freed with nothing of it left; the next submission gets another. results.json
    says what a worker could see."""
    import importlib

    level = "landlock" if isolation.landlock_abi() else "bubblewrap"  # the uid level refuses a readable repository
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    grading = importlib.import_module("homework.grade")
    checked = []

    class Recorded(sandbox.Sandbox):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            checked.append(self.uid)

    monkeypatch.setattr(grading, "Sandbox", Recorded)
    copy = homework.strip(tmp_path / "student")
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\n" + SHOW_UID)
    used = []
    for run in range(2):
        results = tmp_path / f"results{run}.json"
        ok, rows, table = grade(copy, task="unbroadcast", gradescope=results)
        document = json.loads(results.read_text())
        shown = {int(n) for n in re.findall(r"worker uid (\d+)", "".join(test["output"] for test in document["tests"]))}
        assert len(shown) == 1 and shown == {checked[run]}, (shown, checked, table)
        uid = checked[run]
        assert uids.FIRST_UID <= uid < uids.FIRST_UID + uids.UID_RANGE
        assert not os.path.exists(uids.reservation(uid))
        assert uids.leftovers_of(uid) == {"processes": [], "ipc": [], "files": []}
        seen = document["extra_data"]["worker_could_see"]
        assert document["extra_data"]["isolation"] == level and set(seen) == SEEN_KEYS, seen
        assert seen["own_ipc_namespace"] and seen["other_processes_listed"] == 0, seen
        used.append(uid)
    assert used[0] != used[1]
