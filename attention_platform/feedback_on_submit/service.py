"""The feedback-on-submit grader: a process of the course's grader account beside the formgrader.

    attention-course feedback-on-submit --course COURSE_DIR --exchange EXCHANGE_ROOT

One coordinating thread and ``c.FeedbackOnSubmit.workers`` grading threads:

* **watch** — every ``poll_seconds`` it looks at each student's inbound folder (``inbound/<student>/``:
  the folder is the student's identity, as for the TA's collect; a submission whose name claims
  someone else is skipped) and lists a folder only when it changed. A new submission of an
  assignment whose policy is on is copied at once (:mod:`.intake`): the grader grades, keeps and
  installs only its own copy, timed by the kernel;
* **decide** — the instructor's rule (:mod:`attention_platform.attempts.policy`) over the student's
  graded and queued attempts: the attempt is queued, or refused with the time the next graded
  attempt is possible; either way it gets a row in the gradebook
  (:mod:`attention_platform.attempts.ledger`) and the student's status is rewritten;
* **queue** — :class:`.fairqueue.FairQueue`: students take turns, one attempt each in grading;
* **grade** — a worker grades the attempt (:mod:`.engine`), writes the result the policy shows
  into the student's status at once, and sets the graded attempt aside (its files and a copy of its
  grades), which frees its student for their next attempt (up to ``SET_ASIDE_PER_STUDENT`` set aside);
  then, when no attempt is being graded (a
  result a student waits for never waits behind, or shares the cores with, someone's feedback pages),
  the rest: (``full``) the feedback pages (made by a niced process of their own, :mod:`.pages`), the
  archive, and for ``last``/``best`` the attempt that counts installed into the course, one student's
  attempts in the order they were graded;
* nothing is lost: a submission made while this process was down is graded when it is back
  (timed by the kernel), and so is one handed in before it first watched the assignment (the scan
  that starts watching an assignment lists every student's folder again), an attempt whose grading was cut short is graded again (once: an attempt
  whose grading ended this process twice is failed, with the reason), and an attempt that could
  not reach the sandbox broker waits in the queue until it can.

The policy is re-read within a second of the course's ``nbgrader_config.py`` changing; the
grading configuration itself when this process restarts (as the formgrader's).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import errno
import json
import logging
import os
import shutil
import signal
import stat
import threading
import time
import traceback
import uuid
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from attention_platform import start_up_gc
from attention_platform.exchange.submit import ExchangeLimits
from attention_platform.exchange.personal_release import MissingCopies
from attention_platform.course.assignment_checks import notebook_order

from attention_platform.attempts import status as status_file
from .engine import PARTS, Attempt, Engine
from .fairqueue import FairQueue
from .intake import Intake, IntakeError, collector, take
from .late_work import LateWork
from attention_platform.attempts.ledger import Ledger
from .pages import PageMaker
from attention_platform.attempts.policy import FeedbackOnSubmit, Policy, PolicyError, iso, now, until

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
COUNTING = status_file.COUNTING
# Times an attempt is graded again after the grader's process ended while grading it: once, in case
# something else ended it; an attempt that ends the grader again is failed.
GRADED_AGAIN_AFTER_A_CRASH = 1
STOPPED_THE_GRADER = ("Not graded: the grader stopped while grading this attempt, twice, so it is not graded again. "
                      "It counts as one of your graded attempts. This happens when a notebook makes the grader "
                      "use too much memory, for example by returning far more data than a check asks for; "
                      "fix that and submit again, and tell the course staff if you think your code is not the cause.")
RETRY_SECONDS = 5.0  # after the sandbox broker could not be reached
# One student's new submissions taken per scan (each is copied, recorded and told on the one scan
# thread): a pile of them made by hand delays nobody else's by more than this many copies.
TAKEN_PER_SCAN = 2
FINISH_WAIT_SECONDS = 20.0  # a graded attempt's pages wait at most this long for a pause in grading
# Graded attempts set aside and waiting for their pages (each with a copy of the scratch gradebook): a student
# with this many waits in the queue until one is finished, and so does everyone while the grader holds the
# second number. A student who submits without pause holds a few copies, never the disk.
SET_ASIDE_PER_STUDENT = 3
SET_ASIDE_IN_ALL = 64
# Since when an assignment the grader watches for the first time has feedback on submit: the beginning,
# so that what was handed in before the grader first looked (released while it was down, or submitted
# while it warmed up) is graded. Switched off and on again, it is on since the switch.
WATCHED_FROM_THE_START = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name and not name.startswith(".")


class Service:
    def __init__(self, course: Path, exchange_root: Path, *, log: logging.Logger | None = None):
        from nbgrader.api import Gradebook

        self.log = log or logging.getLogger("feedback-on-submit")
        self.course = Path(course).resolve()
        self.config_file = self.course / "nbgrader_config.py"
        self.settings = FeedbackOnSubmit()
        self._config_mtime = None
        self.policies: dict[str, Policy] = {}
        self.errors: dict[str, str] = {}
        self.warming = False  # the stop signal interrupts the warm-up (warm_up, main)
        self.collect = None  # set by reload(); with no loadable config there is no policy, so nothing is taken
        self.limits = ExchangeLimits()  # the course's, set by reload(): what one student's intake may cost
        self.reload(force=True)
        self.engine = Engine(self.course, attempt_seconds=self.settings.attempt_seconds, log=self.log)
        self.course_id = self.engine.course_id
        self.exchange = Path(exchange_root) / self.course_id
        self.engine.exchange_feedback = self.exchange / "feedback"
        self.late_work = LateWork(self.course, Path(exchange_root), self.course_id, self.engine.main.db_url, self.log)
        coursedir = self.engine.main.coursedir

        def release_dir(assignment: str) -> str:
            return coursedir.format_path(coursedir.release_directory, ".", assignment)

        self.own_copies = MissingCopies(exchange_root, self.course_id, self.course, release_dir, self.log)
        with Gradebook(self.engine.main.db_url, self.course_id):
            pass  # nbgrader creates (and stamps) its gradebook before our tables join it
        self.ledger = Ledger(self.engine.main.db_url, remember=True)  # the one writer of the attempts
        self.queue: FairQueue = FairQueue()
        self.workers = max(1, self.settings.workers)
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="attempt")
        self.running: dict = {}  # future -> Attempt
        self.grading: set = set()  # the futures of self.running that grade (the others finish)
        self.finishing: collections.deque = collections.deque()  # (Attempt, Result, graded at) pages etc. to do
        self.set_aside: collections.Counter = collections.Counter()  # student -> their attempts set aside, unfinished
        self.held: set = set()  # students kept busy in the queue until one of their set-aside attempts is finished
        self.seen: dict[str, set] = collections.defaultdict(set)  # assignment -> {(student, submission)}
        self.since: dict[str, dt.datetime] = {}  # assignment -> feedback on submit on since
        self.folder_mtimes: dict[str, int] = {}
        self.watched: set[str] = set()  # the assignments of the last scan
        self.shapes: dict[str, dict] = {}  # student -> {name: (ctime, holds a notebook)} of their new folders
        self.dropped: collections.Counter = collections.Counter()  # (assignment, student) -> not looked at
        self.notices: dict[tuple[str, str], str] = {}  # (assignment, student) -> what their status says of them
        self.told: dict[tuple[str, str], Policy] = {}  # (assignment, student) -> the policy their status shows
        self.status_locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self.paused_until = 0.0
        self.pages: PageMaker | None = None  # started with the loop (run())
        self.incoming = self.engine.work / "incoming"
        self.incoming.mkdir(mode=0o700, parents=True, exist_ok=True)

    # ------------------------------------------------------------------ the instructor's policy
    def reload(self, force: bool = False) -> None:
        """Re-read the course's policies when its nbgrader_config.py or the formgrader's saved policies changed."""
        from attention_platform.attempts import policy_store
        from attention_platform.attempts.policy import load_config

        mtime = []
        for changes in (self.config_file, policy_store.path(self.course)):
            try:
                mtime.append(changes.stat().st_mtime_ns)
            except OSError:
                mtime.append(None)
        if not force and mtime == self._config_mtime:
            return
        self._config_mtime = mtime
        try:
            config = load_config(self.course)
            settings = FeedbackOnSubmit(config=config)
        except Exception as exc:  # noqa: BLE001 - a broken config file: keep the last good policies
            self.log.error("the course's nbgrader_config.py or saved policies cannot be loaded (%s); feedback on "
                           "submit keeps the policies it had", exc)
            return
        policies, errors = {}, {}
        for assignment in settings.assignments() or [None]:
            try:
                if assignment is None:
                    settings.policy_for("")  # only to report a broken $ATTENTION_FEEDBACK_ON_SUBMIT
                    continue
                policies[assignment] = settings.policy_for(assignment)
            except PolicyError as exc:
                errors[assignment or "*"] = str(exc)
                self.log.error("%s; that assignment gets no feedback on submit until it is fixed", exc)
        if policies != self.policies:
            for assignment, policy in sorted(policies.items()):
                self.log.info("policy of %s: %s", assignment, policy.describe())
        self.settings, self.policies, self.errors = settings, policies, errors
        self.collect = collector(config)  # the TA's collect copies each attempt (its limits, its time)
        self.limits = ExchangeLimits(parent=self.collect)

    def policy(self, assignment: str) -> Policy:
        return self.policies.get(assignment) or Policy(assignment)

    def enabled_since(self, assignment: str) -> dt.datetime | None:
        """Since when the assignment has feedback on submit (recorded the first time it is seen on)."""
        on = self.policy(assignment).on
        if on and assignment in self.since:
            return self.since[assignment]
        since = self.ledger.enabled_since(assignment, on, now(), first=WATCHED_FROM_THE_START)
        if on:
            self.since[assignment] = since
            self.seen[assignment] |= self.ledger.known(assignment)
        else:
            self.since.pop(assignment, None)
        return since

    # ------------------------------------------------------------------ watching the inbound folders
    def scan(self) -> int:
        """Take every new submission of an assignment with feedback on submit; returns how many."""
        assignments = [a for a, p in self.policies.items() if p.on and self.enabled_since(a) is not None]
        for assignment in set(self.since) - set(assignments):
            self.enabled_since(assignment)  # switched off: recorded, so switching on again starts afresh
        if not set(assignments) <= self.watched:
            self.folder_mtimes.clear()  # a newly watched assignment's submissions sit in unchanged folders too
        self.watched = set(assignments)
        if not assignments:
            return 0
        inbound = self.exchange / "inbound"
        try:
            inbound_fd = os.open(inbound, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            self.log.error("cannot open %s (%s): no submission can be seen", inbound, exc.strerror)
            return 0
        found = 0
        try:
            with os.scandir(inbound_fd) as entries:
                students = [(e.name, e.stat(follow_symlinks=False)) for e in entries if plain_name(e.name)]
            for student, info in sorted(students):
                if not stat.S_ISDIR(info.st_mode):
                    continue
                for assignment in assignments:  # the terms, before the student's first submit and when they change
                    if self.told.get((assignment, student)) != self.policies.get(assignment):
                        self.write_status(assignment, student)
                recent = time.time() - info.st_mtime_ns / 1e9 < 2  # a coarse clock tick may hide a second change
                if self.folder_mtimes.get(student) == info.st_mtime_ns and not recent:
                    continue
                self.folder_mtimes[student] = info.st_mtime_ns
                try:
                    found += self._scan_student(inbound_fd, student, assignments)
                except OSError as exc:
                    self.log.warning("%s: inbound folder cannot be read (%s)", student, exc.strerror)
        finally:
            os.close(inbound_fd)
        return found

    def _scan_student(self, inbound_fd: int, student: str, assignments: list[str]) -> int:
        """Take at most TAKEN_PER_SCAN of the student's new submissions, and none while
        ``max_kept_submissions`` of their attempts wait in the queue; a folder that holds no notebook
        is no submission: it gets no row, and the student's status says how many there are. Linear
        in the folder's entries, of which at most ``student_quota_entries`` are read."""
        folder_fd = os.open(student, OPEN_DIR, dir_fd=inbound_fd)
        try:
            shapes, self.shapes[student] = self.shapes.get(student, {}), {}
            new, no_submission, held = [], collections.Counter(), collections.Counter()
            for name in listing(folder_fd, self.limits.student_quota_entries):
                parts = name.split("+")
                if name.startswith(".") or len(parts) < 3 or parts[1] not in assignments:
                    continue
                assignment = parts[1]
                if (student, name) in self.seen[assignment]:
                    continue
                if parts[0] != student:
                    self.seen[assignment].add((student, name))
                    self.log.warning("%s: skipped %r: it names student %r but sits in this student's folder",
                                     student, name, parts[0])
                    continue
                if not self._is_submission(folder_fd, name, shapes, self.shapes[student]):
                    no_submission[assignment] += 1  # looked at again only when it changes
                    continue
                new.append((parts[2], assignment, name))
            taken = 0
            for _claim, assignment, name in sorted(new):
                if len(self.queue.waiting(student)) >= self.limits.max_kept_submissions:
                    held[assignment] += 1
                    continue
                if taken >= TAKEN_PER_SCAN:
                    break
                self.seen[assignment].add((student, name))
                taken += 1
                if self._ungraded_lately(assignment, student) >= self.limits.max_kept_submissions:
                    self.dropped[(assignment, student)] += 1  # no row, no copy: counted in their status
                    continue
                self._take(folder_fd, student, assignment, name)
            just_made = time.time_ns() - 2_000_000_000
            filling = any(not verdict and ctime > just_made for ctime, verdict in self.shapes[student].values())
            if len(new) > taken or filling:
                # the rest is looked at in the next scans, and so is a folder still being filled by hand
                # (files made inside it do not change the student's folder, which is listed only when it changes)
                self.folder_mtimes.pop(student, None)
            for assignment in assignments:
                self._notice(assignment, student, no_submission[assignment], held[assignment])
            return taken
        finally:
            os.close(folder_fd)

    def _is_submission(self, folder_fd: int, name: str, known: dict, shapes: dict) -> bool:
        """Whether ``name`` is a folder with a notebook in it, from ``known`` (name: (ctime, verdict))
        while its ctime is the same; the verdict is kept in ``shapes``."""
        try:
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        ctime, verdict = known.get(name, (None, False))
        if ctime != info.st_ctime_ns:
            verdict = stat.S_ISDIR(info.st_mode) and holds_notebook(folder_fd, name,
                                                                    self.limits.max_submission_entries)
        shapes[name] = (info.st_ctime_ns, verdict)
        return verdict

    def _ungraded_lately(self, assignment: str, student: str) -> int:
        """The student's attempts of the last 24 hours that were refused or could not be graded."""
        recent = now() - dt.timedelta(hours=24)
        return sum(1 for row in self.ledger.attempts(assignment, student)
                   if row["state"] in ("refused", "not graded") and row["received_at"] > recent)

    def _notice(self, assignment: str, student: str, no_submission: int, held: int) -> None:
        """What the student's status says about folders that were not taken (rewritten when it changes)."""
        lines = []
        dropped = self.dropped.get((assignment, student), 0)
        if dropped:
            lines.append(f"{dropped:,} of your submissions were not looked at: {self.limits.max_kept_submissions} "
                         "of yours could not be graded in the last 24 hours, the most the grader records. Wait "
                         "for your next graded attempt and submit from your Assignments tab.")
        if no_submission:
            lines.append(f"{no_submission:,} folders in your inbound folder are not submissions (no notebook in them): "
                         "they were not graded. Submit from your Assignments tab to have your work graded."
                         if no_submission > 1 else
                         "1 folder in your inbound folder is not a submission (no notebook in it): it was not "
                         "graded. Submit from your Assignments tab to have your work graded.")
        if held:
            lines.append(f"{held:,} of your submissions wait until your queued attempts are graded (at most "
                         f"{self.limits.max_kept_submissions} wait at once).")
        text = " ".join(lines)
        if self.notices.get((assignment, student), "") != text:
            self.notices[(assignment, student)] = text
            self.write_status(assignment, student)

    def _take(self, folder_fd: int, student: str, assignment: str, name: str) -> None:
        policy = self.policy(assignment)
        since = self.since[assignment]
        try:
            top = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if top.st_ctime_ns / 1e9 < since.timestamp() - 60:
            return  # from before feedback on submit was on (its ctime can only be later than its making)
        copy = self.incoming / f".new-{uuid.uuid4().hex}"
        try:
            intake = take(self.collect, folder_fd, student, name, copy)
        except FileNotFoundError:
            return
        except IntakeError as exc:
            received = now()
            self.ledger.add(assignment=assignment, student=student, submission=name, claimed=name.split("+")[2][:64],
                            received_at=received, state="not graded", feedback=policy.feedback,
                            message=f"Not graded: {exc}.")
            self.write_status(assignment, student)
            return
        except OSError as exc:
            self.log.error("%s: %r cannot be read (%s); it is looked at again when the folder changes",
                           student, name, exc.strerror)
            self.seen[assignment].discard((student, name))
            self.folder_mtimes.pop(student, None)
            return
        received = intake.received
        if received < since:
            shutil.rmtree(copy, ignore_errors=True)
            return
        started, attempt = time.monotonic(), None
        with self.status_locks[student]:
            rows = self.ledger.attempts(assignment, student)
            counting = [r["received_at"] for r in rows if r["state"] in COUNTING]
            next_at = policy.next_allowed(counting, received)
            values = dict(assignment=assignment, student=student, submission=name,
                          claimed=intake.claim[:64], received_at=received,
                          timestamp=intake.timestamp, feedback=policy.feedback)
            standing = self.late_work.standing(assignment, student, received)
            if standing is not None and not standing.counts:
                self.ledger.add(**values, state="refused", message=standing.refusal())
                shutil.rmtree(copy, ignore_errors=True)
                self.log.info("%s: %s not counted: received after %s closed to them", student, name, assignment)
            elif next_at is not None:
                message = "Not graded: " + policy.refusal(counting, received, next_at) + "."
                self.ledger.add(**values, state="refused", message=message)
                shutil.rmtree(copy, ignore_errors=True)
                self.log.info("%s: %s refused (%s)", student, name, message)
            else:
                notes = "; ".join(intake.notes[:5])
                attempt_id = self.ledger.add(**values, state="queued", message=notes)
                os.rename(copy, self.incoming / str(attempt_id))
                intake.folder = self.incoming / str(attempt_id)
                attempt = Attempt(attempt_id, assignment, student, name, intake, values["timestamp"], policy)
                self.queue.put(student, attempt)
                self.log.info("%s: %s queued as attempt %d (received %s)", student, name, attempt_id, iso(received))
        self.write_status(assignment, student)
        if attempt is not None:
            attempt.parts["status and ledger"] = time.monotonic() - started

    # ------------------------------------------------------------------ grading
    def dispatch(self) -> None:
        """Start grading while workers are free: first attempts waiting to be graded (fair between
        students), then the unhurried rest of attempts already graded (pages, archive, what counts)
        once no attempt is being graded, so that a result a student waits for never waits for, nor
        shares the cores with, another student's feedback pages. A graded attempt whose rest has
        waited ``FINISH_WAIT_SECONDS`` goes ahead anyway, one at a time, so that a steady stream of
        submissions cannot hold pages back for ever."""
        while len(self.running) < self.workers:
            taken = self.queue.take() if time.monotonic() >= self.paused_until else None
            if taken is not None:
                student, attempt = taken
                with spent(attempt.parts, "status and ledger"):
                    self.ledger.set(attempt.id, state="grading")
                    self.write_status(attempt.assignment, student)
                # the operator's record of which attempt a grader that dies was grading
                self.log.info("%s: attempt %d grading", student, attempt.id)
                future = self.pool.submit(self.work, attempt)
                self.running[future] = attempt
                self.grading.add(future)
            elif self.finishing and self._may_finish() and (next_one := self._next_to_finish()) is not None:
                attempt, result, _ = next_one
                self.running[self.pool.submit(self.finish, attempt, result)] = attempt
            else:
                return

    def _next_to_finish(self):
        """The oldest graded attempt waiting to be finished whose student has none being finished: one
        student's attempts are finished in the order they were graded (the last graded one counts last)."""
        finishing_now = {(a.assignment, a.student) for f, a in self.running.items() if f not in self.grading}
        for index, entry in enumerate(self.finishing):
            if (entry[0].assignment, entry[0].student) not in finishing_now:
                del self.finishing[index]
                return entry
        return None

    def _may_finish(self) -> bool:
        return may_finish(grading=len(self.grading), finishing=len(self.running) - len(self.grading),
                          oldest_waited=time.monotonic() - self.finishing[0][2])

    def work(self, attempt: Attempt):
        """In a worker thread: grade and tell the student at once. Returns ``("graded", result)``
        (then :meth:`finish` follows), ``"retry"`` or ``"error"``."""
        from attention_platform.grading.sandbox.client import SandboxUnavailable

        try:
            result = self.engine.grade(attempt)
        except SandboxUnavailable as exc:
            self.ledger.set(attempt.id, state="queued",
                            message=f"Waiting for the grader: {exc.reason}. Your attempt stays in the queue.")
            self.write_status(attempt.assignment, attempt.student)
            self.log.error("attempt %d waits: %s", attempt.id, exc.reason)
            return "retry"
        except Exception as exc:  # noqa: BLE001 - this attempt alone; it uses none of the student's allowance
            self.log.error("attempt %d (%s) failed:\n%s", attempt.id, attempt.student, traceback.format_exc())
            self.ledger.set(attempt.id, state="error", graded_at=now(),
                            message=f"Could not be graded because of an error in the grader ({type(exc).__name__}); "
                                    "it does not count as one of your graded attempts. Submit again, and tell the "
                                    "course staff if this happens again.")
            self.write_status(attempt.assignment, attempt.student)
            return "error"
        notes = "; ".join(attempt.intake.notes[:5] + result.notes)
        with spent(attempt.parts, "status and ledger"):
            self.ledger.set(attempt.id, state="graded", graded_at=now(), seconds=result.seconds, score=result.score,
                            max_score=result.max_score, checks=result.checks, message=notes)
            self.write_status(attempt.assignment, attempt.student)  # the student sees the result now
        with spent(attempt.parts, "archive and install"):
            try:
                self.engine.set_aside(attempt)  # their next attempt need not wait for these pages
            except Exception:  # noqa: BLE001 - it stays in the scratch course; the student waits for its pages
                self.log.error("attempt %d not set aside:\n%s", attempt.id, traceback.format_exc())
        self.log.info("%s: attempt %d graded in %.2f s: %g/%g", attempt.student, attempt.id, result.seconds,
                      result.score, result.max_score)
        return "graded", result

    def finish(self, attempt: Attempt, result) -> str:
        """In a worker thread, once graded: feedback pages, archive, install what counts, from where the
        attempt was set aside (if it could not be, from the scratch course: then its student stays busy
        in the queue until this is done)."""
        parts = attempt.parts
        if attempt.policy.feedback == "full":
            with spent(parts, "feedback pages"):
                self.pages.make(attempt, result)
            with spent(parts, "status and ledger"):
                self.ledger.set(attempt.id, pages=result.pages,
                                message="; ".join(attempt.intake.notes[:5] + result.notes))
        with spent(parts, "archive and install"):
            self.engine.archive(attempt)
            self._count(attempt, result)
            self._prune(attempt.assignment, attempt.student)
        with spent(parts, "status and ledger"):
            self.write_status(attempt.assignment, attempt.student)
            self.late_work.publish(attempt.assignment, attempt.student)  # the late days it spent
        parts = {**result.parts, **parts}
        self.log.info("%s: attempt %d's time: %s", attempt.student, attempt.id,
                      json.dumps({part: round(parts.get(part, 0.0), 4) for part in PARTS}))
        self.log.info("%s: attempt %d's sandbox time by notebook: %s", attempt.student, attempt.id,
                      json.dumps({name: round(seconds, 4) for name, seconds in result.sandbox_by_notebook.items()}))
        return "graded"

    def _count(self, attempt: Attempt, result) -> None:
        """Under ``last`` or ``best``, make this attempt the course's submission if it counts now."""
        counts = attempt.policy.counts
        if counts not in ("last", "best"):
            return
        rows = [r for r in self.ledger.attempts(attempt.assignment, attempt.student) if r["state"] == "graded"]
        current = next((r for r in rows if r["counted"]), None)
        kept = self.late_work.kept  # what a late attempt's penalty leaves of its score
        if counts == "best" and current is not None and current["id"] != attempt.id and \
                kept(float(current["score"] or 0), attempt.assignment, attempt.student, current["received_at"]) > \
                kept(result.score, attempt.assignment, attempt.student, attempt.intake.received):
            # A better one counts (among equals, the newest: the student's latest work) for the checks'
            # points; the TA grades the written answers the student last wrote: this attempt's.
            self.engine.install(current["id"], attempt.student, attempt.assignment,
                                current["timestamp"] or current["received_at"], written_from=attempt.id)
            self.log.info("%s: attempt %d still counts, with the written answers of attempt %d", attempt.student,
                          current["id"], attempt.id)
            return
        self.engine.install(attempt.id, attempt.student, attempt.assignment, attempt.timestamp)
        self.ledger.set_counted(attempt.assignment, attempt.student, attempt.id)
        self.log.info("%s: attempt %d now counts (%s)", attempt.student, attempt.id, counts)

    def _prune(self, assignment: str, student: str) -> None:
        rows = [r for r in self.ledger.attempts(assignment, student) if r["state"] == "graded"]
        keep = {r["id"] for r in rows if r["counted"]} | {r["id"] for r in rows[-self.settings.keep_attempt_files:]}
        removed = set(self.engine.prune(student, assignment, keep))
        if not removed:
            return
        try:
            fd = os.open(self.exchange / "feedback" / student, OPEN_DIR)
        except OSError:
            return
        try:
            for row in rows:
                if row["id"] in removed:
                    for page in row["pages"].values():
                        try:
                            os.unlink(page, dir_fd=fd)
                        except OSError:
                            pass
        finally:
            os.close(fd)

    def completed(self, future) -> None:
        attempt = self.running.pop(future)
        graded_now = future in self.grading
        self.grading.discard(future)
        try:
            outcome = future.result()
        except Exception:  # noqa: BLE001 - work() reports its own failures; this is a bug in reporting
            self.log.error("attempt %d: %s", attempt.id, traceback.format_exc())
            outcome = "error"
        student = attempt.student
        if isinstance(outcome, tuple):  # graded: the rest follows when a worker is free
            if attempt.aside is not None:  # its files are out of the scratch course: the student's next may go
                self.set_aside[student] += 1
                if self.set_aside[student] < SET_ASIDE_PER_STUDENT and sum(self.set_aside.values()) < SET_ASIDE_IN_ALL:
                    self.queue.done(student)
                else:
                    self.held.add(student)
            self.finishing.append((attempt, outcome[1], time.monotonic()))
            return
        if not graded_now and attempt.aside is not None:  # a set-aside attempt finished
            self.set_aside[student] -= 1
            if not self.set_aside[student]:
                del self.set_aside[student]
            if student in self.held:
                self.held.discard(student)
                self.queue.done(student)
        else:
            self.queue.done(student)
        if outcome == "retry":
            self.queue.retry(student, attempt)
            self.paused_until = time.monotonic() + RETRY_SECONDS

    # ------------------------------------------------------------------ what the student sees
    def status_of(self, assignment: str, student: str) -> dict:
        policy = self.policy(assignment)
        rows = self.ledger.attempts(assignment, student)
        counting = [r["received_at"] for r in rows if r["state"] in COUNTING]
        at = now()
        next_at = policy.next_allowed(counting, at) if policy.on else None
        attempts = []
        for row in rows:
            shown = row["feedback"] in ("checks", "full") and row["state"] == "graded"
            entry = {"submission": row["submission"], "timestamp": row["claimed"], "received": iso(row["received_at"]),
                     "state": row["state"], "message": row["message"], "counted": bool(row["counted"])}
            if shown:
                entry.update(score=row["score"], max_score=row["max_score"], graded=iso(row["graded_at"]),
                             checks=[{k: c[k] for k in ("notebook", "title", "passed", "points", "started") if k in c}
                                     for c in row["checks"]])
                if row["feedback"] == "full":
                    entry["pages"] = row["pages"]
            if row["state"] in COUNTING:
                standing = self.late_work.standing(assignment, student, row["received_at"])
                if standing is not None and standing.late_note():
                    entry["late"] = standing.late_note()
            if row["state"] == "queued":
                ahead = self.queue.position(student)
                entry["ahead"] = ahead if ahead is not None else 0
            attempts.append(entry)
        return {
            "assignment": assignment, "updated": iso(at), "policy": policy.to_json(),
            "notebooks": list(notebook_order(assignment)),  # the order students work through them, part 1 first
            "enabled_since": iso(self.since.get(assignment)),
            "next_graded_attempt": iso(next_at),
            "next_text": (f"Your next graded attempt is possible at {next_at.strftime('%Y-%m-%d %H:%M UTC')} "
                          f"(in {until(next_at, at)})." if next_at else ""),
            "attempts": attempts,
            "notice": self.notices.get((assignment, student), ""),
        }

    def write_status(self, assignment: str, student: str) -> None:
        with self.status_locks[student]:
            status = self.status_of(assignment, student)
            self.told[(assignment, student)] = self.policies.get(assignment)
            try:
                fd = os.open(self.exchange / "feedback" / student, OPEN_DIR)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    self.log.warning("%s: feedback folder cannot be opened (%s)", student, exc.strerror)
                return
            try:
                status_file.write(fd, assignment, status)
            finally:
                os.close(fd)

    # ------------------------------------------------------------------ starting again
    def recover(self) -> None:
        """Attempts queued, in grading or not finished when this process last stopped are queued again."""
        self.engine.forget_set_aside()  # an attempt not finished is graded again from its intake copy
        for assignment, policy in self.policies.items():
            if not policy.on or self.enabled_since(assignment) is None:
                continue
            for row in self.ledger.attempts(assignment):
                # graded but not yet archived (its copy is still in incoming/): the rest was cut short
                # (pages, what counts), so it is graded again, with the same result
                unfinished = row["state"] == "graded" and (self.incoming / str(row["id"])).is_dir()
                if row["state"] not in ("queued", "grading") and not unfinished:
                    continue
                folder = self.incoming / str(row["id"])
                if row["state"] == "grading" and self.ledger.interrupted(row["id"]) > GRADED_AGAIN_AFTER_A_CRASH:
                    self.ledger.set(row["id"], state="failed", graded_at=now(), message=STOPPED_THE_GRADER)
                    self.write_status(assignment, row["student"])
                    shutil.rmtree(folder, ignore_errors=True)
                    self.log.warning("%s: attempt %d failed: the grader stopped twice while grading it",
                                     row["student"], row["id"])
                    continue
                if not folder.is_dir():
                    self.ledger.set(row["id"], state="error",
                                    message="Its copy was lost while the grader restarted; it does not count as one "
                                            "of your graded attempts. Submit again.")
                    self.write_status(assignment, row["student"])
                    continue
                intake = Intake(folder=folder, newest_ctime_ns=int(row["received_at"].timestamp() * 1e9),
                                claim=row["claimed"])
                secret = folder / "submission_secret.txt"
                if secret.is_file():
                    intake.secret = secret.read_text(errors="replace").strip()[:4096]
                self.ledger.set(row["id"], state="queued")
                self.queue.put(row["student"], Attempt(row["id"], assignment, row["student"], row["submission"],
                                                       intake, row["timestamp"] or row["received_at"], policy))
                self.log.info("%s: attempt %d queued again after a restart", row["student"], row["id"])
        for leftover in self.incoming.glob(".new-*"):
            shutil.rmtree(leftover, ignore_errors=True)

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event) -> None:
        self.engine.start()
        self.pages = PageMaker(self.engine, self.log)
        last_reload = 0.0
        warm = False
        try:
            self.warm_up(stop)
            warm = True
            self.recover()
            self.log.info("feedback on submit: watching %s (%d workers)", self.exchange / "inbound", self.workers)
            while not stop.is_set():
                if time.monotonic() - last_reload > 1.0:
                    self.reload()
                    try:
                        self.late_work.publish_if_changed()
                    except Exception:  # noqa: BLE001 - the students' files are written again at the next change
                        self.log.error("deadline files not written:\n%s", traceback.format_exc())
                    try:
                        self.own_copies.write_missing()
                    except Exception:  # noqa: BLE001 - the copies still missing are looked for again next time
                        self.log.error("students' own copies not written:\n%s", traceback.format_exc())
                    last_reload = time.monotonic()
                try:
                    self.scan()
                except Exception:  # noqa: BLE001 - keep watching; the next scan tries again
                    self.log.error("scan failed:\n%s", traceback.format_exc())
                self.dispatch()
                if self.running:
                    done, _ = wait(list(self.running), timeout=self.settings.poll_seconds, return_when=FIRST_COMPLETED)
                    for future in done:
                        self.completed(future)
                    self.dispatch()
                else:
                    stop.wait(self.settings.poll_seconds)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pages.close(at_once=not warm)  # before the warm-up ended, no page is being made
            for future in list(self.running):
                if future.done():
                    self.completed(future)
            self.engine.close()
            self.ledger.close()

    def warm_up(self, stop: threading.Event) -> None:
        """What the first attempts would otherwise wait for (Engine.warm). While it runs, the stop
        signal raises StoppedWhileWarming (main): a head start is not worth finishing before a stop."""
        from attention_platform.grading.sandbox.client import SandboxUnavailable

        self.log.info("feedback on submit: warming up (torch, the checks' pictures, a sandbox worker)")
        self.warming = True
        try:
            if stop.is_set():  # told to stop before the signal could interrupt the warm-up
                raise StoppedWhileWarming
            self.engine.warm([a for a, p in self.policies.items() if p.on])
            self.log.info("feedback on submit: warmed up")
        except SandboxUnavailable as exc:
            self.log.error("the sandbox broker cannot be reached yet (%s); attempts wait in the queue", exc.reason)
        finally:
            self.warming = False
            start_up_gc.resume()  # paused by main()


