"""Where student code runs while it is graded: a worker process per task, fenced off.

    sandbox = Sandbox(copy, isolation="landlock")  # the copy's packages; refuses a weaker fence
    worker = sandbox.worker("softmax_backward")
    value = worker.ask({"do": "import", "module": "minitensor"}, seconds=60)  # requests: worker.py
    worker.stop()
    sandbox.close()                                # every process it started is gone

What fences the worker in is in isolation.py (the levels) and the README, "For teachers":
- It sees the copy's minitensor/, models/, demos/ and benchmarks/, the student environment (the
  run-time packages, never PyTorch or the grader's) and its own home, through the strongest
  level the machine allows (bubblewrap, landlock, uid, none); `isolation` is the least accepted.
- Student code never runs as root: as root, the worker runs as a fresh user id, drawn at random
  from a large range and never one that owns anything (uids.py; reserved in a file that names the
  grader's process, so a crashed grader's reservation is reclaimed), and grading stops with the
  reason when no other user can run the worker's Python. A submission's import check and its
  tests' workers share one (`Sandbox(uid=...)`, reserved by `grade`), used by one sandbox at a time.
- The sandbox's folder is closed to every other user: 0710, owned by root with the worker's group
  as root (the worker passes through to the copy, its home and the cache, and cannot list, write or
  chmod it), 0700 and the grader's otherwise.
- At landlock and uid, as root, each worker has its own IPC, network and mount namespaces where
  the kernel allows them (isolation.private_namespaces: other users' processes unlisted in /proc,
  its own /tmp, /var/tmp, /dev/shm, SysV IPC and message queues); what a worker could still see at
  the level chosen is measured once (`could_see`, written to results.json).
- Limits (`resource.setrlimit`): CPU seconds, address space, file size, open files, processes,
  no core files; a worker's writable folders are capped in size (checked after each call;
  bubblewrap's /tmp is a capped tmpfs); each call has a wall-clock limit that starts when the
  worker is ready; past it the worker is killed and the next call starts a new one. A crash or
  `os._exit` costs the test it happened in.
- The grader is a child subreaper, so a worker's detached grandchildren come back to it and are
  killed with the rest (`kill_descendants`) before any result is written; as root, after each
  worker and at `close`, everything the worker's user id owns is removed (uids.clean_up): its
  processes, SysV shared memory, semaphores and message queues, and its files, sockets and POSIX
  shared memory in the shared temporary folders. Without a user id of its own (the grader not
  root), the shared memory segments its processes made are removed.
"""

import json
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

from . import isolation
from .worker_python import commands_that_make_one
from .isolation import IsolationError
from .processes import become_subreaper, descendants, is_alive, kill_descendants, running_processes  # noqa: F401
from .uids import (FIRST_UID, clean_up, drop_to, release, remove_files_of, remove_segments_made_by,  # noqa: F401
                   reservation, unused_uid)
from .worker import MAX_MESSAGE, decode, encode

PACKAGES = ("minitensor", "models", "demos", "benchmarks")  # what a graded copy contributes
WORKER_FILE = pathlib.Path(__file__).with_name("worker.py")
RUNNER_FILE = pathlib.Path(__file__).with_name("testwriting") / "runner.py"
MEMORY_MB = 6144
CPU_SECONDS = 900
FILE_MB = 256
DISK_MB = 512  # what a worker may leave in its writable folders
OPEN_FILES = 256
PROCESSES = 128  # a worker's own processes and threads (beyond what its user already runs)
START_SECONDS = 120.0  # a worker's start-up (Python, NumPy, the copy's import): not part of any test's time
NAMESPACE_STEPS = isolation.NAMESPACE_STEPS  # what private_namespaces tries at landlock and uid (tests: fewer)


class StudentError(Exception):
    """The student's code raised; the message is its type and message (and the file and line)."""


class WorkerTimedOut(BaseException):
    """A call ran past its limit. A BaseException, so no `except Exception:` swallows it."""


class WorkerDied(Exception):
    """The worker ended during a call (a crash, `os._exit`, a resource limit)."""


def _size_mb(folder):
    total = 0
    for top, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total / 2**20


# ----------------------------------------------------------------------------
# The sandbox
# ----------------------------------------------------------------------------


