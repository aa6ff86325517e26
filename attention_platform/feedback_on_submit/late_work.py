"""The course's deadlines as the feedback-on-submit grader applies them to each attempt.

An attempt is judged at the time the exchange received it (the kernel's, :mod:`.intake`): one
received after the assignment closed to its student (their own deadline and the late policy,
attention_platform/deadlines) is not graded and says why; a late one is graded, and its penalty
counts when the attempts are compared under ``best``. The students' deadline files are written
again whenever the late policies, the extensions or the gradebook's due dates change, and a
student's after each of their graded attempts (their late-day balance).

The course's files are read again when they change, the gradebook's due dates every few seconds.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from pathlib import Path

from attention_platform.deadlines import late_policy
from attention_platform.deadlines.due_dates import read_due_dates
from attention_platform.deadlines.extensions import LOG_FILE
from attention_platform.deadlines.standing import Deadlines, DeadlinesError, Standing
from attention_platform.deadlines.student_file import publish, publish_all

DUE_DATES_SECONDS = 5.0  # how stale a due date changed in the formgrader may be


class LateWork:
    def __init__(self, course: Path, exchange_root: Path, course_id: str, db_url: str, log: logging.Logger):
        self.course, self.exchange_root, self.course_id, self.db_url = course, exchange_root, course_id, db_url
        self.log = log
        self._read: tuple | None = None  # (files' change times, when) of the deadlines held
        self._deadlines: Deadlines | None = None
        self._published: tuple | None = None  # (files' change times, due dates) the students' files were written for

    def _files(self) -> tuple:
        found = []
        for path in (late_policy.path(self.course), self.course / LOG_FILE):
            try:
                found.append(path.stat().st_mtime_ns)
            except OSError:
                found.append(None)
        return tuple(found)

    def deadlines(self) -> Deadlines | None:
        """The course's deadlines, or None while a file of them cannot be used (logged once per change)."""
        files = self._files()
        if self._read is not None and self._read[0] == files and time.monotonic() - self._read[1] < DUE_DATES_SECONDS:
            return self._deadlines
        try:
            self._deadlines = Deadlines(self.course, db_url=self.db_url)
        except DeadlinesError as exc:
            if self._read is None or self._read[0] != files:
                self.log.error("the course's deadlines cannot be read (%s): attempts are graded as if the "
                               "assignment had no late policy until it is fixed", exc)
            self._deadlines = None
        self._read = (files, time.monotonic())
        return self._deadlines

    def standing(self, assignment: str, student: str, received: dt.datetime) -> Standing | None:
        deadlines = self.deadlines()
        return None if deadlines is None else deadlines.standing(assignment, student, received, received)

    def kept(self, score: float, assignment: str, student: str, received: dt.datetime) -> float:
        """What is left of ``score`` after the late penalty of an attempt received at ``received``."""
        found = self.standing(assignment, student, received)
        return score if found is None else score * (1 - found.penalty_percent / 100)

    def publish(self, assignment: str, student: str) -> None:
        deadlines = self.deadlines()
        if deadlines is None:
            return
        try:
            publish(self.course, assignment, student, dt.datetime.now(dt.timezone.utc), deadlines=deadlines,
                    exchange_root=self.exchange_root, course_id=self.course_id)
        except OSError as exc:  # the attempt stands; the file is written again at the next change
            self.log.warning("%s: deadline file of %s not written (%s)", student, assignment, exc.strerror)

    def publish_if_changed(self) -> None:
        """Every student's deadline files of each assignment whose deadlines changed: all of them when the
        late policies or the extensions changed (and at start), else those whose due date changed."""
        files, due = self._files(), read_due_dates(self.db_url)
        if self._published == (files, due):
            return
        if self._published is None or self._published[0] != files:
            changed = sorted(due)
        else:
            published_due = self._published[1]
            changed = sorted(name for name, when in due.items() if name not in published_due or published_due[name] != when)
        self._published = (files, due)
        self._read = None  # the due dates held may be older than those just read
        deadlines = self.deadlines()
        if deadlines is None:
            return
        at = dt.datetime.now(dt.timezone.utc)
        for assignment in changed:
            written = publish_all(self.course, assignment, at, exchange_root=self.exchange_root,
                                  course_id=self.course_id, deadlines=deadlines)
            self.log.info("deadline files of %s written for %d students", assignment, written)
