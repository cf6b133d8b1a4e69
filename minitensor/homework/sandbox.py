"""Where student code runs while it is graded: a worker process per task, fenced off.

    sandbox = Sandbox(copy)                     # the copy's packages, in a folder of their own
    worker = sandbox.worker("softmax_backward", python=sys.executable)
    value = worker.call(source, "probe_name", args, kwargs, seconds=60)
    worker.stop()
    sandbox.close()                             # every process it started is gone

What fences the worker in (and what it cannot do without root) is in the README, "For teachers".
- It sees a folder that holds the copy's minitensor/, models/, demos/ and benchmarks/ and
  nothing else (no tests, no conftest.py, no results file), and a scrubbed environment.
- Resource limits (`resource.setrlimit`): CPU seconds, address space, file size, no core files;
  each call has a wall-clock limit, after which the worker is killed and the next call starts a
  new one. A crash or `os._exit` costs the test it happened in.
- Run as root (Gradescope does), the worker drops to an unused user id: the grader's folders
  (0700) are out of its reach, and every process of that id is killed when grading ends.
- The grader is a child subreaper, so a worker's detached grandchildren come back to it and are
  killed with the rest (`kill_descendants`) before any result is written.
"""

import ctypes
import os
import pathlib
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

from .worker import MAX_MESSAGE, decode, encode

PACKAGES = ("minitensor", "models", "demos", "benchmarks")  # what a graded copy contributes
WORKER_FILE = pathlib.Path(__file__).with_name("worker.py")
MEMORY_MB = 6144
CPU_SECONDS = 900
FILE_MB = 256
FIRST_UID = 61_000  # where the search for an unused user id starts, when grading as root


class StudentError(Exception):
    """The student's code raised; the message is its type and message (and the file and line)."""


class WorkerTimedOut(BaseException):
    """A call ran past its limit. A BaseException, so no `except Exception:` swallows it."""


class WorkerDied(Exception):
    """The worker ended during a call (a crash, `os._exit`, a resource limit)."""


