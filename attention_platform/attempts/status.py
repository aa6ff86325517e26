"""What a student may see of their attempts: one JSON file in their own feedback folder.

``feedback/<student>/feedback-on-submit-<assignment>.json`` is written by the grader only
(the folder is the grader's, the student's group reads it: jupyter_config/jupyterhub_config.py) and
read by the student's own server (their Assignments tab, their submit). It holds the
assignment's policy, the time the next graded attempt is possible, and per attempt what the
policy lets the student see: its state, and once graded the points and each hidden check's
title and pass/fail; with ``full`` feedback also the names of its feedback pages, which lie
beside it under nbgrader's own names (``<hash>.html``, see nbgrader's fetch_feedback).
Never a check's message in ``checks`` mode, never a check's inputs or code.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat

PREFIX = "feedback-on-submit-"
SUFFIX = ".json"
MAX_BYTES = 4 << 20  # a status of a few hundred attempts is < 1 MB
VERSION = 1
STATES = ("queued", "grading", "graded", "refused", "not graded", "error", "failed")
COUNTING = ("queued", "grading", "graded", "failed")  # the states that use up one of a student's graded attempts


def filename(assignment: str) -> str:
    return f"{PREFIX}{assignment}{SUFFIX}"


def write(student_dir_fd: int, assignment: str, status: dict, mode: int = 0o640) -> None:
    """Replace the status file in the folder open at ``student_dir_fd`` in one rename: a reader
    sees the old or the new file, never half of one."""
    replace_json(student_dir_fd, filename(assignment), {"version": VERSION, **status}, mode)


def replace_json(student_dir_fd: int, name: str, content: dict, mode: int = 0o640) -> None:
    """Replace the file ``name`` in the folder open at ``student_dir_fd`` with ``content`` in one rename."""
    # not indented: indented JSON is laid out by Python itself, several times slower than the C encoder,
    # and a status is written on the way to every result
    data = json.dumps(content, sort_keys=True).encode()
    tmp = f".{name}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=student_dir_fd)
    try:
        os.fchmod(fd, mode)  # whatever the umask: the student's group reads it (the folder is setgid)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.rename(tmp, name, src_dir_fd=student_dir_fd, dst_dir_fd=student_dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=student_dir_fd)
        except OSError:
            pass
        raise


def read(folder: str, assignment: str) -> dict | None:
    """The status in ``folder`` (the student's view of their feedback folder), or None if there is
    none yet. Raises ValueError if it cannot be read as a status."""
    status = read_json(folder, filename(assignment), MAX_BYTES, "the feedback-on-submit status")
    if status is None:
        return None
    if not isinstance(status, dict) or status.get("version") != VERSION or not isinstance(status.get("attempts"), list):
        raise ValueError("the feedback-on-submit status has an unknown format")
    return status


def read_json(folder: str, name: str, max_bytes: int, what: str):
    """The JSON in the file ``name`` of ``folder``, read no further than ``max_bytes`` and never
    through a link; None if there is none yet. ValueError (starting with ``what``) otherwise."""
    path = os.path.join(folder, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:  # no feedback folder yet
            return None
        raise ValueError(f"{what} cannot be opened ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{what} is not a regular file")
        data = os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ValueError(f"{what} is too large")
    try:
        return json.loads(data)
    except ValueError:
        raise ValueError(f"{what} is not JSON") from None
