"""User ids for workers, when grading as root: a fresh one per submission, and everything it owns
removed when its workers are done.

- `unused_uid` draws a user id at random from a large range no account, group, container range
  (/etc/subuid, /etc/subgid) or process uses, and that owns nothing the grader can find (no
  process, no SysV IPC object, no file in the shared temporary folders): a previous grading's
  user id, whose leftovers might remain, is not taken again. It is reserved in a file (made with
  O_EXCL) that names the grader's process, so two gradings at once never share one, and a dead
  grader's reservation is reclaimed (its user's leftovers removed) and a live one's is not.
- `clean_up(uid)` removes what the user owns where any user may leave something: its processes,
  its SysV shared memory segments, semaphore sets and message queues (found in /proc/sysvipc by
  owner or creator: an owner can hand an object to another user id, never its creator), and its
  files, folders, FIFOs and Unix sockets anywhere under the shared temporary folders (POSIX shared
  memory in /dev/shm and message queues in /dev/mqueue among them), in whatever folder there it
  could write. `release(uid)` does that and frees the reservation.
"""

import ctypes
import os
import pathlib
import random
import shutil
import stat
import tempfile
import time

from .isolation import IsolationError
from .processes import is_alive, kill_descendants, running_processes, started_at

# 0x70000000 ... 0x7FFDFFFF: above the ranges distributions and systemd hand out (accounts,
# dynamic users, container ranges end at 0x6FFFFFFF) and below 2**31 and systemd's "foreign" range
# (0x7FFE0000): 268 million ids, so a drawn id has all but never been used before.
FIRST_UID = 0x7000_0000
UID_RANGE = 0x0FFE_0000
DRAWS = 256  # random draws before giving up (a small range, as tests set, is tried whole)
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue", "/var/crash")  # where any user may write
MAX_DEPTH = 32  # how deep the search for a user's files goes in the shared folders
IPC_RMID = 0


def reservation(uid):
    return os.path.join(tempfile.gettempdir(), f".minitensor-worker-uid-{uid}")


def _stale(path):
    """Whether a reservation's grader is gone. A file that names no process (an older grader's,
    or one cut short) is stale only after a day: a live grader of another version may hold it."""
    try:
        pid, started = (int(n) for n in pathlib.Path(path).read_text().split())
    except (OSError, ValueError):
        try:
            return time.time() - os.lstat(path).st_mtime > 86_400
        except OSError:
            return False
    return started_at(pid) != started


def _subordinate_ranges():
    """[(first, count)] of the user and group ids /etc/subuid and /etc/subgid give to containers."""
    ranges = []
    for name in ("/etc/subuid", "/etc/subgid"):
        try:
            lines = pathlib.Path(name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                ranges.append((int(parts[1]), int(parts[2])))
    return ranges


def _candidates():
    if UID_RANGE <= 4 * DRAWS:
        return random.sample(range(FIRST_UID, FIRST_UID + UID_RANGE), UID_RANGE)
    draw = random.SystemRandom()
    return [FIRST_UID + draw.randrange(UID_RANGE) for _ in range(DRAWS)]


def reclaim_stale():
    """Reclaim every reservation whose grader is gone: its user's leftovers removed, the file
    too. Returns the user ids reclaimed."""
    prefix = os.path.basename(reservation(0))[:-1]
    reclaimed = []
    try:
        names = os.listdir(tempfile.gettempdir())
    except OSError:
        return reclaimed
    for name in names:
        if name.startswith(prefix) and name[len(prefix):].isdigit() and _stale(reservation(int(name[len(prefix):]))):
            release(int(name[len(prefix):]))
            reclaimed.append(int(name[len(prefix):]))
    return reclaimed


def unused_uid():
    """A fresh user id, reserved for this process (see the module's docstring). Stale
    reservations are reclaimed first (`reclaim_stale`), and their ids passed over this time:
    they were a grading's."""
    import grp
    import pwd

    passed_over = set(reclaim_stale())
    taken = {owner for _, owner in running_processes().values()}
    subordinate = _subordinate_ranges()
    ipc_owners = {owner for _, _, owners in sysv_ipc_objects() for owner in owners}
    for uid in _candidates():
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        try:
            grp.getgrgid(uid)  # the worker runs with the group id of the same number
            continue
        except KeyError:
            pass
        if uid in passed_over or any(first <= uid < first + count for first, count in subordinate):
            continue
        path = reservation(uid)
        if os.path.lexists(path):
            continue
        if uid in taken or uid in ipc_owners or files_of(uid, first_only=True):
            clean_up(uid)  # a grading's leftovers, whatever left them: removed, and the id passed over
            continue
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as file:
            file.write(f"{os.getpid()} {started_at(os.getpid())}\n")
        return uid
    raise IsolationError(f"no unused user id to run student code as in {FIRST_UID}..{FIRST_UID + UID_RANGE - 1}")


def release(uid):
    """Remove everything of `uid` (`clean_up`) and its reservation."""
    clean_up(uid)
    try:
        os.remove(reservation(uid))
    except OSError:
        pass


def clean_up(uid, keep=()):
    """Kill every process of `uid`, then remove its SysV IPC objects and its files in the shared
    temporary folders (but those under `keep`: a sandbox that is still in use). The processes go
    first: none of them can make another object meanwhile."""
    kill_descendants(uid, only_uid=True)
    remove_ipc_of(uid)
    remove_files_of(uid, keep)


def leftovers_of(uid, keep=()):
    """What of `uid` the grader can find: {"processes": [pid], "ipc": [(kind, id)], "files": [path]}
    (files under `keep` left out; a process that has ended, and waits to be reaped, is not one)."""
    running = running_processes().items()
    return {"processes": sorted(pid for pid, (_, owner) in running if owner == uid and is_alive(pid)),
            "ipc": sorted((kind, number) for kind, number, owners in sysv_ipc_objects() if uid in owners),
            "files": files_of(uid, keep=keep)}


# ----------------------------------------------------------------------------
# SysV IPC: shared memory, semaphore sets, message queues
# ----------------------------------------------------------------------------

_ID_AND_OWNERS = {  # the columns of /proc/sysvipc/KIND: the object's id, its owner's and creator's uid
    "shm": ("shmid", "uid", "cuid"), "sem": ("semid", "uid", "cuid"), "msg": ("msqid", "uid", "cuid")}


def sysv_ipc_objects():
    """[(kind, id, {owner uid, creator uid})] of the SysV IPC objects of this process's IPC
    namespace ("shm", "sem", "msg")."""
    found = []
    for kind, (ident, owner, creator) in _ID_AND_OWNERS.items():
        try:
            lines = pathlib.Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        columns = lines[0].split()
        try:
            at = [columns.index(name) for name in (ident, owner, creator)]
        except ValueError:
            continue
        for line in lines[1:]:
            values = line.split()
            try:
                number, *owners = (int(values[i]) for i in at)
            except (IndexError, ValueError):
                continue
            found.append((kind, number, set(owners)))
    return found


def remove_ipc_of(uid):
    """IPC_RMID every SysV object `uid` owns or created (a segment still attached goes when its
    last process detaches: its processes are killed first). Returns how many were removed."""
    libc = ctypes.CDLL(None, use_errno=True)
    removed = 0
    for kind, number, owners in sysv_ipc_objects():
        if uid not in owners:
            continue
        if kind == "shm":
            result = libc.shmctl(ctypes.c_int(number), IPC_RMID, None)
        elif kind == "sem":
            result = libc.semctl(ctypes.c_int(number), 0, IPC_RMID)
        else:
            result = libc.msgctl(ctypes.c_int(number), IPC_RMID, None)
        removed += result == 0
    return removed


def remove_segments_made_by(pids):
    """IPC_RMID the SysV shared memory segments that one of `pids` created (their cpid): what a
    worker running as the grader's own user surely made. (Semaphore sets and message queues do
    not name their creator's process; the grader's user may own others: they are left.)"""
    try:
        lines = pathlib.Path("/proc/sysvipc/shm").read_text().splitlines()
        columns = lines[0].split()
        ident, creator = columns.index("shmid"), columns.index("cpid")
    except (OSError, IndexError, ValueError):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    removed = 0
    for line in lines[1:]:
        values = line.split()
        try:
            if int(values[creator]) in pids:
                removed += libc.shmctl(ctypes.c_int(int(values[ident])), IPC_RMID, None) == 0
        except (IndexError, ValueError):
            continue
    return removed


# ----------------------------------------------------------------------------
# Files in the shared folders
# ----------------------------------------------------------------------------


def _may(info, uid, bits):
    """Whether user `uid` (with the group of the same number, no other) has `bits` (of r=4,
    w=2, x=1) on a file whose lstat is `info`."""
    if info.st_uid == uid:
        return (info.st_mode >> 6) & bits == bits
    if info.st_gid == uid:
        return (info.st_mode >> 3) & bits == bits
    return info.st_mode & bits == bits


def files_of(uid, first_only=False, keep=()):
    """The paths under the shared temporary folders owned by `uid`, in the folders it could
    reach and write in (a folder of its own is one path: what is inside goes with it), but
    those under `keep`."""
    keep = {os.path.realpath(path) for path in keep}
    found = []
    stack = [(top, 0) for top in SHARED_TMP]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if keep and os.path.realpath(entry.path) in keep:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_uid == uid:
                found.append(entry.path)
                if first_only:
                    return found
            elif stat.S_ISDIR(info.st_mode) and depth < MAX_DEPTH and _may(info, uid, 1):
                stack.append((entry.path, depth + 1))  # it could pass through: it may have left something below
    return found


def remove_files_of(uid, keep=()):
    """Remove what user `uid` left in the shared temporary folders (/tmp, /var/tmp, /dev/shm,
    /dev/mqueue...: files, folders, links, FIFOs, Unix sockets), in whatever folder there it could
    reach: a worker's files must not reach the next run."""
    for path in files_of(uid, keep=keep):
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
        except OSError:
            pass


def drop_to(uid):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop
