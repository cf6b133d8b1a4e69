"""How a worker is fenced in: four levels, the strongest this machine allows first.

    bubblewrap   a private view of the file system (the copy, the student environment, a
                 size-capped private /tmp, nothing else), its own process table, no network, no
                 shared IPC: Linux namespaces, through Debian's and Ubuntu's `bwrap`
    landlock     the kernel's file-access sandbox (Linux 5.13+, works inside Docker where
                 namespaces are refused): the same files readable, only the worker's home
                 writable, no TCP, no signals or abstract sockets out of the sandbox
    uid          the floor, as root only: an unused user id, the grader's folders 0700
    none         a teacher grading as themselves with neither of the first two: the worker can
                 read what the teacher can (the README says so)

As root, every level drops to an unused user id first, so student code never runs as root. The
levels are ordered; `grade --isolation LEVEL` refuses to grade below LEVEL.

At landlock and uid, as root, the worker also gets namespaces of its own where the kernel allows
them (`private_namespaces`, before the user id is dropped): its own SysV IPC and POSIX message
queues (gone with the worker), its own network (none: abstract Unix sockets reach no one), and a
private view of the mounts: /proc remounted hidepid=invisible (other users' processes are not
listed), fresh size-capped /tmp, /var/tmp and /dev/shm holding only what the worker may use of
them. Where a step is refused (Docker), it carries on without it: the grader then removes what the
worker's user left (uids.clean_up), and results.json says what a worker could see
(`Sandbox.could_see`). What no level but bubblewrap hides: a signal-0 probe (kill(pid, 0)) still
tells which process ids exist (Landlock's signal scope answers EPERM, not ESRCH), and Landlock does
not stop stat() outside the sandbox.

What the worker may read is computed once per sandbox (`StudentEnvironment`): the interpreter
(its standard library, never its site-packages), the distributions minitensor needs at run time
(numpy, scipy, numba, matplotlib, tqdm, threadpoolctl and what they require: never PyTorch, never
pytest, never an editable install's link back to the teacher's repository), the system's shared
libraries, the copy, and the worker's own home.
"""

import ctypes
import json
import os
import platform
import shutil
import subprocess

LEVELS = ("none", "uid", "landlock", "bubblewrap")  # weakest first
RUNTIME = ("numpy", "scipy", "numba", "matplotlib", "tqdm", "threadpoolctl")  # setup.cfg's install_requires
TMP_MB = 256  # the private /tmp of a bubblewrap worker
SHM_MB = 64  # and its /dev/shm (the rest of its /dev is read-only)
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
               "/etc/ld.so.conf.d", "/etc/localtime", "/etc/fonts", "/etc/alternatives")
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
MACHINE_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/sys/devices/system/cpu", "/sys/fs/cgroup")


class IsolationError(PermissionError):
    """Student code cannot be fenced in as asked (no other user can run the Python, or the
    machine allows only a weaker level than the teacher accepts)."""


def rank(level):
    if level not in LEVELS:
        raise ValueError(f"isolation level {level!r}: choose one of {', '.join(LEVELS)}")
    return LEVELS.index(level)


# ----------------------------------------------------------------------------
# What the worker may read: the student environment, found by asking its interpreter
# ----------------------------------------------------------------------------

_DESCRIBE = r"""
import importlib.metadata as metadata, json, re, site, sys, sysconfig
wanted, seen, dists = list(sys.argv[1:]), set(), []
while wanted:
    name = re.split(r"[<>=!~; \[(]", wanted.pop(), maxsplit=1)[0].strip().lower().replace("_", "-")
    if not name or name in seen:
        continue
    seen.add(name)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        continue
    base = str(dist.locate_file(""))
    tops = {str(file).split("/")[0] for file in dist.files or () if not str(file).startswith("..")}
    tops = {t for t in tops if t != "__pycache__" and not t.endswith(".pth") and not t.startswith("__editable__")}
    dists.append({"name": name, "base": base, "entries": sorted(tops)})
    wanted += [r for r in dist.requires or () if "extra ==" not in r and "extra==" not in r]
hidden = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
hidden += site.getsitepackages() + [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
hidden += [base["purelib"], base["platlib"]]  # the base interpreter's packages, which a venv does not import
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix, "base_prefix": sys.base_prefix,
                  "stdlib": sysconfig.get_paths()["stdlib"], "hidden": sorted(set(hidden)), "dists": dists,
                  "version": list(sys.version_info[:2])}))
"""


