"""Where one student stands on one assignment at one moment: on time, late (with what it costs), or closed.

The deadline is the gradebook's due date, or the student's extension when it is later; what
happens after it is the assignment's late policy (late_policy.py; none: nbgrader's behaviour, every
submission accepted and the course's LateSubmissionPlugin deciding the penalty). Late days are the
course's: the days a student's gradebook submissions of the other late-day assignments were late,
each day begun counting, are spent before this one's.

Every function takes the moment it judges (``now``, or the time a submission was received by the
exchange): the grader passes the exchange's trusted time, tests a fake clock. Nothing here reads a
clock or a time a student wrote.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from .due_dates import aware, default_db_url, due_dates, read_due_dates, read_submitted
from .extensions import Extension, ExtensionError, ExtensionStore
from .late_policy import LatePolicy, LatePolicyError, policies

STATES = ("no deadline", "open", "late", "closed")
DAY = dt.timedelta(days=1)
# A deadlines file of the course cannot be used (the message names it and what to do).
DeadlinesError = (LatePolicyError, ExtensionError)


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else aware(value).isoformat(timespec="seconds").replace("+00:00", "Z")


def days_begun(late_by: dt.timedelta) -> int:
    return max(0, math.ceil(late_by / DAY))


@dataclass(frozen=True)
class Standing:
    assignment: str
    student: str
    at: dt.datetime  # the moment judged
    due: dt.datetime | None  # the gradebook's
    extension: Extension | None
    effective_due: dt.datetime | None
    cutoff: dt.datetime | None  # the last moment anything is accepted; None: no limit
    policy: LatePolicy | None
    state: str
    late_by: dt.timedelta = dt.timedelta(0)
    penalty_percent: float = 0.0
    late_days_used: int = 0  # course-wide, with this assignment's at ``at``
    late_days_left: int | None = None  # None: the policy is not late days

    @property
    def counts(self) -> bool:
        """Whether a submission received at ``at`` counts for the grade."""
        return self.state != "closed"

    def describe(self) -> str:
        """What a submission at ``at`` means, in one sentence for the student (times in UTC)."""
        if self.state == "no deadline":
            return "This assignment has no deadline."
        if self.state == "open":
            return f"Due {_clock(self.effective_due)}" + (" (your extension)." if self.extension else ".")
        late = f"{_duration(self.late_by)} after the deadline"
        if self.state == "closed":
            if self.policy is not None and self.policy.kind == "late_days":
                return f"Closed: {late}. {late_days_text(self.late_days_left)}"
            return f"Closed: {late}. A submission now is kept but does not count."
        if self.policy is None:
            return f"Late: {late}."
        if self.policy.kind == "late_days":
            used = days_begun(self.late_by)
            return (f"Late: {late}; this uses {used} late day{'s' * (used != 1)} ({self.late_days_left} left), "
                    f"without penalty.")
        return f"Late: {late}; {self.penalty_percent:g}% of the score is taken."

    def refusal(self) -> str:
        """Why a submission received at ``at`` does not count (state ``closed``), for the student."""
        yours = " (your extension)" if self.extension else ""
        received = (f"Not counted: received {_clock(self.at)}, {_duration(self.late_by)} after your deadline "
                    f"{_clock(self.effective_due)}{yours}")
        if self.policy is not None and self.policy.kind == "late_days":
            return f"{received}. {late_days_text(self.late_days_left)} This submission is kept for the record."
        if self.policy is not None and self.policy.kind == "penalty":
            rule = f"late submissions are accepted until {_clock(self.cutoff)}"
        else:
            rule = "this assignment accepts nothing after its deadline"
        return (f"{received}, and {rule}. It is kept for the record; if you think this is wrong, write to the "
                f"course staff.")

    def late_note(self) -> dict | None:
        """How late a counted submission received at ``at`` was and what it costs (None if on time)."""
        if self.state != "late":
            return None
        note = {"late_by_seconds": int(self.late_by.total_seconds()), "penalty_percent": self.penalty_percent}
        if self.late_days_left is not None:
            note.update(late_days_spent=days_begun(self.late_by), late_days_left=self.late_days_left)
        return note

    def late_text(self) -> str:
        """How late, in words ("2 h 30 min")."""
        return _duration(self.late_by)

    def deadline_text(self) -> str:
        """The student's deadline ("2030-05-06 12:00 UTC (your extension)")."""
        return _clock(self.effective_due) + (" (your extension)" if self.extension else "")

    def late_days_text(self) -> str:
        """The late days a late submission spent and those left ("2 late days (1 left)")."""
        used = days_begun(self.late_by)
        return f"{used} late day{'s' * (used != 1)} ({self.late_days_left} left)"

    def staff_note(self) -> str:
        """For the course staff's reports: how late by whose deadline, and what the policy made of it."""
        if self.state not in ("late", "closed"):
            return ""
        whose = "their extension " if self.extension else "the deadline "
        late = f"{_duration(self.late_by)} late (by {whose}{_clock(self.effective_due)})"
        if self.state == "closed":
            return f"{late}, received after the assignment closed to them: it does not count"
        if self.policy is None:
            return late
        if self.policy.kind == "late_days":
            return f"{late}: {self.late_days_text()}"
        return f"{late}: {self.penalty_percent:g}% penalty"

    @property
    def _late_days_before(self) -> int | None:
        """The late days this assignment had before this submission spent any (None: not late days)."""
        if self.late_days_left is None:
            return None
        spent_elsewhere = self.late_days_used - days_begun(self.late_by) if self.state == "late" else self.late_days_used
        return max(0, self.policy.late_days_budget - spent_elsewhere)

    def to_json(self) -> dict:
        """For the student's deadline file. ``state`` is as of ``at``; a reader with a later clock works
        the state out from ``effective_due``, ``cutoff`` and ``policy`` (the same rule as here)."""
        policy = self.policy
        return {
            "assignment": self.assignment, "at": _iso(self.at), "due": _iso(self.due),
            "extension": None if self.extension is None else {"due": _iso(self.extension.due),
                                                              "granted_at": _iso(self.extension.granted_at)},
            "effective_due": _iso(self.effective_due), "cutoff": _iso(self.cutoff),
            "policy": None if policy is None else policy.to_json(),
            "state": self.state, "late_by_seconds": int(self.late_by.total_seconds()),
            "penalty_percent": self.penalty_percent,
            "late_days_used": self.late_days_used, "late_days_left": self.late_days_left,
            "late_days_before": self._late_days_before,
            # the Lab's words once the late days left no longer cover the work, as the grader's
            "late_days_text": None if self.late_days_left is None else late_days_text(self._late_days_before),
            "text": self.describe(),
        }


