"""Whether a submit would count for nothing, and the sentence that says so: the assignment has closed
to the student (their deadline file, attempts/deadline_file.py), or feedback on submit's policy grades
no more attempts now.

Read by the student's own submit (``attention_platform.exchange.submit``) before it hands anything in;
the grader applies the deadline and the policy again whatever happens here.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import stat
from dataclasses import dataclass

from attention_platform.attempts import deadline_file
from attention_platform.attempts import status as status_file
from attention_platform.attempts.policy import UTC, Policy, PolicyError, clock, from_iso, iso, now

COUNTING = status_file.COUNTING


def feedback_folder(exchange_root: str, course_id: str) -> str:
    """The student's own feedback folder as their view of the exchange shows it."""
    return os.path.join(exchange_root, course_id, "feedback")


@dataclass(frozen=True)
class Refusal:
    """A submit the policy refuses: why, when the next graded attempt is possible, and the sentence
    that says both (in UTC, for a terminal; the Lab shows ``next_at`` in the student's own zone)."""

    reason: str  # a clause: "you have had 2 graded attempts in the last 24 hours, the most this assignment allows"
    next_at: dt.datetime | None  # None: no later attempt would count either (the assignment closed)
    sentence: str

    def to_json(self) -> dict:
        return {"reason": self.reason[:1].upper() + self.reason[1:] + ".", "next_graded_attempt": iso(self.next_at),
                "handed_in": False}


def submit_refusal(exchange_root: str, course_id: str, assignment: str, inbound: str, student: str) -> str | None:
    """The sentence that refuses this submit, or None to hand it in (see :func:`refused_submit`)."""
    refused = refused_submit(exchange_root, course_id, assignment, inbound, student)
    return refused.sentence if refused else None


def refused_submit(exchange_root: str, course_id: str, assignment: str, inbound: str, student: str) -> Refusal | None:
    """The :class:`Refusal` of this submit, or None to hand it in.

    When the assignment has closed to the student (:func:`closed_refusal`); otherwise only when the attempt would count for nothing: the policy counts the last or best *graded*
    attempt and the grader would not grade this one (too many or too soon). Under ``collected``
    a submission past the limit is still handed in (the course staff collect the newest), and
    the grader records it as not graded on submit. The rule is the grader's
    (:mod:`attention_platform.attempts.policy`), over the attempts the grader has recorded plus the student's own submissions it has not
    seen yet; the grader applies it again whatever happens here.
    """
    closed = closed_refusal(exchange_root, course_id, assignment)
    if closed is not None:
        return closed
    try:
        status = status_file.read(feedback_folder(exchange_root, course_id), assignment)
        policy = Policy.from_json(status["policy"]) if status else None
    except (ValueError, PolicyError, KeyError, TypeError):
        return None  # nothing readable: the grader decides alone
    if policy is None or not policy.on or policy.counts not in ("last", "best"):
        return None
    times, known = [], set()
    for attempt in status.get("attempts", []):
        known.add(attempt.get("submission"))
        if attempt.get("state") in COUNTING and attempt.get("received"):
            times.append(from_iso(attempt["received"]))
    since = from_iso(status.get("enabled_since"))
    for path in glob.glob(os.path.join(glob.escape(inbound), f"{glob.escape(student)}+{glob.escape(assignment)}+*")):
        name = os.path.basename(path)
        if name in known:
            continue
        try:
            info = os.lstat(path)
        except OSError:
            continue
        made = dt.datetime.fromtimestamp(info.st_ctime, UTC)
        if stat.S_ISDIR(info.st_mode) and (since is None or made >= since):
            times.append(made)  # handed in, not yet seen by the grader: it will count
    at = now()
    next_at = policy.next_allowed(times, at)
    if next_at is None:
        return None
    return Refusal(policy.refusal_reason(times, at), next_at,
                   f"Not submitted: {policy.refusal(times, at, next_at)}. Under this assignment's policy only graded "
                   f"attempts count, so nothing was handed in and your files are unchanged.")


def closed_refusal(exchange_root: str, course_id: str, assignment: str) -> Refusal | None:
    """The :class:`Refusal` of any submit once the assignment has closed to the student, by the
    deadline file the grader wrote for them (their own deadline and the late policy); None while it
    is open, or when there is no readable file (the grader decides alone)."""
    try:
        content = deadline_file.read(feedback_folder(exchange_root, course_id), assignment)
    except ValueError:
        return None
    closed_at = deadline_file.closed_since(content, now()) if content else None
    if closed_at is None:
        return None
    reason = f"this assignment closed to you at {clock(closed_at)}"
    return Refusal(reason, None, f"Not submitted: {reason}, so a submission now would not count. Nothing was handed "
                                 f"in and your files are unchanged; if you think this is wrong, write to the course staff.")
