"""Taking one submission out of a student's inbound folder: the grader's own copy, and its time.

Everything in ``inbound/<student>/`` was written by that student, possibly by hand, and stays
theirs to change after the grader has looked. So the grader copies a submission once, the
moment it sees it, and grades, archives and (if it counts) installs only that copy. The copy
is the TA's collect's own (``PerStudentCollect.copy_one`` in attention_platform/exchange/exchange.py):
regular files only, nothing followed, within the course's ``ExchangeLimits``, each problem a
line; and so is its time: the kernel's (the newest inode change time in the submission), with
the time the student's submit wrote kept when the kernel's corroborates it. An attempt is
therefore graded on exactly what the TA's collect would take, at the time collect would record.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from attention_platform.attempts.policy import UTC

MAX_SECRET_BYTES = 4096  # submission_secret.txt: 128 hex characters when nbgrader wrote it


class IntakeError(Exception):
    """The submission cannot be taken; the message says why, for the student."""


@dataclass
class Intake:
    folder: Path  # the grader's copy
    newest_ctime_ns: int = 0  # the kernel's time of the submission
    claim: str = ""  # timestamp.txt as the student's submit wrote it
    timestamp: dt.datetime | None = None  # the time that counts (what collect records)
    secret: str = ""  # submission_secret.txt: names the feedback pages, as nbgrader's do
    notes: list = field(default_factory=list)  # what was not copied, and why

    @property
    def received(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.newest_ctime_ns / 1e9, UTC)


def collector(config):
    """The course's collect, set up to copy single submissions (``take``)."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory

    from attention_platform.exchange.exchange import PerStudentCollect

    coursedir = CourseDirectory(config=config)
    found = PerStudentCollect(coursedir=coursedir, authenticator=Authenticator(config=config), config=config)
    found.log = logging.getLogger("feedback-on-submit.collect")
    return found


def take(collect, folder_fd: int, student: str, name: str, dest: Path) -> Intake:
    """Copy the submission ``name`` of the student's folder open at ``folder_fd`` to the new folder ``dest``."""
    from attention_platform.exchange.exchange import Skip, StudentReport

    report = StudentReport(collect.log, student, limit=collect.max_problem_lines)
    try:
        candidate, counted, _text = collect.copy_one(folder_fd, name, str(dest), report)
    except Skip as why:
        raise IntakeError(f"the submission cannot be read: {why}") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    found = Intake(folder=Path(dest), newest_ctime_ns=candidate.trusted_ns, claim=candidate.claim_text,
                   timestamp=counted.replace(tzinfo=UTC), notes=list(report.lines))
    if report.hidden:
        found.notes.append(f"{report.hidden} more files were not taken, for the same kinds of reasons")
    secret = Path(dest) / "submission_secret.txt"
    if secret.is_file() and secret.stat().st_size <= MAX_SECRET_BYTES:
        found.secret = secret.read_text(errors="replace").strip()
    return found