def late_days_text(left: int) -> str:
    """Why work later than the late days ``left`` for an assignment cover is not accepted, and whom to ask."""
    if left:
        s = "s" * (left != 1)
        covered = (f"You have {left} late day{s} left for this assignment, enough for work handed in up to {left} "
                   f"day{s} after its deadline; later work is not accepted.")
    else:
        covered = ("You have no late days left for this assignment, so work handed in after its deadline is not "
                   "accepted.")
    return f"{covered} If you need more time, ask your instructor for an extension."


def _clock(when: dt.datetime) -> str:
    return aware(when).strftime("%Y-%m-%d %H:%M UTC")


def _duration(span: dt.timedelta) -> str:
    minutes = math.ceil(span.total_seconds() / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or "0 min"


class Deadlines:
    """The course's deadlines read once: policies, extensions, due dates (and, for late days, the
    gradebook's submission times). For many standings at once (a collect, a gradebook export)."""

    def __init__(self, course_dir, *, db_url: str | None = None, gradebook=None):
        """``gradebook``: an open nbgrader Gradebook to read instead of opening ``db_url`` (a grader
        inside a gradebook transaction reads its own session)."""
        self.course_dir = course_dir
        self.db_url = db_url or default_db_url(course_dir)
        self.gradebook = gradebook
        self.policies = policies(course_dir)
        self.extensions = ExtensionStore(course_dir).everything()
        self.due_dates = read_due_dates(self.db_url) if gradebook is None else due_dates(gradebook)
        self._submitted: dict[tuple[str, str], dt.datetime] | None = None

    def submitted_times(self) -> dict[tuple[str, str], dt.datetime]:
        """``{(assignment, student): the gradebook submission's time}`` of the late-day assignments."""
        if self._submitted is None:
            self._submitted = {}
            late_day_assignments = [a for a, p in self.policies.items() if p.kind == "late_days"]
            if self.gradebook is not None:
                for assignment in late_day_assignments:
                    if assignment in self.due_dates:
                        for row in self.gradebook.assignment_submissions(assignment):
                            if row.timestamp is not None:
                                self._submitted[(assignment, row.student.id)] = aware(row.timestamp)
            elif late_day_assignments:
                self._submitted = read_submitted(self.db_url, late_day_assignments)
        return self._submitted

    def effective_due(self, assignment: str, student: str) -> dt.datetime | None:
        due = self.due_dates.get(assignment)
        extension = self.extensions.get((assignment, student))
        if due is None or extension is None:
            return due
        return max(due, extension.due)  # an extension never moves a deadline earlier

    def late_days_spent(self, student: str, besides: str) -> int:
        """Days begun late of ``student``'s gradebook submissions of the other late-day assignments."""
        spent = 0
        for (assignment, who), submitted in self.submitted_times().items():
            if who == student and assignment != besides:
                due = self.effective_due(assignment, student)
                if due is not None:
                    spent += days_begun(submitted - due)
        return spent

    def standing(self, assignment: str, student: str, now: dt.datetime,
                 submitted_at: dt.datetime | None = None) -> Standing:
        at = aware(submitted_at or now)
        due = self.due_dates.get(assignment)
        extension = self.extensions.get((assignment, student))
        policy = self.policies.get(assignment)
        effective = self.effective_due(assignment, student)
        base = dict(assignment=assignment, student=student, at=at, due=due, extension=extension,
                    effective_due=effective, policy=policy)
        if effective is None:
            return Standing(**base, cutoff=None, state="no deadline")
        late_by = max(dt.timedelta(0), at - effective)
        if policy is None:
            return Standing(**base, cutoff=None, state="late" if late_by else "open", late_by=late_by)
        if policy.kind == "late_days":
            spent = self.late_days_spent(student, assignment)
            available = max(0, policy.late_days_budget - spent)
            cutoff = effective + available * DAY
            days = days_begun(late_by)
            if days > available:
                return Standing(**base, cutoff=cutoff, state="closed", late_by=late_by, late_days_used=spent,
                                late_days_left=available)
            return Standing(**base, cutoff=cutoff, state="late" if late_by else "open", late_by=late_by,
                            late_days_used=spent + days, late_days_left=available - days)
        allowed = policy.cutoff
        cutoff = None if allowed is None else effective + allowed
        if cutoff is not None and at > cutoff:
            return Standing(**base, cutoff=cutoff, state="closed", late_by=late_by)
        return Standing(**base, cutoff=cutoff, state="late" if late_by else "open", late_by=late_by,
                        penalty_percent=policy.penalty_for(late_by))


def standing(course_dir, assignment: str, student: str, now: dt.datetime, submitted_at: dt.datetime | None = None,
             *, db_url: str | None = None) -> Standing:
    """``student``'s standing on ``assignment`` at ``submitted_at`` (the exchange's trusted time) or ``now``."""
    return Deadlines(course_dir, db_url=db_url).standing(assignment, student, now, submitted_at)
