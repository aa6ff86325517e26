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

import json
import os
import stat
import tempfile
from pathlib import Path

from traitlets.config import Config

from .policy import POLICY_KEYS, FeedbackOnSubmit, Policy, PolicyError, parse

POLICY_FILE = "feedback_on_submit_policies.json"
MAX_BYTES = 64 * 1024  # a policy is five short values; a course has a few assignments


def path(course_dir) -> Path:
    return Path(course_dir) / POLICY_FILE


def read(course_dir) -> dict:
    """``{assignment: raw policy}`` as saved; {} when nothing is. PolicyError if the file cannot be used."""
    where = path(course_dir)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise PolicyError(f"{where} cannot be read ({exc.strerror}); remove it to fall back on nbgrader_config.py")
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise PolicyError(f"{where} is not a regular file; remove it to fall back on nbgrader_config.py")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise PolicyError(f"{where} is larger than {MAX_BYTES // 1024} kB; it holds five settings per assignment")
    try:
        saved = json.loads(data or b"{}")
    except ValueError as exc:
        raise PolicyError(f"{where} is not JSON ({exc}); save the policy again in the formgrader") from None
    if not isinstance(saved, dict):
        raise PolicyError(f"{where} must hold one policy per assignment id, not a {type(saved).__name__}")
    return saved


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
    _write(course_dir, saved)
    return policy


def forget(course_dir, assignment: str) -> None:
    """``assignment`` takes its policy from nbgrader_config.py again."""
    saved = read(course_dir)
    if saved.pop(assignment, None) is not None:
        _write(course_dir, saved)


def _write(course_dir, saved: dict) -> None:
    """Whole or not at all: a temporary file in the same folder, renamed over the old one."""
    folder = Path(course_dir)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".feedback_on_submit_policies.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o640)
            json.dump(saved, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path(folder))
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
