"""Each submission against its student's deadline, for the formgrader's submissions list (TAs and instructors).

``formgrader/api/attention/deadlines/<assignment>``: per student of the gradebook, the standing of their
submission at the time the exchange received it (attention_platform/deadlines/standing.py): on time,
late by how much (with the penalty, or the late days it uses), after the cut-off, their extension, the
late days they have used in the course; a phrase for the list and a number it sorts by (no submission
first, then on time, then later and later, what does not count last).
"""

from __future__ import annotations

import datetime as dt
import json
import math

from tornado import web

from attention_platform.deadlines import student_file
from attention_platform.deadlines.standing import Deadlines, DeadlinesError, Standing

DOES_NOT_COUNT = 10 ** 9  # sorts after any lateness in seconds


def late_text(late_by: dt.timedelta) -> str:
    minutes = math.ceil(late_by.total_seconds() / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    return " ".join([f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes))


def cell(standing: Standing | None) -> dict:
    """What the submissions list shows of one student's submission, and its sort order."""
    if standing is None:
        return {"text": "no submission", "order": -2, "state": "none"}
    extension = standing.extension
    with_extension = f"; extension to {extension.due:%Y-%m-%d %H:%M} UTC" if extension else ""
    policy = standing.policy
    days = policy is not None and policy.kind == "late_days"
    used = f"; late days used in the course: {standing.late_days_used}" if days else ""
    if standing.state == "no deadline":
        return {"text": "no deadline", "order": -1, "state": standing.state}
    late = standing.late_by.total_seconds()
    if standing.state == "open":
        text = "on time"
    elif standing.state == "closed":
        text = f"late by {late_text(standing.late_by)}: after the cut-off, does not count"
        late += DOES_NOT_COUNT
    elif days:
        spent = math.ceil(standing.late_by / dt.timedelta(days=1))
        text = f"late by {late_text(standing.late_by)}: {spent} late day{'s' * (spent != 1)}"
    elif policy is not None:
        text = f"late by {late_text(standing.late_by)}: {standing.penalty_percent:g}% taken"
    else:
        text = f"late by {late_text(standing.late_by)}"
    return {"text": text + with_extension + used, "order": late, "state": standing.state,
            "late_by_seconds": int(standing.late_by.total_seconds()), "extension": bool(extension),
            "penalty_percent": standing.penalty_percent, "late_days_used": standing.late_days_used}


def cells(course_root: str, db_url: str, assignment: str, students: list[str], now: dt.datetime) -> dict:
    """``{student: cell}`` of every student; ``{"error": why}`` when the course's deadlines cannot be read."""
    try:
        deadlines = Deadlines(course_root, db_url=db_url)
    except DeadlinesError as exc:
        return {"error": str(exc)}
    submitted = student_file.submitted_times(db_url, assignment)
    return {student: cell(deadlines.standing(assignment, student, now, submitted[student])
                          if student in submitted else None) for student in students}


def _handler():
    from nbgrader.server_extensions.formgrader.base import BaseApiHandler

    class SubmissionDeadlinesHandler(BaseApiHandler):
        @web.authenticated
        def get(self, assignment):
            students = sorted(s.id for s in self.gradebook.students)
            self.write(json.dumps(cells(self.coursedir.root, self.coursedir.db_url, assignment, students,
                                        dt.datetime.now(dt.timezone.utc))))

    return SubmissionDeadlinesHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    return [(join(base_url, rf"formgrader/api/attention/deadlines/(?P<assignment>{_ID})/?"), _handler())]
