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

from pathlib import Path

from traitlets.config import Config

from .course_files import CourseFileError, read_object, write_object
from .policy import POLICY_KEYS, FeedbackOnSubmit, Policy, PolicyError, parse

POLICY_FILE = "feedback_on_submit_policies.json"
MAX_BYTES = 64 * 1024  # a policy is five short values; a course has a few assignments


def path(course_dir) -> Path:
    return Path(course_dir) / POLICY_FILE


def read(course_dir) -> dict:
    """``{assignment: raw policy}`` as saved; {} when nothing is. PolicyError if the file cannot be used."""
    try:
        return read_object(path(course_dir), MAX_BYTES, holds="one policy per assignment id")
    except CourseFileError as exc:
        raise PolicyError(f"{exc}; or remove it to fall back on nbgrader_config.py") from None


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
    saved = read(course_dir)
    saved[assignment] = {key: getattr(policy, key) for key in POLICY_KEYS}
    write_object(path(course_dir), saved)
    return policy


def forget(course_dir, assignment: str) -> None:
    """``assignment`` takes its policy from nbgrader_config.py again."""
    saved = read(course_dir)
    if saved.pop(assignment, None) is not None:
        write_object(path(course_dir), saved)
