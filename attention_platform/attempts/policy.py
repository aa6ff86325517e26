"""The instructor's terms: what a student sees on submit, how often, and which attempt counts.

Set per assignment in the formgrader's form (saved by policy_store.py), or in the course's
``nbgrader_config.py``, the default for an assignment the form has not set::

    c.FeedbackOnSubmit.policies = {
        "<assignment>": {              # the nbgrader assignment id
            "feedback": "checks",      # off (default: nothing until the TA releases feedback),
                                       # checks (each check's title, passed or not, and the points),
                                       # full (the feedback page the TA would release)
            "attempts": 3,             # graded attempts per window; null: no limit
            "window_hours": 24,        # the window those attempts are counted in (rolling)
            "cooldown_minutes": 10,    # at least this long between two graded attempts; 0: none
            "counts": "best",          # last (the newest graded attempt), best (the highest-scoring one
                                       # for the checks, with the written answers of the newest graded
                                       # attempt), collected (the one the TA's collect picks, as today)
        },
    }

or, for a whole deployment, as JSON in ``ATTENTION_FEEDBACK_ON_SUBMIT``. A graded attempt is
counted at the time the exchange received it (the kernel's time of the submission folder, not
a time the student wrote). The rule is enforced by the grader; the student's submit reads the
grader's account of their attempts to refuse, with the time of the next possible attempt,
an attempt the grader would not grade.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import asdict, dataclass

from traitlets import Dict, Float, Integer, default
from traitlets.config import LoggingConfigurable

FEEDBACK_LEVELS = ("off", "checks", "full")
COUNTS = ("last", "best", "collected")
POLICY_KEYS = ("feedback", "attempts", "window_hours", "cooldown_minutes", "counts")
UTC = dt.timezone.utc


class PolicyError(ValueError):
    """The instructor's policy for an assignment cannot be used; the message says what to change."""


@dataclass(frozen=True)
class Policy:
    assignment: str
    feedback: str = "off"
    attempts: int | None = None
    window_hours: float = 24.0
    cooldown_minutes: float = 0.0
    counts: str = "collected"

    @property
    def on(self) -> bool:
        return self.feedback != "off"

    @property
    def window(self) -> dt.timedelta:
        return dt.timedelta(hours=self.window_hours)

    @property
    def cooldown(self) -> dt.timedelta:
        return dt.timedelta(minutes=self.cooldown_minutes)

    def to_json(self) -> dict:
        return {**asdict(self), "text": self.describe()}

    @classmethod
    def from_json(cls, data: dict) -> "Policy":
        return parse(str(data.get("assignment", "")), {k: data[k] for k in POLICY_KEYS if k in data})

    def describe(self) -> str:
        """The policy in one or two sentences, for the student's tab and the formgrader."""
        if not self.on:
            return "No feedback on submit: your feedback comes when the course staff release it."
        what = {"checks": "each hidden check's title, whether it passed, and your points",
                "full": "the full feedback page"}[self.feedback]
        limits = []
        if self.attempts is not None:
            limits.append(f"{plural(self.attempts, 'graded attempt')} per {hours(self.window_hours)}")
        if self.cooldown_minutes:
            limits.append(f"at least {minutes(self.cooldown_minutes)} between graded attempts")
        limit = ("; " + ", ".join(limits)) if limits else "; no limit on graded attempts"
        counts = {"last": "your last graded attempt counts for the grade",
                  "best": "your best graded attempt counts for the hidden checks' points; the course staff "
                          "grade the written answers of your latest graded attempt",
                  "collected": "the submission the course staff collect counts for the grade"}[self.counts]
        return f"On submit you see {what} within seconds{limit}. {counts[0].upper()}{counts[1:]}."

    def next_allowed(self, graded: list[dt.datetime], at: dt.datetime) -> dt.datetime | None:
        """When an attempt received at ``at`` would be graded, given the times the earlier graded
        (or queued) attempts were received: None if at once, else the earliest time it would be."""
        earlier = sorted(t for t in graded if t <= at)
        wait = []
        if self.attempts is not None:
            recent = [t for t in earlier if t > at - self.window]
            if len(recent) >= self.attempts:
                wait.append(recent[len(recent) - self.attempts] + self.window)
        if self.cooldown_minutes and earlier and at - earlier[-1] < self.cooldown:
            wait.append(earlier[-1] + self.cooldown)
        return max(wait) if wait else None

    def refusal_reason(self, graded: list[dt.datetime], at: dt.datetime) -> str:
        """Why an attempt received at ``at`` is not graded (a clause, without the next time)."""
        recent = [t for t in graded if at - self.window < t <= at]
        if self.attempts is not None and len(recent) >= self.attempts:
            return (f"you have had {plural(len(recent), 'graded attempt')} in the last {hours(self.window_hours)}, "
                    f"the most this assignment allows")
        return f"graded attempts must be at least {minutes(self.cooldown_minutes)} apart"

    def refusal(self, graded: list[dt.datetime], at: dt.datetime, next_at: dt.datetime) -> str:
        """Why an attempt received at ``at`` is not graded, and when the next one would be."""
        why = self.refusal_reason(graded, at)
        return (f"{why}. Your next graded attempt is possible at {clock(next_at)} "
                f"({until(next_at, at)} from the time of this attempt)")


