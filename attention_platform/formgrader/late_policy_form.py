"""An assignment's late policy as a form, on the page of its feedback-on-submit policy (policy_form.py).

TAs read it, instructors change it (the page's POST is the instructors' in formgrader_gate.py): closed at
the deadline, a penalty per hour or day begun up to a cap and until a cut-off, or late days from each
student's course budget. It is saved with attention_platform/deadlines/late_policy.py, checked as the
grader reads it, and every student's deadline file is written again at once. "No late policy" forgets
it: the assignment keeps nbgrader's behaviour.
"""

from __future__ import annotations

import datetime as dt

from attention_platform.deadlines import late_policy, student_file
from attention_platform.deadlines.late_policy import KEYS, KINDS, LatePolicy, LatePolicyError

KIND_CHOICES = {
    "closed": "closed: nothing after the student's deadline counts",
    "penalty": "penalty: late submissions lose a share of the score for each hour or day begun",
    "late_days": "late days: each student spends days from a budget for the whole course, without penalty",
}
PER_CHOICES = {"hour": "hour", "day": "day"}
ACTIONS = ("late-save", "late-reset")
assert set(KIND_CHOICES) == set(KINDS)


def from_form(values: dict[str, str]) -> dict:
    """The form's text fields as the policy's values: numbers where they read as numbers, an empty
    cut-off as none, other empty fields left out (the policy's defaults); anything else stays text, for
    late_policy.parse to name what is wrong."""
    from attention_platform.formgrader.policy_form import _number

    raw = {}
    for key in KEYS:
        text = values.get(key, "").strip()
        if key in ("kind", "per"):
            if text:
                raw[key] = text
        elif key == "cutoff_hours" and not text:
            raw[key] = None
        elif text:
            raw[key] = _number(text)
    return raw


def form_values(policy: LatePolicy | None) -> dict[str, str]:
    """The form's fields for the policy in force (empty when there is none)."""
    from attention_platform.formgrader.policy_form import _text

    return {key: "" if policy is None else _text(getattr(policy, key)) for key in KEYS}


def in_force(course_root: str, assignment: str) -> tuple[LatePolicy | None, str]:
    """The assignment's late policy and, when the saved one cannot be used, why."""
    try:
        return late_policy.policy_for(course_root, assignment), ""
    except LatePolicyError as exc:
        return None, str(exc)


def apply(course_root: str, assignment: str, action: str, values: dict[str, str], now: dt.datetime) -> str:
    """Save or forget the policy and write every student's deadline file again; what was done.
    LatePolicyError (nothing saved) says what to change."""
    if action == "late-reset":
        late_policy.forget(course_root, assignment)
        done = "late-reset"
    else:
        late_policy.save(course_root, assignment, from_form(values))
        done = "late-saved"
    student_file.publish_all(course_root, assignment, now)
    return done