class StoppedWhileWarming(BaseException):
    """The grader was told to stop during its warm-up (a BaseException, as KeyboardInterrupt is, so
    that no ``except Exception`` in the warm-up keeps it from stopping)."""


def listing(folder_fd: int, most: int) -> list[str]:
    """The first ``most`` names in the folder open at ``folder_fd``."""
    names = []
    with os.scandir(folder_fd) as entries:
        for entry in entries:
            if len(names) >= most:
                break
            names.append(entry.name)
    return names


def holds_notebook(folder_fd: int, name: str, most: int) -> bool:
    """Whether the folder ``name`` (never followed) holds a notebook among its first ``most`` entries."""
    try:
        fd = os.open(name, OPEN_DIR, dir_fd=folder_fd)
    except OSError:
        return False
    try:
        with os.scandir(fd) as entries:
            for count, entry in enumerate(entries):
                if count >= most:
                    return False
                if entry.name.endswith(".ipynb") and entry.is_file(follow_symlinks=False):
                    return True
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def spent(parts: dict, part: str):
    """Adds the block's wall time to ``parts[part]``."""
    started = time.monotonic()
    try:
        yield
    finally:
        parts[part] = parts.get(part, 0.0) + time.monotonic() - started


def may_finish(*, grading: int, finishing: int, oldest_waited: float) -> bool:
    """Whether a free worker may start the rest of a graded attempt (pages, archive, what counts)
    while ``grading`` attempts are graded and ``finishing`` others are finished, the oldest graded
    attempt having waited ``oldest_waited`` seconds: see :meth:`Service.dispatch`."""
    if grading == 0:
        return True
    return finishing == 0 and oldest_waited >= FINISH_WAIT_SECONDS


def main(course: Path, exchange: Path) -> int:
    start_up_gc.pause()  # until the grader is warm (Service.run)
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s feedback-on-submit] %(message)s")
    log = logging.getLogger("feedback-on-submit")
    for noisy in ("traitlets", "nbgrader"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    stop = threading.Event()
    service = None

    def stopping(*_) -> None:
        stop.set()
        if service is not None and service.warming:
            raise StoppedWhileWarming

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopping)
    service = Service(course, exchange, log=log)
    os.chdir(service.engine.work)  # nbgrader's converters chdir to the course they convert: ours is this one
    try:
        service.run(stop)
    except StoppedWhileWarming:
        log.info("feedback on submit: stopped while warming up")
    return 0