class Sandbox:
    """A folder with the copy's packages (read-only for the worker), one home per worker, and the
    isolation level every worker of it runs at (`level`)."""

    def __init__(self, copy, memory_mb=MEMORY_MB, python=None, isolation_at_least="none", sensitive=(), uid=None):
        """`sensitive`: paths no worker may read (the teacher's repository and tests, the grader's
        packages); a level that cannot keep them out is refused (at the uid level: they must not
        be readable by other users). `uid` (as root): the submission's user id, reserved by the
        caller, who frees it (`release`); this sandbox removes what it owns when it closes, and
        no other sandbox may use it meanwhile. Without it, the sandbox reserves one of its own."""
        minimum = isolation.rank(isolation_at_least)
        if uid is not None and os.geteuid() != 0:
            raise ValueError("a worker's user id can be given only to a grader running as root")
        self.sensitive = [os.path.realpath(path) for path in sensitive if os.path.exists(path)]
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="minitensor-sandbox-"))  # 0700
        self.python = python or os.environ.get("MINITENSOR_WORKER_PYTHON") or sys.executable
        self.memory_mb = memory_mb
        self.uid = None
        self._owns_uid = uid is None
        self.count = 0
        self.homes = []
        self.could_see = None
        try:
            self.uid = uid if uid is not None else (unused_uid() if os.geteuid() == 0 else None)
            self.code = self.root / "code"
            self.code.mkdir()
            for name in PACKAGES:
                if (pathlib.Path(copy) / name).is_dir():
                    shutil.copytree(pathlib.Path(copy) / name, self.code / name, symlinks=True,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pth"))
            self.worker_file = self.root / "worker.py"
            shutil.copy2(WORKER_FILE, self.worker_file)
            self.runner_file = self.root / "runner.py"  # a test-writing task's runs (worker.py's run_tests)
            shutil.copy2(RUNNER_FILE, self.runner_file)
            for path in [*self.code.rglob("*"), self.code, self.worker_file, self.runner_file]:
                path.chmod(0o755 if path.is_dir() else 0o644)  # behind the root folder, closed to other users
            if self.uid is not None:  # the worker's group passes through; no one else (but root) gets in
                os.chown(self.root, 0, self.uid)
                self.root.chmod(0o710)
            self.cache = self._home("numba-cache")  # shared by the workers: a kernel compiles once a run
            self._processes_before = sum(owner == os.getuid() for _, owner in running_processes().values())
            self.environment = self._environment()
            self.site = isolation.link_packages(self.environment, self.root / "site")
            self.readable = [self.code, self.worker_file, self.runner_file, self.site]
            self.level, self.refused = self._strongest_level(minimum)
        except BaseException:
            self.close()
            raise

    def _environment(self):
        run_as = drop_to(self.uid) if self.uid is not None else None
        try:
            return isolation.StudentEnvironment(self.python, run_as=run_as)
        except PermissionError as error:
            who = "another user" if self.uid is not None else "the grader"
            raise IsolationError(
                f"student code never runs as root, and {who} cannot run {self.python} ({error}); make a Python "
                f"every user can run: {commands_that_make_one()}") from None

    def _strongest_level(self, minimum):
        """(the strongest level whose worker imports NumPy here, {weaker-than-asked level: why not})."""
        candidates = ["bubblewrap", "landlock"] + (["uid"] if self.uid is not None else ["none"])
        only = os.environ.get("MINITENSOR_ISOLATION_ONLY")  # tests and teachers try a weaker level on purpose
        refused = {level: "left out by MINITENSOR_ISOLATION_ONLY" for level in candidates if only and level != only}
        candidates = [level for level in candidates if level not in refused]
        for level in candidates:
            why = self._why_not(level)
            if why is None:
                if isolation.rank(level) < minimum:
                    break
                return level, refused
            refused[level] = why
        wanted = isolation.LEVELS[minimum]
        reasons = "; ".join(f"{level}: {why}" for level, why in refused.items())
        raise IsolationError(f"student code cannot be isolated at level {wanted!r} or stronger on this machine "
                             f"({reasons}); install bubblewrap (apt-get install bubblewrap) or grade on a kernel "
                             f"with Landlock (5.13 or newer); --isolation sets the weakest level accepted")

    def _why_not(self, level):
        if level == "bubblewrap" and isolation.bubblewrap_path() is None:
            return "bwrap is not installed"
        if level == "landlock" and isolation.landlock_abi() == 0:
            return "the kernel has no Landlock"
        if level in ("bubblewrap", "landlock"):
            shown = self.environment.readable + self.environment.packages
            exposed = [path for path in self.sensitive for seen in shown
                       if path == os.path.realpath(seen) or path.startswith(os.path.realpath(seen).rstrip("/") + "/")]
            if exposed:
                return f"the student environment holds {exposed[0]}, which student code may not read"
        if level == "uid":
            readable = self._readable_by_worker(self.sensitive)
            if readable:
                return (f"the worker's user could read {readable[0]} (make it readable by its owner alone, "
                        f"chmod 700, or install bubblewrap)")
        home = self._home("check")
        try:
            probe = Worker(self, "check", home, os.devnull, level=level)
            check_numpy = (f"import sys; sys.path.insert(0, {str(self.site)!r}); import numpy; numpy.ones(2).sum()\n"
                           + _WHAT_A_WORKER_SEES)
            asked = {"outside": _OUTSIDE, "own": sorted({path.split("/")[2] for path in map(str, probe._needed)
                                                         if path.startswith("/tmp/")})}
            command = probe.command(["-c", check_numpy, json.dumps(asked)])
            check = subprocess.run(command, cwd=home, env=_environment(home, self.cache, level),
                                   preexec_fn=probe._limits, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as error:
            return str(error)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        if check.returncode:
            return (check.stderr.decode(errors="replace").strip().splitlines() or [f"exit {check.returncode}"])[-1]
        self.could_see = _could_see(check.stdout)
        return None

    def _readable_by_worker(self, paths):
        """The `paths` the worker's user can read or list (asked as that user)."""
        if not paths:
            return []
        check = "import os, sys; print('\\n'.join(p for p in sys.argv[1:] if os.access(p, os.R_OK)))"
        try:
            found = subprocess.run([sys.executable if os.access(sys.executable, os.X_OK) else "python3", "-I", "-S",
                                    "-c", check, *paths], preexec_fn=drop_to(self.uid), capture_output=True,
                                   text=True, cwd="/", timeout=60)
        except (OSError, subprocess.SubprocessError):
            found = None
        if found is None or found.returncode:  # this Python cannot run as that user: ask the worker's
            found = subprocess.run([self.python, "-I", "-S", "-c", check, *paths], preexec_fn=drop_to(self.uid),
                                   capture_output=True, text=True, cwd="/", timeout=60)
        return [line for line in found.stdout.splitlines() if line]

    def _home(self, name):
        home = self.root / name
        home.mkdir()
        if self.uid is not None:
            os.chown(home, self.uid, self.uid)
        home.chmod(0o700)
        return home

    def worker(self, task, log=None):
        self.count += 1
        home = self._home(f"home-{self.count}")
        return Worker(self, task, home, log, level=self.level)

    def close(self):
        """Remove everything of the sandbox's user (the workers and whatever they started, its IPC
        objects and files: uids.clean_up) and free its user id if the sandbox reserved it; the
        caller kills its own descendants (`kill_descendants`)."""
        if self.uid is not None:
            if self._owns_uid:
                release(self.uid)
            else:
                clean_up(self.uid)
            self.uid = None
        shutil.rmtree(self.root, ignore_errors=True)


_OUTSIDE = ("/etc/passwd", str(WORKER_FILE))  # outside every sandbox; bubblewrap does not even show them
_WHAT_A_WORKER_SEES = r"""
import json, os
asked = json.loads(sys.argv[1])
me = {os.getpid(), os.getppid()}
try:
    me |= {int(tid) for tid in os.listdir("/proc/self/task")}  # its own threads (NumPy's) answer signal 0 too
except OSError:
    pass
try:
    listed = len([p for p in os.listdir("/proc") if p.isdigit() and int(p) not in me])
except OSError:
    listed = 0
found = 0  # signal 0 tells a process that exists (EPERM) from one that does not (ESRCH)
for pid in range(1, min(max(os.getpid(), 32768) + 32768, 1 << 22)):
    if pid not in me:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except OSError:
            pass
        found += 1
outside = False
for path in asked["outside"]:
    try:
        os.stat(path)
        outside = True
    except OSError:
        pass
try:
    tmp = len([name for name in os.listdir("/tmp") if name not in asked["own"]])
except OSError:
    tmp = 0
spaces = {}
for kind in ("ipc", "net", "mnt"):
    try:
        spaces[kind] = os.readlink("/proc/self/ns/" + kind)
    except OSError:
        spaces[kind] = None
print(json.dumps({"listed": listed, "found": found, "outside": outside, "tmp": tmp, "spaces": spaces}))
"""


def _could_see(stdout):
    """What the check found, as results.json reports it: other processes (found with signal 0,
    and those listed in /proc), whether stat() answers outside the sandbox, the entries of /tmp
    that are not its own (the sandbox, the student environment), whether its SysV IPC, network
    and mounts were its own. None if it said nothing."""
    try:
        seen = json.loads(stdout.decode(errors="replace").strip().splitlines()[-1])
        grader = {}
        for kind in ("ipc", "net", "mnt"):
            try:
                grader[kind] = os.readlink(f"/proc/self/ns/{kind}")
            except OSError:
                grader[kind] = None
        return {"other_processes": int(seen["found"]), "other_processes_listed": int(seen["listed"]),
                "metadata_outside": bool(seen["outside"]), "other_files_in_tmp": int(seen["tmp"]),
                **{f"own_{name}": seen["spaces"][kind] is not None and seen["spaces"][kind] != grader[kind]
                   for kind, name in (("ipc", "ipc_namespace"), ("net", "network"), ("mnt", "mounts"))}}
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _environment(home, cache, level):
    private = "/tmp" if level == "bubblewrap" else str(home)
    env = {"PATH": "/usr/bin:/bin", "HOME": private, "TMPDIR": private, "LANG": "C.UTF-8",
           "MPLBACKEND": "Agg", "MPLCONFIGDIR": private, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    if "OPENBLAS_CORETYPE" in os.environ:  # the machine's setting, not ours to change
        env["OPENBLAS_CORETYPE"] = os.environ["OPENBLAS_CORETYPE"]
    return env


class Worker:
    """One process running student code for one task; restarted after a crash or a time-out."""

    def __init__(self, sandbox, task, home, log, level):
        self.sandbox, self.task, self.home, self.level = sandbox, task, home, level
        self.log = log or os.devnull
        self.process = None
        self._needed = [*sandbox.readable, home, sandbox.cache, *sandbox.environment.readable,
                        *sandbox.environment.packages]  # what its private /tmp holds (landlock, uid)

    def command(self, arguments):
        """The worker's command line at its level: Python, inside bwrap for bubblewrap."""
        sandbox = self.sandbox
        python = [sandbox.python, "-I", *arguments]
        if self.level != "bubblewrap":
            return python
        return isolation.bubblewrap_command(sandbox.environment, sandbox.readable, self.home,
                                            writable=[sandbox.cache]) + python

    def _limits(self):
        """Run in the worker's process before it execs: limits, namespaces, the user id, Landlock."""
        import resource

        megabytes = 2**20
        resource.setrlimit(resource.RLIMIT_AS, (self.sandbox.memory_mb * megabytes,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_MB * megabytes,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
        uid = self.sandbox.uid
        already = 0 if uid is not None else self.sandbox._processes_before  # the limit counts the user's processes
        resource.setrlimit(resource.RLIMIT_NPROC, (already + PROCESSES,) * 2)
        if uid is not None and self.level in ("landlock", "uid") and os.geteuid() == 0:
            isolation.private_namespaces(self._needed, cwd=str(self.home), steps=NAMESPACE_STEPS)
        if uid is not None:
            drop_to(uid)()
        if self.level != "bubblewrap":  # bubblewrap has no network at all; elsewhere: no socket but a Unix one
            isolation.no_network_sockets()
        if self.level == "landlock":
            rules = isolation.landlock_rules(self.sandbox.environment, self.sandbox.readable, self.home,
                                             writable=[self.sandbox.cache])
            isolation.apply_landlock(rules, isolation.landlock_abi())

    def start(self, memory_mb=None, import_copy=True):
        """Start the worker and wait (up to START_SECONDS, not counted in any test) until it says
        it is ready: Python, NumPy and the copy's packages imported. With memory_mb, the worker
        limits its own address space to what it holds then plus that (and a small allowance for
        the copy's import), before the copy's code runs: a worker for one call (`call(last=True)`).
        With import_copy=False the worker imports nothing of the copy before it is ready (a worker
        whose probe forks a fresh process per run, testwriting/runner.py)."""
        answers_read, answers_write = os.pipe()
        arguments = [str(self.sandbox.worker_file), str(self.sandbox.code), self.task, str(answers_write),
                     str(self.sandbox.site)]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command(arguments), stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(answers_write,),
                cwd=self.home, env=_environment(self.home, self.sandbox.cache, self.level),
                preexec_fn=self._limits, start_new_session=True)
        os.close(answers_write)
        self.answers = answers_read
        nonce = secrets.token_hex(16)
        deadline = time.monotonic() + START_SECONDS
        try:
            self._send({"nonce": nonce, **({"memory_mb": float(memory_mb)} if memory_mb is not None else {}),
                        **({} if import_copy else {"import_copy": False})})
            ready = None
            while not (type(ready) is dict and ready.get("ready") == nonce):  # frames written ahead are passed over
                ready = self._next_frame(deadline)
        except WorkerTimedOut:
            self.stop()
            raise WorkerDied(f"the worker did not start within {START_SECONDS:g} s (does importing the copy hang?)"
                             ) from None
        except Exception as error:
            status = self._settle()
            how = f"exit status {status}" if status is not None and status >= 0 else (
                f"{signal.Signals(-status).name}" if status is not None else str(error))
            raise WorkerDied(f"the worker could not start ({how}); its output is in the grader's workers.log") from None
        return self

    def _send(self, message):
        request = encode(message)
        self.process.stdin.write(struct.pack("<Q", len(request)) + request)
        self.process.stdin.flush()

    def _next_frame(self, deadline, handles=None):
        (length,) = struct.unpack("<Q", self._read(8, deadline))
        if length > MAX_MESSAGE:
            raise WorkerDied(f"the answer was {length} bytes, over the limit of {MAX_MESSAGE}")
        return decode(self._read(length, deadline), handles)

    def ask(self, request, handles=None, seconds=60.0, last=False, answer_asks=None):
        """The worker's answer to one request (worker.py lists them): plain data, with each handle
        it names made into `handles(number)`. With last, the worker ends after answering. With
        answer_asks, the worker may ask the grader questions during the request (a test-writing
        run, testwriting/oracle.py): each is answered with answer_asks(question)."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        nonce = secrets.token_hex(16)
        deadline = time.monotonic() + seconds
        try:
            self._send({**request, "nonce": nonce, **({"last": True} if last else {})})
            answer = None
            while not (type(answer) is dict and answer.get("nonce") == nonce):  # frames written ahead are passed over
                answer = self._next_frame(deadline, handles)
                if answer_asks is not None and type(answer) is dict and set(answer) == {"nonce", "ask"} \
                        and answer["nonce"] == nonce:
                    self._send(answer_asks(answer["ask"]))
                    answer = None
        except WorkerTimedOut:
            self.stop()
            raise
        except WorkerDied as error:
            self.stop()
            raise WorkerDied(str(error)) from None
        except Exception as error:  # a closed pipe, an early end, bytes not in the grader's format
            status = self._settle()
            raise WorkerDied(self._death(status, error)) from None
        if set(answer) not in ({"nonce", "value"}, {"nonce", "error"}):
            self.stop()
            raise WorkerDied("the worker's answer was not in the grader's format")
        written = max(_size_mb(self.home), _size_mb(self.sandbox.cache))
        if written > DISK_MB:
            self.stop()
            shutil.rmtree(self.sandbox.cache, ignore_errors=True)
            self.sandbox._home(self.sandbox.cache.name)
            raise WorkerDied(f"the student's code wrote {written:.0f} MB to disk during this test, over the limit "
                             f"of {DISK_MB} MB")
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

    def _settle(self):
        """The worker ended its side: let it exit (a second at most) so its status is its own, then stop it."""
        try:
            self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        return self.stop()

    def stop(self):
        """Kill the worker (its process group and whatever it started); return its exit status.
        Its home is emptied: nothing a worker wrote reaches the next one."""
        process, self.process = self.process, None
        if process is None:
            return None
        family = descendants(process.pid)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        for pid in family:  # those that left the process group (setsid) or live in bwrap's namespaces
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            status = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            status = None
        if self.sandbox.uid is not None:  # until none is left: the next worker starts clean
            clean_up(self.sandbox.uid, keep=[self.sandbox.root])  # its processes, SysV IPC, files in the shared folders
        deadline = time.monotonic() + 5
        while any(is_alive(pid) for pid in family) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.sandbox.uid is None:  # the grader's own user: what is surely the worker's
            remove_segments_made_by({process.pid, *family})
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            os.close(self.answers)
        except OSError:
            pass
        for entry in list(self.home.iterdir()) if self.home.is_dir() else ():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        return status
