"""The files the formgrader saves in the course directory: read bounded and without following links,
written whole.

The feedback-on-submit policies, the late policies and the extensions live beside the course's
``nbgrader_config.py`` in the course directory, which the grader account owns (mode 0710): the
formgrader writes them (mode 0640), the grader and the formgrader read them; a student can write
neither them nor their folder, and no root process reads them. A file edited by hand into something
unusable is refused with a message that names it, never half-used.

It imports nothing of the platform: the feedback-on-submit policies (policy_store.py) and deadlines/ share it.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path


class CourseFileError(ValueError):
    """A deadlines file of the course cannot be used; the message names it and what to do."""


def read_bytes(where: Path, max_bytes: int) -> bytes | None:
    """The file's bytes (None if there is none), at most ``max_bytes``; CourseFileError otherwise."""
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CourseFileError(f"{where} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise CourseFileError(f"{where} is not a regular file; remove it")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CourseFileError(f"{where} is larger than {max_bytes // 1024} kB")
    return data


def read_object(where: Path, max_bytes: int, holds: str = "a JSON object") -> dict:
    """The JSON object in the file (``holds`` says what it is, for the error); {} when there is no file."""
    data = read_bytes(where, max_bytes)
    if not data:
        return {}
    try:
        found = json.loads(data)
    except ValueError as exc:
        raise CourseFileError(f"{where} is not JSON ({exc}); save it again in the formgrader") from None
    if not isinstance(found, dict):
        raise CourseFileError(f"{where} must hold {holds}, not a {type(found).__name__}")
    return found


@dataclass(frozen=True)
class PerAssignmentFile:
    """A course file of one JSON entry per assignment id (a policy), kept whole: a store's reads raise
    its own ``error`` with the reader's message and ``advice``."""
    filename: str
    max_bytes: int
    holds: str  # what the file holds, for the error
    error: type[ValueError] = CourseFileError
    advice: str = ""

    def path(self, course_dir) -> Path:
        return Path(course_dir) / self.filename

    def read(self, course_dir) -> dict:
        """``{assignment: entry}`` as saved; {} when nothing is."""
        try:
            return read_object(self.path(course_dir), self.max_bytes, holds=self.holds)
        except CourseFileError as exc:
            raise self.error(f"{exc}{self.advice}") from None

    def put(self, course_dir, assignment: str, entry: dict) -> None:
        """``entry`` as ``assignment``'s, every other kept."""
        saved = self.read(course_dir)
        saved[assignment] = entry
        write_object(self.path(course_dir), saved)

    def forget(self, course_dir, assignment: str) -> None:
        """No entry for ``assignment`` (nothing written when it had none)."""
        saved = self.read(course_dir)
        if saved.pop(assignment, None) is not None:
            write_object(self.path(course_dir), saved)


def write_object(where: Path, data: dict) -> None:
    """The JSON object, whole or not at all (``write_bytes``, mode 0640)."""
    write_bytes(where, json.dumps(data, indent=1, sort_keys=True).encode(), 0o640)


def write_bytes(where: Path, data: bytes, mode: int) -> None:
    """Whole or not at all: a temporary file in the same folder (``mode``), renamed over the old one."""
    fd, temporary = tempfile.mkstemp(dir=where.parent, prefix=f".{where.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, where)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def append_line(where: Path, line: dict) -> None:
    """One JSON line at the end of an append-only log (created 0640), never through a link."""
    fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise CourseFileError(f"{where} is not a regular file; remove it")
        fh.write(json.dumps(line, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
