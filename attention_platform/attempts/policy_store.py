"""The feedback-on-submit policies an instructor sets in the formgrader's form.

They live in ``<course>/feedback_on_submit_policies.json`` (``{assignment: {feedback, attempts,
window_hours, cooldown_minutes, counts}}``), beside the course's ``nbgrader_config.py``, which stays
the default: an assignment in this file takes its policy from here, every other one keeps the
configuration's (or ``$ATTENTION_FEEDBACK_ON_SUBMIT``'s). The formgrader and the grader run as the
course's grader account, which owns the course directory (mode 0710): the formgrader writes the file
(mode 0640), the grader reads it; a student can write neither the file nor its folder, and no root
process reads it. Both sides check it against :func:`~attention_platform.attempts.policy.parse`: an
entry saved through the form is valid, one edited by hand into something unusable is reported as
the configuration's mistakes are (the formgrader's page, the grader's log).
"""

from __future__ import annotations

from traitlets.config import Config

from .course_files import PerAssignmentFile
from .policy import POLICY_KEYS, FeedbackOnSubmit, Policy, PolicyError, parse

POLICY_FILE = "feedback_on_submit_policies.json"
MAX_BYTES = 64 * 1024  # a policy is five short values; a course has a few assignments
STORE = PerAssignmentFile(POLICY_FILE, MAX_BYTES, holds="one policy per assignment id", error=PolicyError,
                          advice="; or remove it to fall back on nbgrader_config.py")
path = STORE.path
read = STORE.read  # {assignment: raw policy} as saved; PolicyError if the file cannot be used


def with_saved_policies(config: Config, course_dir) -> Config:
    """``config`` with the policies saved in the form over the ones it (or the environment) names."""
    saved = read(course_dir)
    if not saved:
        return config
    merged = Config(config)
    merged.FeedbackOnSubmit.policies = {**FeedbackOnSubmit(config=config).policies, **saved}
    return merged


def save(course_dir, assignment: str, raw: dict) -> Policy:
    """Check ``raw`` as the grader will and save it as ``assignment``'s policy; nothing is written
    when it is not usable (PolicyError says what to change)."""
    policy = parse(assignment, raw)
    STORE.put(course_dir, assignment, {key: getattr(policy, key) for key in POLICY_KEYS})
    return policy


def forget(course_dir, assignment: str) -> None:
    """``assignment`` takes its policy from nbgrader_config.py again."""
    STORE.forget(course_dir, assignment)
