"""The student's deadlines, as their own server reads them for their Assignments tab (runs as the student).

The grader account writes ``deadline-<assignment>.json`` into the student's feedback folder
(:mod:`attention_platform.attempts.deadline_file`): the due date, the student's own extension, the late
policy and their late days. This side lists those files, reads each one bounded and never through a
link, and hands them to the Lab; what a submission is worth is decided by the grader on the server's
clock, never here.
"""

from __future__ import annotations

import os
import re

from attention_platform.attempts import deadline_file

ASSIGNMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


def deadlines(folder: str) -> dict:
    """``{assignment: deadline file}`` of every deadline file in ``folder``; an unreadable one as ``{"error": why}``."""
    found = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in sorted(names):
        if not (name.startswith(deadline_file.PREFIX) and name.endswith(deadline_file.SUFFIX)):
            continue
        assignment = name[len(deadline_file.PREFIX):-len(deadline_file.SUFFIX)]
        if not ASSIGNMENT.match(assignment):
            continue
        try:
            content = deadline_file.read(folder, assignment)
        except ValueError as exc:
            content = {"error": str(exc)}
        if content is not None:
            found[assignment] = content
    return found