def plural(n: float, word: str) -> str:
    return f"{n:g} {word}" + ("" if n == 1 else "s")


def hours(value: float) -> str:
    return plural(value, "hour")


def minutes(value: float) -> str:
    return plural(value, "minute") if value < 120 else plural(value / 60, "hour")


def clock(when: dt.datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def until(later: dt.datetime, now: dt.datetime) -> str:
    seconds = max(0, math.ceil((later - now).total_seconds()))
    if seconds < 60:
        return plural(seconds, "second")
    mins = math.ceil(seconds / 60)
    if mins < 60:
        return plural(mins, "minute")
    return f"{mins // 60} h {mins % 60:02d} min"


def _number(assignment: str, key: str, value, *, whole: bool, minimum: float, allow_none: bool):
    return checked_number(f"feedback-on-submit policy of {assignment!r}: {key!r}", value, whole=whole,
                          minimum=minimum, allow_none=allow_none)


def checked_number(where: str, value, *, whole: bool, minimum: float, maximum: float = math.inf,
                   allow_none: bool = False, error: type[ValueError] = PolicyError, none: str = "null"):
    """``value`` of a form or file as an int (``whole``) or a float within its bounds; ``error``
    (its message starting with ``where``) says what it must be."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not float(value).is_integer()):
        kind = "a whole number" if whole else "a number"
        raise error(f"{where} must be {kind}{f' or {none}' if allow_none else ''}, not {value!r}")
    if not math.isfinite(value) or not minimum <= value <= maximum:
        bounds = f"at least {minimum:g}" if maximum == math.inf else f"between {minimum:g} and {maximum:g}"
        raise error(f"{where} must be {bounds}, not {value!r}")
    return int(value) if whole else float(value)


def checked_settings(what: str, raw, keys, error: type[ValueError] = PolicyError) -> None:
    """``raw`` is a dict of some of ``keys``; ``error`` (its message starting with ``what``) otherwise."""
    if not isinstance(raw, dict):
        raise error(f"{what} must be a dict of {', '.join(keys)}, not {type(raw).__name__}")
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise error(f"{what}: unknown setting {unknown[0]!r} (the settings are {', '.join(keys)})")


def parse(assignment: str, raw) -> Policy:
    """One assignment's policy from the instructor's dict; a PolicyError names what is wrong."""
    checked_settings(f"feedback-on-submit policy of {assignment!r}", raw, POLICY_KEYS)
    feedback = raw.get("feedback", "off")
    if feedback not in FEEDBACK_LEVELS:
        raise PolicyError(f"feedback-on-submit policy of {assignment!r}: 'feedback' must be one of "
                          f"{', '.join(FEEDBACK_LEVELS)}, not {feedback!r}")
    counts = raw.get("counts", "collected")
    if counts not in COUNTS:
        raise PolicyError(f"feedback-on-submit policy of {assignment!r}: 'counts' must be one of "
                          f"{', '.join(COUNTS)}, not {counts!r}")
    return Policy(
        assignment=assignment, feedback=feedback, counts=counts,
        attempts=_number(assignment, "attempts", raw.get("attempts"), whole=True, minimum=1, allow_none=True),
        window_hours=_number(assignment, "window_hours", raw.get("window_hours", 24), whole=False, minimum=0.01,
                             allow_none=False),
        cooldown_minutes=_number(assignment, "cooldown_minutes", raw.get("cooldown_minutes", 0), whole=False,
                                 minimum=0, allow_none=False),
    )


class FeedbackOnSubmit(LoggingConfigurable):
    """The course's feedback-on-submit settings (``c.FeedbackOnSubmit.*`` in nbgrader_config.py)."""

    policies = Dict(
        help="Per assignment id, the feedback-on-submit policy: a dict with 'feedback' (off | checks | full), "
             "'attempts' (graded attempts per window, null for no limit), 'window_hours' (default 24), "
             "'cooldown_minutes' (default 0) and 'counts' (last | best | collected). An assignment not listed "
             "is 'off': nothing is graded on submit. Default: the JSON in $ATTENTION_FEEDBACK_ON_SUBMIT, if set.",
    ).tag(config=True)

    poll_seconds = Float(
        0.2,
        help="How often the grader looks for new submissions in the students' inbound folders (one stat per "
             "student folder; a folder is listed only when it changed).",
    ).tag(config=True)

    workers = Integer(
        3,
        help="Attempts graded at once, each in its own sandboxes; one student has at most one attempt in "
             "grading, so a looping submission holds one worker and the others keep draining the queue.",
    ).tag(config=True)

    attempt_seconds = Float(
        180.0,
        help="Wall-clock seconds for all notebooks of one attempt together; notebooks not reached in time are "
             "reported as not graded in this attempt (each notebook keeps its own SandboxedExecute limits).",
    ).tag(config=True)

    keep_attempt_files = Integer(
        10,
        help="Per student and assignment, the files (notebooks, feedback pages) of this many newest graded "
             "attempts are kept, besides the one that counts; older ones keep their row in the gradebook.",
    ).tag(config=True)

    @default("policies")
    def _policies_from_environment(self):
        from attention_platform.settings import settings  # a broken $ATTENTION_FEEDBACK_ON_SUBMIT stops the start

        return dict(settings().attention_feedback_on_submit or {})

    def policy_for(self, assignment: str) -> Policy:
        """The assignment's policy; PolicyError (with what to change) if the instructor's is unusable."""
        if assignment not in self.policies:
            return Policy(assignment)
        return parse(assignment, self.policies[assignment])

    def assignments(self) -> list[str]:
        return sorted(self.policies)


def load_config(course_dir):
    """The configuration nbgrader's own commands would use in ``course_dir``: every
    ``nbgrader_config.py`` on the Jupyter config path (the grader's jupyter_config/grader/ settings: the
    exchange, its limits, the collect's claim tolerance), then the course's own, which wins; then the
    feedback-on-submit policies saved in the formgrader (policy_store.py), which win over both."""
    from pathlib import Path

    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(course_dir)]:  # lowest priority first
        if (Path(folder) / "nbgrader_config.py").is_file():
            config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config())
    from .policy_store import with_saved_policies  # it builds on this module

    return with_saved_policies(config, course_dir)


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


def aware(value: dt.datetime) -> dt.datetime:
    """nbgrader's naive-UTC datetimes as aware ones."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: dt.datetime | None) -> str | None:
    return None if value is None else aware(value).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_iso(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return aware(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