class StudentEnvironment:
    """The paths a worker may read (`readable`) and the run-time packages it may import
    (`packages`, the entries of their distributions), for the interpreter `python` as `run_as`
    (a preexec function) sees them. The interpreter's own site-packages folders are `hidden`: a
    worker imports from a folder of links to `packages` alone (`link_packages`), so a package
    outside them (PyTorch, an editable install's link to the teacher's repository) is not
    there at all, rather than there and unreadable."""

    def __init__(self, python, run_as=None):
        try:
            found = subprocess.run([python, "-I", "-c", _DESCRIBE, *RUNTIME], capture_output=True, text=True,
                                   cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, preexec_fn=run_as,
                                   timeout=120)
        except (OSError, subprocess.SubprocessError) as error:
            raise PermissionError(f"{python} could not be started: {error}") from None
        if found.returncode:
            last = (found.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise PermissionError(f"{python} could not be started as the worker's user: {last}")
        described = json.loads(found.stdout)
        missing = [name for name in ("numpy",) if name not in {d["name"] for d in described["dists"]}]
        if missing:
            raise PermissionError(f"{python} has no {', '.join(missing)}: the worker's Python needs minitensor's "
                                  f"run-time packages ({', '.join(RUNTIME)})")
        self.python = python
        self.version = tuple(described["version"])
        hidden = {os.path.realpath(p) for p in described["hidden"]}
        shown = []
        for dist in described["dists"]:
            base = os.path.realpath(dist["base"])
            shown += [os.path.join(base, entry) for entry in dist["entries"]
                      if os.path.lexists(os.path.join(base, entry))]
        self.packages = sorted(set(shown))  # what a worker imports, linked from one folder (`link_packages`)
        interpreter = [described["prefix"], described["base_prefix"], os.path.dirname(described["stdlib"])]
        readable = []
        for root in dict.fromkeys(os.path.realpath(p) for p in interpreter):
            readable += _expose(root, hidden)
        executable = os.path.realpath(described["executable"])
        readable += [described["executable"], executable]
        self.readable = _minimal(readable)
        self.hidden = sorted(hidden)


def link_packages(environment, folder):
    """`folder`, made here, holding a link to each of the environment's packages: the one folder
    of packages on a worker's sys.path."""
    os.makedirs(folder, mode=0o755)
    for path in environment.packages:
        link = os.path.join(folder, os.path.basename(path))
        if not os.path.lexists(link):
            os.symlink(path, link)
    return folder


def _expose(root, hidden):
    """`root` as a list of paths that together show everything under it but the `hidden`
    folders: `root` itself if nothing hidden is inside, else its children, expanded likewise.
    A link is judged by where it leads (a venv's lib64 -> lib must not show lib's site-packages)."""
    if not os.path.lexists(root):
        return []
    real = os.path.realpath(root)
    inside = [h for h in hidden if h == real or h.startswith(real.rstrip("/") + "/")]
    if not inside:
        return [root]
    if os.path.islink(root) or real in hidden:
        return []  # a link into hidden packages, or the hidden folder itself: left out
    shown = []
    for entry in sorted(os.listdir(root)):
        shown += _expose(os.path.join(root, entry), hidden)
    return shown


def _minimal(paths):
    """The paths without duplicates and without those inside another one of them."""
    ordered = sorted(dict.fromkeys(paths))
    kept = []
    for path in ordered:
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


# ----------------------------------------------------------------------------
# bubblewrap
# ----------------------------------------------------------------------------


def _beyond_system(paths):
    """The paths not already under a system folder that every level shows whole (/usr, /lib...)."""
    system = [os.path.realpath(path) for path in SYSTEM_READ if os.path.isdir(path)]

    def where(path):  # the entry itself (a link as a link), in its parent's real folder
        return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))

    return [path for path in paths if not any(where(path).startswith(folder.rstrip("/") + "/") for folder in system)]


def bubblewrap_path():
    return shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")


def bubblewrap_command(environment, readable, home, writable=(), tmp_mb=TMP_MB):
    """The bwrap prefix of a worker's command line: a new root holding only what it may see.
    The worker's HOME and TMPDIR are its private, size-capped /tmp (mounted first: the binds
    below may lie under the machine's /tmp)."""
    command = [bubblewrap_path(), "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
               "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
               "--proc", "/proc", "--dev", "/dev", "--size", str(SHM_MB * 2**20), "--tmpfs", "/dev/shm",
               "--size", str(tmp_mb * 2**20), "--tmpfs", "/tmp", "--remount-ro", "/dev"]
    for path in SYSTEM_READ:
        if os.path.islink(path):
            command += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            command += ["--ro-bind", path, path]
    for path in _beyond_system(environment.readable + environment.packages) + [str(path) for path in readable]:
        command += ["--ro-bind", path, path]
    for path in writable:
        command += ["--bind", str(path), str(path)]
    command += ["--bind", str(home), str(home), "--chdir", str(home)]
    return command


