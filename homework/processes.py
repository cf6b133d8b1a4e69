"""The grader's view of processes: which are alive, which descend from which, killing a worker's
whole family (its detached grandchildren included, since the grader is their subreaper)."""

import ctypes
import os
import pathlib
import signal
import time


def become_subreaper():
    """Make this process the child subreaper (Linux): orphaned descendants are reparented to
    it instead of to init, so `kill_descendants` finds a worker's detached children too."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass  # not Linux: the process groups are still killed


def running_processes():
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
        table = running_processes()
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
        alive = [pid for pid in doomed if is_alive(pid)]
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        time.sleep(0.02)


def is_alive(pid):
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def started_at(pid):
    """When process `pid` started (clock ticks since boot), or None: a pid and its start time
    name one process, even after the pid is reused."""
    try:
        return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def descendants(root):
    """Every process under `root`, by the parent links of the process table."""
    children = {}
    for pid, (parent, _) in running_processes().items():
        children.setdefault(parent, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack += children.get(pid, [])
    return found


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
