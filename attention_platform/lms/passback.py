"""Which scores go to the LMS, and sending them: one pass of the grader's passback worker.

A student's score for an assignment is sent once it counts for the grade:

* the TA released their feedback (``Outbox.note_release``, by the formgrader's release), or
* the assignment's feedback-on-submit policy counts an attempt (``last`` or ``best``) and one of
  theirs counts (the ledger's ``counted``): the score is that attempt's, as the grader installed it.

The score is the gradebook's (the counting attempt's checks and, once a TA has graded them, the
written answers), out of the assignment's points; while written answers are still to be graded
it is sent as ``PendingManual``. A pass queues what changed (the outbox ignores a score already
sent) and posts what is due; an LMS that is down costs the worker a retry later, never grading.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable, Iterable

from attention_platform.lms.ags import GradeService, Score, ServiceRefused
from attention_platform.lms.bounded_http import LmsUnavailable
from attention_platform.lms.outbox import Outbox
from attention_platform.lms.service_tokens import TokenRefused


@dataclass(frozen=True)
class GradebookScore:
    assignment: str
    student: str
    score: float
    maximum: float
    pending_manual: bool


def gradebook_scores(db_url: str) -> list[GradebookScore]:
    """Every submission's score in the course's nbgrader gradebook."""
    from nbgrader.api import Gradebook

    found = []
    with Gradebook(db_url) as gradebook:
        for assignment in gradebook.assignments:
            for submission in gradebook.assignment_submissions(assignment.name):
                found.append(GradebookScore(assignment.name, submission.student_id, float(submission.score),
                                            float(assignment.max_score), bool(submission.needs_manual_grade)))
    return found


def counted_on_submit(db_url: str, counts_on_submit: Callable[[str], bool]) -> set[tuple[str, str]]:
    """(assignment, student) of every attempt that counts under a ``last`` or ``best`` policy."""
    from attention_platform.attempts.ledger import Ledger

    ledger = Ledger(db_url)
    try:
        return {(row["assignment"], row["student"]) for row in ledger.attempts()
                if row["counted"] and counts_on_submit(row["assignment"])}
    finally:
        ledger.close()


def queue_scores(outbox: Outbox, scores: Iterable[GradebookScore], counting: set[tuple[str, str]]) -> int:
    """Queue each score that counts (released or counted on submit); how many were new."""
    eligible = counting | outbox.released()
    queued = 0
    for entry in scores:
        if (entry.assignment, entry.student) not in eligible:
            continue
        user_id = outbox.lms_id(entry.student) or entry.student
        queued += outbox.queue(entry.assignment, entry.student, user_id, entry.score, entry.maximum,
                               entry.pending_manual)
    return queued


def deliver(outbox: Outbox, service: GradeService, line_items_url: str,
            now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)) -> dict[str, int]:
    """Post every due score; what became of them ({"sent": n, "retrying": n, "refused": n})."""
    outcome = {"sent": 0, "retrying": 0, "refused": 0}
    due = outbox.due()
    for index, row in enumerate(due):
        try:
            line_item = outbox.line_item(row["assignment"])
            if line_item is None:
                line_item = service.line_item(line_items_url, row["assignment"], row["maximum"])
                outbox.keep_line_item(row["assignment"], line_item)
            answer = service.post_score(line_item, Score(row["user_id"], row["score"], row["maximum"],
                                                         bool(row["pending_manual"]), now()))
        except LmsUnavailable as why:
            # one unanswered request is enough: the rest wait too, rather than each waiting for a timeout
            for waiting in due[index:]:
                outbox.failed(waiting, f"not sent, will retry: {why}")
            outcome["retrying"] += len(due) - index
            break
        except (ServiceRefused, TokenRefused, ValueError) as why:
            outbox.refused(row, f"refused: {why}")
            outcome["refused"] += 1
        else:
            outbox.delivered(row, f"{answer.status} {answer.text(200)}".strip())
            outcome["sent"] += 1
    return outcome
