"""A submission is copied, never followed: what reaches the grader is plain files and folders.

The grader reads a submission as root on Gradescope, so a file in it is not trusted as a file:
a symbolic link could point into the autograder's source or at /etc/shadow, a hard link could
share an inode with a file outside, a FIFO could block the copy forever, a link to its own folder
could loop. `copy_submission` walks the submission without following anything (every entry is
examined with lstat and opened with O_NOFOLLOW), refuses what is not a regular file or a folder
with a message that names the path, and caps the number of files, their total size and the
depth, before the copy is used for anything.
"""

import os
import pathlib
import stat

from .tasks import HomeworkError

MAX_FILES = 5_000
MAX_MB = 200
MAX_DEPTH = 24
SKIPPED = ("__pycache__", ".git", ".hypothesis", ".pytest_cache", ".ipynb_checkpoints")
SKIPPED_SUFFIXES = (".pyc", ".so", ".pth")  # compiled or path-changing files: the copy's source is what is graded


class SubmissionRefused(HomeworkError):
    """The submission holds something the grader does not copy (a link, a device) or is too large."""


def copy_submission(source, target, folders):
    """Copy the `folders` of the submission at `source` into `target` (made here), refusing links,
    devices, FIFOs and sockets; return the number of files copied."""
    source = pathlib.Path(source)
    budget = {"files": 0, "bytes": 0}
    os.makedirs(target, mode=0o755)
    for name in folders:
        entry = source / name
        try:
            info = os.lstat(entry)
        except FileNotFoundError:
            continue
        _refuse_unless_plain(info, name)
        if not stat.S_ISDIR(info.st_mode):
            raise SubmissionRefused(f"the submission's {name} is a file, not a folder")
        _copy_folder(entry, pathlib.Path(target) / name, name, 1, budget)
    return budget["files"]


def _refuse_unless_plain(info, shown):
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        raise SubmissionRefused(f"the submission holds a symbolic link, {shown}: links are not followed or copied; "
                                f"hand in the file itself")
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
                stat.S_IFBLK: "a device"}.get(stat.S_IFMT(mode), "a special file")
        raise SubmissionRefused(f"the submission holds {kind}, {shown}: only files and folders are graded")
    if stat.S_ISREG(mode) and info.st_nlink > 1:
        raise SubmissionRefused(f"the submission holds a hard link, {shown} ({info.st_nlink} names for one file): "
                                f"hand in a plain copy of the file")


def _copy_folder(source, target, shown, depth, budget):
    if depth > MAX_DEPTH:
        raise SubmissionRefused(f"the submission's folders nest deeper than {MAX_DEPTH} levels at {shown}")
    os.mkdir(target, 0o755)
    with os.scandir(source) as entries:
        listed = sorted(entries, key=lambda e: e.name)
    for entry in listed:
        name = f"{shown}/{entry.name}"
        if entry.name in SKIPPED or entry.name.endswith(SKIPPED_SUFFIXES):
            continue
        info = entry.stat(follow_symlinks=False)
        _refuse_unless_plain(info, name)
        if stat.S_ISDIR(info.st_mode):
            _copy_folder(entry.path, target / entry.name, name, depth + 1, budget)
            continue
        budget["files"] += 1
        budget["bytes"] += info.st_size
        if budget["files"] > MAX_FILES:
            raise SubmissionRefused(f"the submission holds more than {MAX_FILES} files (at {name})")
        if budget["bytes"] > MAX_MB * 2**20:
            raise SubmissionRefused(f"the submission is larger than {MAX_MB} MB (at {name})")
        _copy_file(entry.path, target / entry.name, name, info)


def _copy_file(source, target, shown, expected):
    """Copy one file, opened without following a link; it must still be the file lstat saw (a
    link swapped in between the two is refused, not followed)."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise SubmissionRefused(f"the submission's {shown} could not be read ({error.strerror})") from None
    try:
        info = os.fstat(fd)
        if (info.st_ino, info.st_dev) != (expected.st_ino, expected.st_dev) or not stat.S_ISREG(info.st_mode):
            raise SubmissionRefused(f"the submission's {shown} changed while it was copied")
        left = MAX_MB * 2**20 + 1
        with open(target, "wb") as out:
            while chunk := os.read(fd, 1 << 20):
                left -= len(chunk)
                if left < 0:
                    raise SubmissionRefused(f"the submission is larger than {MAX_MB} MB (at {shown})")
                out.write(chunk)
    finally:
        os.close(fd)
    os.chmod(target, 0o644)


def find_plain_copy(path, expected_files):
    """The folder of `path` (itself, or the one folder inside it) that holds every expected file,
    looked at without following links; None if none does."""
    path = pathlib.Path(path)
    candidates = [path]
    try:
        with os.scandir(path) as entries:
            candidates += sorted(pathlib.Path(e.path) for e in entries
                                 if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return None
    for candidate in candidates:
        if all(_is_plain_file(candidate / name) for name in expected_files):
            return candidate
    return None


def _is_plain_file(path):
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
