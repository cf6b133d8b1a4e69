"""User ids for workers, when grading as root: an unused one reserved per sandbox, in a file that
names the grader's process, so that a dead grader's reservation is reclaimed and a live one's is
not; what a worker's user left in the shared temporary folders is removed when it is done."""

import os
import pathlib
import shutil
import tempfile
import time

from .isolation import IsolationError
from .processes import kill_descendants, running_processes, started_at

FIRST_UID = 61_000  # where the search for an unused user id starts
UID_RANGE = 5_000
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")  # where any user may write


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


def unused_uid():
    """A user id no account has and no process runs as, reserved (a file made with O_EXCL that
    names this process) so that two sandboxes at once never share one. A reservation whose
    process is gone is reclaimed: its user's processes killed, the file removed."""
    import pwd

    taken = {owner for _, owner in running_processes().values()}
    for uid in range(FIRST_UID, FIRST_UID + UID_RANGE):
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        path = reservation(uid)
        if os.path.exists(path) and _stale(path):
            kill_descendants(uid, only_uid=True)
            remove_files_of(uid)
            try:
                os.remove(path)
            except OSError:
                pass
        if uid in taken and not os.path.exists(path):
            continue
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as file:
            file.write(f"{os.getpid()} {started_at(os.getpid())}\n")
        return uid
    raise IsolationError(f"no unused user id to run student code as in {FIRST_UID}..{FIRST_UID + UID_RANGE - 1}")


def remove_files_of(uid):
    """Remove what user `uid` left at the top of the shared temporary folders (the only places
    there it can write): a worker's files must not reach the next run."""
    for top in SHARED_TMP:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.remove(entry.path)
            except OSError:
                pass


def drop_to(uid):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop
