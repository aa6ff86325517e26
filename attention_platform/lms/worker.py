"""The passback worker: every ``LTI_SYNC_SECONDS``, the roster in (NRPS) and the scores out (AGS).

One process of its own, run as the course's grader beside the formgrader (it reads the gradebook and
writes the outbox) and registered with the hub as a service (its token lets it manage the course's
users and groups, nothing else). It holds the tool's private key, handed to it at start; the hub's
pages and the students' servers never do. A pass that cannot reach the LMS leaves the scores in the
outbox for later: grading, releasing feedback and the hub go on as before.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from attention_platform.lms.ags import GradeService, ServiceRefused
from attention_platform.lms.bounded_http import LmsUnavailable
from attention_platform.lms.nrps import members
from attention_platform.lms.outbox import OUTBOX_NAME, Outbox, note_release, outbox_path  # noqa: F401 - the worker's names
from attention_platform.lms.passback import counted_on_submit, deliver, gradebook_scores, queue_scores
from attention_platform.lms.service_tokens import TokenRefused

log = logging.getLogger("attention.lms")


def counts_on_submit_of(course_root) -> Callable[[str], bool]:
    """Whether an assignment's feedback-on-submit policy makes an attempt count (``last`` or ``best``)."""
    from attention_platform.attempts.policy import FeedbackOnSubmit, PolicyError, load_config

    policies = FeedbackOnSubmit(config=load_config(course_root))

    def counts(assignment: str) -> bool:
        try:
            return policies.policy_for(assignment).counts in ("last", "best")
        except PolicyError:
            return False

    return counts


class Roster(Protocol):
    def apply(self, roster: list) -> list[str]: ...


class RosterRefused(Exception):
    """The roster could not be applied to the hub; the message says which change was refused."""


@dataclass
class Worker:
    outbox: Outbox
    service: GradeService
    db_url: str
    line_items_url: str
    memberships_url: str = ""
    roster: Roster | None = None
    counts_on_submit: Callable[[str], bool] = lambda assignment: False
    # without line_items_url: the URL the course's launches named, or "" and why there is none
    launched_line_items: Callable[[], tuple[str, str]] = lambda: ("", "")

    def one_pass(self) -> dict:
        """Sync the roster, queue what counts, post what is due; what happened, for the log."""
        done: dict = {}
        if self.roster is not None and self.memberships_url:
            try:
                done["roster"] = self.roster.apply(members(self.service, self.memberships_url))
            except (LmsUnavailable, ServiceRefused, TokenRefused, RosterRefused) as why:
                self.outbox.note_roster_change("", "", f"roster not synced: {why}"[:500])
                done["roster"] = f"not synced: {why}"
        line_items_url, why_none = (self.line_items_url, "") if self.line_items_url else self.launched_line_items()
        if line_items_url:
            done["queued"] = queue_scores(self.outbox, gradebook_scores(self.db_url),
                                          counted_on_submit(self.db_url, self.counts_on_submit))
            done.update(deliver(self.outbox, self.service, line_items_url))
        elif why_none:
            done["scores"] = f"not sent: {why_none}"
        return done

    def serve(self, interval: float, passes: int | None = None) -> None:
        count = 0
        while passes is None or count < passes:
            try:
                log.info("LMS sync: %s", self.one_pass())
            except Exception:  # noqa: BLE001 - one bad pass (a gradebook locked, say) never ends the worker
                log.exception("LMS sync pass failed; trying again in %g s", interval)
            count += 1
            if passes is None or count < passes:
                time.sleep(interval)
