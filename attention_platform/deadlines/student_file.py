"""The deadline file each student reads in their Lab: written by the grader account, one per assignment.

Written on release, on every extension or late-policy change, and by the grader after each graded
attempt (the late-day balance moves). The file's format and its reading are
attention_platform/attempts/deadline_file.py's; the student's feedback folder is the one the hub
made for them (``<exchange>/<course>/feedback/<student>/``, see exchange_layout.py), opened without
following a link, so a student cannot point the grader's write anywhere else.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
from pathlib import Path

from attention_platform.attempts import deadline_file

from .due_dates import read_students, read_submitted
from .standing import Deadlines

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
log = logging.getLogger("deadlines")


def feedback_root(exchange_root=None, course_id: str | None = None) -> Path:
    from attention_platform.settings import settings

    found = settings()
    return Path(exchange_root or found.nbgrader_exchange_root) / (course_id or found.nbgrader_course_id) / "feedback"


def content(deadlines: Deadlines, assignment: str, student: str, now: dt.datetime,
            submitted_at: dt.datetime | None) -> dict:
    """The file's content: the standing at ``now``, and that of the submission that counts."""
    return {"now": deadlines.standing(assignment, student, now).to_json(),
            "submission": None if submitted_at is None
            else deadlines.standing(assignment, student, now, submitted_at).to_json()}


def submitted_times(db_url: str, assignment: str) -> dict[str, dt.datetime]:
    """``{student: time}`` of the assignment's gradebook submissions."""
    return {student: when for (_, student), when in read_submitted(db_url, [assignment]).items()}


def _write(folder: Path, student: str, assignment: str, data: dict) -> bool:
    if not student or "/" in student or student.startswith("."):  # a gradebook id that is no folder's name
        return False
    try:
        fd = os.open(folder / student, OPEN_DIR)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            log.warning("%s: feedback folder cannot be opened (%s)", student, exc.strerror)
        return False
    try:
        deadline_file.write(fd, assignment, data)
    finally:
        os.close(fd)
    return True


def publish(course_dir, assignment: str, student: str, now: dt.datetime, *, db_url: str | None = None,
            exchange_root=None, course_id: str | None = None, deadlines: Deadlines | None = None) -> bool:
    """Write ``student``'s deadline file of ``assignment``; False when they have no feedback folder yet."""
    deadlines = deadlines or Deadlines(course_dir, db_url=db_url)
    submitted = submitted_times(deadlines.db_url, assignment).get(student)
    return _write(feedback_root(exchange_root, course_id), student, assignment,
                  content(deadlines, assignment, student, now, submitted))


def students(db_url: str, feedback: Path) -> list[str]:
    """The gradebook's students and those the hub made exchange folders for. The grader account may list
    ``inbound/`` (its group's) but not ``feedback/`` (root's 0711): a student's two folders are made together."""
    found = set(read_students(db_url))
    try:
        found.update(name for name in os.listdir(feedback.parent / "inbound") if not name.startswith("."))
    except OSError:
        pass
    return sorted(found)


def publish_all(course_dir, assignment: str, now: dt.datetime, *, db_url: str | None = None,
                exchange_root=None, course_id: str | None = None, deadlines: Deadlines | None = None) -> int:
    """Write the deadline file of ``assignment`` for every student (:func:`students`) who has a feedback
    folder, each opened by name; how many were."""
    deadlines = deadlines or Deadlines(course_dir, db_url=db_url)
    submitted = submitted_times(deadlines.db_url, assignment)
    folder = feedback_root(exchange_root, course_id)
    return sum(_write(folder, student, assignment, content(deadlines, assignment, student, now, submitted.get(student)))
               for student in students(deadlines.db_url, folder))