# ----------------------------------------------------------------------------
# Namespaces of the worker's own at landlock and uid (as root), set up in its starter before exec
# ----------------------------------------------------------------------------

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWNET = 0x0002_0000, 0x0800_0000, 0x4000_0000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
_MNT_DETACH = 2
PRIVATE_TMP = ("/tmp", "/var/tmp")  # replaced by a fresh tmpfs each, with what the worker needs bound back
NAMESPACE_STEPS = ("ipc", "net", "mount", "proc", "tmp", "shm", "mqueue")


def private_namespaces(needed=(), cwd=None, tmp_mb=TMP_MB, steps=NAMESPACE_STEPS):
    """As root, in a worker's child before it drops its user id: unshare the IPC, network and mount
    namespaces, then (in the mount namespace, made private so nothing propagates back) remount
    /proc with hidepid=invisible, and mount fresh tmpfs on /tmp and /var/tmp (the `needed` paths
    under them, such as the sandbox, bound back at their places), /dev/shm and /dev/mqueue. Each
    step is tried alone; a refused one is left out (a mount half made is undone). Returns the
    steps that were made; then changes to `cwd` again (at its place in the new mounts). Raises
    nothing: it runs between fork and exec."""
    made = []
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return made

    def mount(source, target, kind, flags, options):
        return libc.mount(source and os.fsencode(source), os.fsencode(target), kind and kind.encode(),
                          ctypes.c_ulong(flags), options and options.encode()) == 0

    for step, flag in (("ipc", _CLONE_NEWIPC), ("net", _CLONE_NEWNET), ("mount", _CLONE_NEWNS)):
        if step in steps and libc.unshare(flag) == 0:
            made.append(step)
    if "mount" not in made:
        return made
    if not mount("none", "/", None, _MS_REC | _MS_PRIVATE, None):
        return made  # mounts made now could reach the machine's: none is made
    plain = _MS_NOSUID | _MS_NODEV
    if "proc" in steps and mount("proc", "/proc", "proc", plain | _MS_NOEXEC, "hidepid=invisible"):
        made.append("proc")
    if "tmp" in steps and _private_tmp(libc, mount, needed, tmp_mb):
        made.append("tmp")
    if "shm" in steps and os.path.isdir("/dev/shm") and \
            mount("tmpfs", "/dev/shm", "tmpfs", plain, f"size={SHM_MB * 2**20},mode=1777"):
        made.append("shm")
    if "mqueue" in steps and "ipc" in made and os.path.isdir("/dev/mqueue") and \
            mount("mqueue", "/dev/mqueue", "mqueue", plain | _MS_NOEXEC, None):
        made.append("mqueue")  # the new IPC namespace's queues (mq_open reaches them without it)
    if cwd is not None:
        try:
            os.chdir(cwd)  # the folder at its place in the new mounts (the same folder, bound back)
        except OSError:
            pass
    return made


def _entry(path):
    """`path` with its folders' links resolved and its last component kept (a link stays a link)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _private_tmp(libc, mount, needed, tmp_mb):
    """A fresh tmpfs on each of PRIVATE_TMP, the `needed` paths under it put back: a folder or
    file bound from a descriptor opened before the mount, a link made again. All or nothing: a
    failure undoes that folder's mount and stops."""
    for top in PRIVATE_TMP:
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        real_top = os.path.realpath(top)
        inside = _minimal([_entry(str(path)) for path in needed
                           if _entry(str(path)).startswith(real_top.rstrip("/") + "/") and os.path.lexists(path)])
        kept = []  # (path, a descriptor to bind from, or None, and a link's target)
        try:
            for path in inside:
                if os.path.islink(path):
                    kept.append((path, None, os.readlink(path)))
                else:
                    kept.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC), None))
            if not mount("tmpfs", real_top, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={tmp_mb * 2**20},mode=1777"):
                return False
            try:
                for path, fd, target in kept:
                    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                    if fd is None:
                        os.symlink(target, path)
                        continue
                    if os.path.isdir(f"/proc/self/fd/{fd}"):
                        os.mkdir(path, 0o700)
                    else:
                        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
                    if not mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC, None):
                        raise OSError(ctypes.get_errno(), f"bind {path}")
            except OSError:
                libc.umount2(os.fsencode(real_top), _MNT_DETACH)
                return False
        except OSError:
            return False
        finally:
            for _, fd, _ in kept:
                if fd is not None:
                    os.close(fd)
    return True


# ----------------------------------------------------------------------------
# Landlock: the kernel's own sandbox, applied by the worker's starter before exec
# ----------------------------------------------------------------------------

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}  # create_ruleset, add_rule, restrict_self
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE  # (+ TRUNCATE, IOCTL_DEV by ABI): what a rule on a file may hold


def landlock_abi():
    """The kernel's Landlock ABI version, or 0 when it has none (or this is not Linux)."""
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return 0
    version = libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    return max(int(version), 0)


def _handled_fs(abi):
    rights = (1 << 13) - 1  # execute ... make_sym: every right of ABI 1
    if abi >= 2:
        rights |= 1 << 13  # refer
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def landlock_rules(environment, readable, home, writable=()):
    """[(path, rights)]: read (and execute) the environment, the copy and the system's libraries;
    read and write the worker's home and `writable`; the worker's own /proc entries and the
    machine's description (CPU count, memory) that NumPy and Numba read."""
    read = _READ_FILE | _READ_DIR | _EXECUTE
    rules = [(path, read) for path in SYSTEM_READ if os.path.exists(path)]
    shown = _beyond_system(environment.readable + environment.packages) + [str(path) for path in readable]
    rules += [(path, read) for path in shown]
    rules += [(path, read) for path in MACHINE_FILES if os.path.exists(path)]
    rules += [("/proc/self", read), ("/proc/thread-self", read)]
    every = _handled_fs(6)
    rules += [(path, _READ_FILE | _WRITE_FILE) for path in DEVICES if os.path.exists(path)]
    rules += [(str(path), every) for path in [home, *writable]]
    return rules


def apply_landlock(rules, abi):
    """Restrict this process (and whatever it execs or forks) to `rules`. Called in the worker's
    child between fork and exec; raises OSError when the kernel refuses."""
    create, add_rule, restrict = _SYSCALLS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    handled = _handled_fs(abi)
    attr = (ctypes.c_uint64 * 3)(handled, 0, 0)
    size = 8
    if abi >= 4:
        attr[1], size = 0b11, 16  # bind_tcp | connect_tcp, with no rule: no TCP at all
    if abi >= 6:
        attr[2], size = 0b11, 24  # abstract unix sockets and signals stay inside the sandbox
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that is not there grants nothing
            try:
                if not os.path.isdir(f"/proc/self/fd/{fd}"):
                    rights &= _FILE_RIGHTS | _TRUNCATE | _IOCTL_DEV
                rights &= handled
                beneath = struct_path_beneath(rights, fd)
                if libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(1), beneath, ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) < 0:  # PR_SET_NO_NEW_PRIVS, which Landlock requires
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def struct_path_beneath(rights, fd):
    """struct landlock_path_beneath_attr {u64 allowed_access; s32 parent_fd;} (packed: 12 bytes)."""
    buffer = ctypes.create_string_buffer(12)
    ctypes.memmove(buffer, ctypes.byref(ctypes.c_uint64(rights)), 8)
    ctypes.memmove(ctypes.byref(buffer, 8), ctypes.byref(ctypes.c_int32(fd)), 4)
    return buffer


def describe(level):
    return {"bubblewrap": "bubblewrap (own file system view, process table, no network)",
            "landlock": "landlock (kernel file-access sandbox, no TCP)",
            "uid": "uid (a user id of its own)",
            "none": "none (student code runs as you, and can read what you can)"}[level]



# ----------------------------------------------------------------------------
# seccomp: no network socket, where there is no network namespace
# ----------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SOCKET_CALLS = {"x86_64": (41,), "aarch64": (198,)}  # socket(2); socketpair(2) makes only Unix sockets
_AF_UNIX = 1


def no_network_sockets():
    """Refuse socket(2) for every family but AF_UNIX (EACCES), in this process and what it
    execs: Landlock covers TCP only, so UDP (a DNS query out, say) and raw sockets are refused
    here. A classic BPF program installed with seccomp; requires no privilege."""
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        return
    ld_w_abs, jeq_k, ret_k = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, refuse, kill = 0x7FFF0000, 0x00050000 | 13, 0x80000000  # SECCOMP_RET_ALLOW, ERRNO(EACCES), KILL_PROCESS
    (socket_call,) = _SOCKET_CALLS[machine]
    program = [
        (ld_w_abs, 0, 0, 4),                      # A = seccomp_data.arch
        (jeq_k, 1, 0, _AUDIT_ARCH[machine]),      # the expected architecture: go on
        (ret_k, 0, 0, kill),                      # another ABI (a 32-bit call): kill
        (ld_w_abs, 0, 0, 0),                      # A = seccomp_data.nr
        (jeq_k, 0, 3, socket_call),               # socket(): check its family; else allow
        (ld_w_abs, 0, 0, 16),                     # A = the low half of args[0], the family
        (jeq_k, 1, 0, _AF_UNIX),                  # AF_UNIX: allow
        (ret_k, 0, 0, refuse),                    # any other family: EACCES
        (ret_k, 0, 0, allow),
    ]

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(program))(*[Filter(*instruction) for instruction in program])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) < 0:  # PR_SET_NO_NEW_PRIVS, which an unprivileged filter requires
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(22, 2, ctypes.byref(Program(len(program), filters)), 0, 0) < 0:  # PR_SET_SECCOMP, MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