def become_subreaper():
    """Make this process the child subreaper (Linux): orphaned descendants are reparented to
    it instead of to init, so `kill_descendants` finds a worker's detached children too."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass  # not Linux: the process groups are still killed


def _processes():
    """{pid: (parent pid, real uid)} of every process this one can see."""
    table = {}
    for entry in pathlib.Path("/proc").iterdir() if pathlib.Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        table[int(entry.name)] = (int(fields["PPid"]), int(fields["Uid"].split()[0]))
    return table


def kill_descendants(uid=None, only_uid=False):
    """SIGKILL every descendant of this process (and, with `uid`, every process of that user;
    with only_uid, those alone), until none is left; reap them."""
    me = os.getpid()
    for _ in range(50):
        table = _processes()
        children = {}
        for pid, (parent, _) in table.items():
            children.setdefault(parent, []).append(pid)
        doomed, stack = set(), [] if only_uid else list(children.get(me, []))
        while stack:
            pid = stack.pop()
            doomed.add(pid)
            stack += children.get(pid, [])
        if uid is not None:
            doomed |= {pid for pid, (_, owner) in table.items() if owner == uid and pid != me}
        alive = [pid for pid in doomed if _is_alive(pid)]
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        time.sleep(0.02)


def _is_alive(pid):
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _unused_uid():
    """A user id no account has and no process runs as, reserved (a file made with O_EXCL) so
    that two sandboxes at once, the grader's and the import check's, never share one."""
    import pwd

    taken = {owner for _, owner in _processes().values()}
    for uid in range(FIRST_UID, FIRST_UID + 5000):
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if uid in taken:
            continue
        try:
            os.close(os.open(_reservation(uid), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            continue
        return uid
    raise RuntimeError("no unused user id to run student code as")


def _reservation(uid):
    return os.path.join(tempfile.gettempdir(), f".minitensor-worker-uid-{uid}")


class Sandbox:
    """A folder with the copy's packages (read-only for the worker) and one home per worker."""

    def __init__(self, copy, memory_mb=MEMORY_MB, python=None, require_user=False):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="minitensor-sandbox-"))
        self.python = python or sys.executable
        self.uid = _unused_uid() if os.geteuid() == 0 else None
        self.warning = None
        self.memory_mb = memory_mb
        self.code = self.root / "code"
        self.code.mkdir()
        for name in PACKAGES:
            if (pathlib.Path(copy) / name).is_dir():
                shutil.copytree(pathlib.Path(copy) / name, self.code / name, symlinks=False,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pth"))
        shutil.copy2(WORKER_FILE, self.root / "worker.py")
        self.cache = self._home("numba-cache")  # shared by the workers: a kernel compiles once a run
        for path in [self.root, *self.code.rglob("*"), self.root / "worker.py"]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        self.root.chmod(0o711)  # the worker may pass through, not list
        self.count = 0
        if self.uid is not None and not self._runs_as_uid():
            why = (f"{self.python} cannot run NumPy as another user (a folder on its path is not readable "
                   f"by others)")
            if require_user:
                self.close()
                raise PermissionError(f"{why}; install the grader's Python where every user can read it")
            self.uid, self.warning = None, f"note: student code ran as root, not as a user of its own: {why}"

    def _runs_as_uid(self):
        probe = Worker(self, "check", self.python, self.root, os.devnull)
        try:
            check = subprocess.run([self.python, "-I", "-c", "import numpy"], cwd="/", preexec_fn=probe._limits,
                                   env=_environment(self.root, self.root), capture_output=True, timeout=120)
            return check.returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False

    def _home(self, name):
        home = self.root / name
        home.mkdir()
        if self.uid is not None:
            os.chown(home, self.uid, self.uid)
        home.chmod(0o700)
        return home

    def worker(self, task, log=None):
        self.count += 1
        return Worker(self, task, self.python, self._home(f"home-{self.count}"), log)

    def close(self):
        """Kill every process of the sandbox's user (the workers and whatever they started);
        the caller kills its own descendants (`kill_descendants`) when it is done with them."""
        if self.uid is not None:
            kill_descendants(self.uid, only_uid=True)
            try:
                os.remove(_reservation(self.uid))
            except OSError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def _environment(home, cache):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8",
           "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(home), "NUMBA_CACHE_DIR": str(cache),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    if "OPENBLAS_CORETYPE" in os.environ:  # the machine's setting, not ours to change
        env["OPENBLAS_CORETYPE"] = os.environ["OPENBLAS_CORETYPE"]
    return env


class Worker:
    """One process running student code for one task; restarted after a crash or a time-out."""

    def __init__(self, sandbox, task, python, home, log):
        self.sandbox, self.task, self.python, self.home = sandbox, task, python, home
        self.log = log or os.devnull
        self.process = None

    def _limits(self):
        import resource

        megabytes = 2**20
        resource.setrlimit(resource.RLIMIT_AS, (self.sandbox.memory_mb * megabytes,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_MB * megabytes,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        uid = self.sandbox.uid
        if uid is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (256, 256))
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    def start(self):
        answers_read, answers_write = os.pipe()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [self.python, "-I", str(self.sandbox.root / "worker.py"), str(self.sandbox.code), self.task,
                 str(answers_write)],
                stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(answers_write,),
                cwd=self.home, env=_environment(self.home, self.sandbox.cache),
                preexec_fn=self._limits, start_new_session=True)
        os.close(answers_write)
        self.answers = answers_read
        return self

    def call(self, source, name, args=(), kwargs=None, seconds=60.0):
        """What the probe `name` (defined in `source`) returns on the student's code."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        nonce = secrets.token_hex(16)
        request = encode({"source": source, "name": name, "args": list(args), "kwargs": dict(kwargs or {}),
                          "nonce": nonce})
        deadline = time.monotonic() + seconds
        try:
            self.process.stdin.write(struct.pack("<Q", len(request)) + request)
            self.process.stdin.flush()
            answer = None
            while not (type(answer) is dict and answer.get("nonce") == nonce):  # frames written ahead are passed over
                (length,) = struct.unpack("<Q", self._read(8, deadline))
                if length > MAX_MESSAGE:
                    raise WorkerDied(f"the answer was {length} bytes, over the limit of {MAX_MESSAGE}")
                answer = decode(self._read(length, deadline))
        except WorkerTimedOut:
            self.stop()
            raise
        except Exception as error:  # a closed pipe, an early end, bytes not in the grader's format
            status = self.stop()
            raise WorkerDied(self._death(status, error)) from None
        if set(answer) not in ({"nonce", "value"}, {"nonce", "error"}):
            self.stop()
            raise WorkerDied("the worker's answer was not in the grader's format")
        if "error" in answer:
            raise StudentError(answer["error"])
        return answer["value"]

    def _read(self, count, deadline):
        chunks, left = [], count
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimedOut()
            ready, _, _ = select.select([self.answers], [], [], remaining)
            if not ready:
                raise WorkerTimedOut()
            chunk = os.read(self.answers, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _death(self, status, error):
        if status is not None and status < 0:
            name = signal.Signals(-status).name
            why = {"SIGXCPU": " (its CPU-time limit)", "SIGKILL": " (killed: a memory or process limit?)"}.get(name, "")
            return f"the student's code ended the grading process with {name}{why} during this test"
        if status is not None:
            return f"the student's code ended the grading process (exit status {status}) during this test"
        return f"the grading process stopped answering during this test ({error})"

    def stop(self):
        """Kill the worker (its process group and whatever it started); return its exit status."""
        process, self.process = self.process, None
        if process is None:
            return None
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            status = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            status = None
        for stream in (process.stdin,):
            try:
                stream.close()
            except OSError:
                pass
        try:
            os.close(self.answers)
        except OSError:
            pass
        return status
