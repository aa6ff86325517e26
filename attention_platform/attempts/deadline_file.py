"""What a student may see of their deadline: one JSON file in their own feedback folder.

``feedback/<student>/deadline-<assignment>.json`` is written by the grader account only
(attention_platform/deadlines/student_file.py: on release, on every extension or late-policy change,
after each graded attempt) and read by the student's own server: their Assignments tab, and their
submit, which says "closed" before handing anything in (advisory: the grader judges again at the
exchange's time). It holds the student's standing (attention_platform/deadlines/standing.py,
``Standing.to_json``) as of the time it was written, under ``now``, and the standing of their
submission that counts, if any, under ``submission``; never another student's, never the reason
an extension was given.
"""

from __future__ import annotations

import datetime as dt

from .status import read_json, replace_json

PREFIX = "deadline-"
SUFFIX = ".json"
MAX_BYTES = 64 * 1024  # two standings of a few hundred bytes each
VERSION = 1


def filename(assignment: str) -> str:
    """The file's name in the student's folder; ValueError for an assignment id that is no plain name."""
    if not assignment or "/" in assignment or "\0" in assignment or assignment.startswith("."):
        raise ValueError(f"{assignment!r} is not an assignment id")
    return f"{PREFIX}{assignment}{SUFFIX}"


def write(student_dir_fd: int, assignment: str, content: dict) -> None:
    """Replace the deadline file in the folder open at ``student_dir_fd`` in one rename."""
    replace_json(student_dir_fd, filename(assignment), {"version": VERSION, **content})


def read(folder: str, assignment: str) -> dict | None:
    """The deadline file in ``folder`` (the student's view of their feedback folder), or None if there
    is none. Raises ValueError if it cannot be read as one."""
    found = read_json(folder, filename(assignment), MAX_BYTES, "the deadline file")
    if found is None:
        return None
    if not isinstance(found, dict) or found.get("version") != VERSION or not isinstance(found.get("now"), dict):
        raise ValueError("the deadline file has an unknown format")
    return found


def closed_since(content: dict, at: dt.datetime) -> dt.datetime | None:
    """When the assignment closed to this student, if it is closed at ``at``; None while it is open.

    The file's ``cutoff`` is the last moment anything is accepted, whatever the policy (the
    deadline under ``closed``; the deadline plus the cut-off under ``penalty``; the deadline plus
    the late days left under ``late_days``)."""
    now = content.get("now") or {}
    cutoff = now.get("cutoff")
    if not isinstance(cutoff, str):
        return None
    try:
        when = dt.datetime.fromisoformat(cutoff.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when if at > when else None
