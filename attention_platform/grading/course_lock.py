"""One grading run at a time writes a course's gradebook and its ``autograded/`` folder.

nbgrader's autograde is not safe against itself. Two runs on one course (two TAs in two
terminals, the formgrader's button beside a terminal, the batch grader beside either) both
create the same submission rows; the loser fails on the database, and nbgrader's failure
handler then deletes the ``autograded/`` files the winner had just written. So every grading
run holds an exclusive ``flock`` on ``<course>/.grading.lock`` while it writes:

* ``nbgrader autograde`` (the terminal and the formgrader) per submission, through the
  converter's ``pre_convert_hook`` / ``post_convert_hook`` (``nbgrader_config.py``);
* ``attention-course autograde-batch`` for its whole batch, and feedback on submit while it
  copies one attempt into the course (``course_grading_lock``).

The lock file is opened without following links and must be a regular file, so nobody can
point whoever grades (root, possibly) at another file. The kernel drops the lock when its
holder exits, whatever way it exits.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import threading
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".grading.lock"

_log = logging.getLogger(__name__)
# The lock an ``nbgrader autograde`` run on this thread holds between its two hooks. Per thread:
# the formgrader grades on a worker thread, and separate open files exclude each other even
# inside one process.
_autograde = threading.local()


def _open_lock(course: Path) -> int:
    path = Path(course) / LOCK_FILE
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file; remove it so grading can lock the course")
    return fd


@contextmanager
def course_grading_lock(course: Path):
    """Hold the course's grading lock for the ``with`` block (waits for any other holder)."""
    fd = _open_lock(course)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def before_autograde(assignment=None, student=None, notebooks=(), **_) -> None:
    """``Autograde.pre_convert_hook``: wait for the course's grading lock (nbgrader runs the hook
    in the course root), then clear what another run graded for this submission while we waited.

    nbgrader decided before this hook that the submission needs grading, so any graded notebook
    of it now in ``autograded/`` was written by a run that held the lock meanwhile; grading writes
    it again, and nbgrader writes into a read-only (444) file it finds there only as root.
    """
    course = Path.cwd()
    if getattr(_autograde, "fd", None) is None:
        try:
            fd = _open_lock(course)
        except OSError as exc:
            _log.warning("autograde without the course's grading lock: %s", exc)
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        _autograde.fd = fd
    for notebook in notebooks:
        graded = _autograded_copy(course, Path(notebook))
        if graded is not None and graded.is_file() and not graded.is_symlink():
            graded.unlink()


def after_autograde(**_) -> None:
    """``Autograde.post_convert_hook``: let the next grading run in."""
    release_autograde_lock()


def release_autograde_lock() -> None:
    """Drop the lock this thread's ``nbgrader autograde`` took, if it still holds it (nbgrader
    skips the post-convert hook when a submission fails; the formgrader calls this after every
    autograde so a failed one does not keep the course locked)."""
    fd = getattr(_autograde, "fd", None)
    if fd is not None:
        _autograde.fd = None
        os.close(fd)


def _autograded_copy(course: Path, notebook: Path) -> Path | None:
    """``autograded/<student>/<assignment>/<name>`` for ``submitted/<student>/<assignment>/<name>``
    (the course's directory structure); None for any other path."""
    try:
        parts = (notebook if notebook.is_absolute() else course / notebook).relative_to(course).parts
    except ValueError:
        return None
    if len(parts) != 4 or parts[0] != "submitted" or ".." in parts:
        return None
    return course.joinpath("autograded", *parts[1:])
