"""What a submission after the deadline means, per assignment: closed, a penalty, or late days.

An instructor sets it in the formgrader, beside the feedback-on-submit policy; it is saved in
``<course>/late_policies.json`` (``{assignment: {kind, ...}}``, see :data:`KEYS`). An assignment
without an entry keeps nbgrader's behaviour: the gradebook's due date, collect's own options and
the course's ``LateSubmissionPlugin``.

- ``closed``: nothing received after the (student's effective) deadline counts.
- ``penalty``: accepted until ``cutoff_hours`` after the deadline (``None``: no cut-off), with
  ``penalty_percent`` of the score taken for each ``per`` (``hour`` or ``day``) begun, at most
  ``max_penalty_percent``.
- ``late_days``: each student has ``late_days_budget`` days for the whole course; a late submission
  spends one for each day begun, without penalty, as long as the budget lasts; beyond it the
  assignment is closed to them.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import asdict, dataclass

from attention_platform.attempts.policy import checked_number, checked_settings
from attention_platform.attempts.course_files import PerAssignmentFile

POLICY_FILE = "late_policies.json"
MAX_BYTES = 64 * 1024  # a policy is six short values; a course has a few assignments
KINDS = ("closed", "penalty", "late_days")
UNITS = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1)}
KEYS = ("kind", "penalty_percent", "per", "max_penalty_percent", "cutoff_hours", "late_days_budget")
MAX_CUTOFF_HOURS = 24 * 366
MAX_LATE_DAYS = 365


class LatePolicyError(ValueError):
    """The late policy of an assignment cannot be used; the message says what to change (for the form)."""


@dataclass(frozen=True)
class LatePolicy:
    assignment: str
    kind: str = "closed"
    penalty_percent: float = 0.0
    per: str = "day"
    max_penalty_percent: float = 100.0
    cutoff_hours: float | None = None
    late_days_budget: int = 0

    @property
    def cutoff(self) -> dt.timedelta | None:
        """How long after the deadline a penalised submission is still accepted (None: always)."""
        if self.kind != "penalty" or self.cutoff_hours is None:
            return dt.timedelta(0) if self.kind == "closed" else None
        return dt.timedelta(hours=self.cutoff_hours)

    def penalty_for(self, late_by: dt.timedelta) -> float:
        """Percent of the score taken for a submission ``late_by`` after the deadline (penalty kind)."""
        if self.kind != "penalty" or late_by <= dt.timedelta(0):
            return 0.0
        units = math.ceil(late_by / UNITS[self.per])
        return min(self.max_penalty_percent, units * self.penalty_percent)

    def to_json(self) -> dict:
        return {**asdict(self), "text": self.describe()}

    def saved(self) -> dict:
        return {key: getattr(self, key) for key in KEYS}

    def describe(self) -> str:
        """The policy in one sentence, for the student's Lab and the formgrader."""
        if self.kind == "closed":
            return "Submissions after the deadline are not accepted."
        if self.kind == "late_days":
            return (f"You have {_plural(self.late_days_budget, 'late day')} for the whole course: a late submission "
                    f"spends one for each day begun, without penalty; once they are spent, late submissions "
                    f"are not accepted.")
        until = ("at any time" if self.cutoff_hours is None
                 else f"until {_plural(self.cutoff_hours, 'hour')} after the deadline")
        return (f"Late submissions are accepted {until}, with {self.penalty_percent:g}% of the score taken for "
                f"each {self.per} begun (at most {self.max_penalty_percent:g}%).")


def _plural(n: float, word: str) -> str:
    return f"{n:g} {word}" + ("" if n == 1 else "s")


def _number(assignment: str, key: str, value, *, whole: bool, low: float, high: float, allow_none: bool = False):
    return checked_number(f"late policy of {assignment!r}: {key!r}", value, whole=whole, minimum=low, maximum=high,
                          allow_none=allow_none, error=LatePolicyError, none="empty")


def parse(assignment: str, raw) -> LatePolicy:
    """One assignment's late policy from the form's (or the file's) dict; LatePolicyError names what is wrong."""
    checked_settings(f"late policy of {assignment!r}", raw, KEYS, error=LatePolicyError)
    kind = raw.get("kind", "closed")
    if kind not in KINDS:
        raise LatePolicyError(f"late policy of {assignment!r}: 'kind' must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind == "closed":
        return LatePolicy(assignment)
    if kind == "late_days":
        budget = _number(assignment, "late_days_budget", raw.get("late_days_budget"), whole=True, low=1,
                         high=MAX_LATE_DAYS)
        return LatePolicy(assignment, kind="late_days", late_days_budget=budget)
    per = raw.get("per", "day")
    if per not in UNITS:
        raise LatePolicyError(f"late policy of {assignment!r}: 'per' must be hour or day, not {per!r}")
    percent = _number(assignment, "penalty_percent", raw.get("penalty_percent"), whole=False, low=0, high=100)
    most = _number(assignment, "max_penalty_percent", raw.get("max_penalty_percent", 100), whole=False, low=0,
                   high=100)
    cutoff = _number(assignment, "cutoff_hours", raw.get("cutoff_hours"), whole=False, low=0.01,
                     high=MAX_CUTOFF_HOURS, allow_none=True)
    return LatePolicy(assignment, kind="penalty", penalty_percent=percent, per=per, max_penalty_percent=most,
                      cutoff_hours=cutoff)


STORE = PerAssignmentFile(POLICY_FILE, MAX_BYTES, holds="one late policy per assignment id", error=LatePolicyError)
path = STORE.path
read = STORE.read  # {assignment: raw policy} as saved; LatePolicyError if the file cannot be used


def policies(course_dir) -> dict[str, LatePolicy]:
    """Every saved policy, checked; LatePolicyError names the first unusable one."""
    return {assignment: parse(assignment, raw) for assignment, raw in read(course_dir).items()}


def policy_for(course_dir, assignment: str) -> LatePolicy | None:
    """``assignment``'s policy, or None when it has none (nbgrader's behaviour)."""
    raw = read(course_dir).get(assignment)
    return None if raw is None else parse(assignment, raw)


def save(course_dir, assignment: str, raw: dict) -> LatePolicy:
    """Check ``raw`` and save it as ``assignment``'s policy; nothing is written when it is not usable.
    The caller republishes the students' deadline files (student_file.publish_all)."""
    policy = parse(assignment, raw)
    STORE.put(course_dir, assignment, policy.saved())
    return policy


def forget(course_dir, assignment: str) -> None:
    """``assignment`` has no late policy again (nbgrader's behaviour)."""
    STORE.forget(course_dir, assignment)
