"""A per-student exchange layout for nbgrader's pluggable exchange (grader side only).

Stock nbgrader keeps every submission in one shared ``inbound/`` folder and all
feedback in one ``feedback/`` folder. When every account or container has the same
UID, anyone can then read and overwrite anyone's work (nbgrader #1225, #1885).
Here each student owns one folder in each::

    <root>/<course>/outbound/<assignment>/          released files (students: read-only)
    <root>/<course>/inbound/<student>/<student>+<assignment>+<timestamp>+<random>/
    <root>/<course>/feedback/<student>/<hash>.html

The hub creates these folders (attention_platform/exchange/exchange_layout.py); the grader
writes only into ``outbound/`` and ``feedback/<student>/``. A student is given a *view*
of the exchange in which ``inbound`` and ``feedback`` are their own folders (a bind
mount in Docker, a symlink natively), so the student side runs stock nbgrader but for
its submit. The folder a submission sits in is the identity that counts: a submission
whose name claims another student is skipped.

Everything inside a student's inbound folder was written by that student, possibly by
hand. ``PerStudentCollect`` therefore:

* copies regular files only, each opened relative to its folder's descriptor with
  ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat``: symbolic links, named pipes,
  devices, sockets, files that belong to someone else (hard links) and other mounted
  file systems are skipped, each in one line of the log;
* reads within limits (``ExchangeLimits``): bytes per file, bytes and entries per
  submission, folder depth, entries and submissions per student;
* takes a submission's time from the kernel, not from the student: the newest inode
  change time (``ctime``, which only the kernel sets and no ``utime``/``touch``/rename
  moves backwards) over the submission folder and everything in it. The student's
  ``timestamp.txt`` and folder name are claims: a claim that the kernel's time
  corroborates (at most ``claim_tolerance`` seconds earlier, the time an honest submit
  takes to copy) is kept as written, because it is what the student was shown; any
  other claim is replaced by the kernel's time and reported;
* costs a student with a broken or hostile submission their own submission only: every
  other student is still collected.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fnmatch
import glob
import os
import pwd
import re
import secrets
import shutil
import stat
import traceback
from dataclasses import dataclass, field

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.list import ExchangeList
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.utils import check_mode, notebook_hash, parse_utc
from traitlets import Float, Integer

from attention_platform.exchange.exchange_layout import is_plain_name, kind_of, open_dir, pass_through
from attention_platform.exchange.submit import ExchangeLimits
from attention_platform.lms.outbox import note_release

OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
CREATE_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# What the student claims (timestamp.txt) is a short line; anything longer is not a time.
MAX_CLAIM_BYTES = 128
# The secret naming a student's feedback file is 128 hex characters when nbgrader wrote it.
MAX_SECRET_BYTES = 4096
# A claim may look later than the kernel's time by this much: ctime comes from the kernel's
# coarse clock (one tick behind), the claim from the fine one.
CLOCK_GRANULARITY_NS = 1_000_000_000


def show(name: str) -> str:
    """A student-chosen name as one safe log token (newlines, odd bytes and quotes escaped)."""
    return name if name.isprintable() and "'" not in name and '"' not in name else repr(name)


def utc(ns: int) -> dt.datetime:
    """Naive UTC, as nbgrader's gradebook and parse_utc use."""
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).replace(tzinfo=None)


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class GraderExchangeRoot:
    """The exchange's folders above the students' own ones are the hub's, made by root.

    Stock nbgrader insists on an exchange root it can write to (and would chmod it 0777);
    the grader needs only to pass through it.
    """

    def ensure_root(self):
        if not os.path.isdir(self.root):
            self.fail(f"The exchange {self.root} does not exist: the hub creates it when it starts.")
        if not check_mode(self.root, execute=True):
            self.fail(f"The grader may not enter the exchange {self.root}.")


class PerStudentReleaseAssignment(GraderExchangeRoot, ExchangeReleaseAssignment):
    """Release into ``outbound/``, and each student's own notebooks into their feedback folder where
    the assignment gives every student their own numbers (``personal_release``).

    Stock nbgrader forces the root to 0777 and wants to own the course and inbound
    folders; here root owns those and the grader owns ``outbound/`` only.
    """

    def ensure_root(self):
        if not os.path.exists(self.root):  # an exchange of the grader's own, outside the hub
            os.makedirs(self.root, mode=0o755)
        super().ensure_root()

    def init_dest(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.outbound_path = os.path.join(self.course_path, "outbound")
        self.inbound_path = os.path.join(self.course_path, "inbound")
        self.dest_path = os.path.join(self.outbound_path, self.coursedir.assignment_id)
        if not os.path.isdir(self.outbound_path):
            try:
                os.makedirs(self.outbound_path, mode=0o755)
            except OSError as exc:
                self.fail(f"Cannot create {self.outbound_path} ({exc.strerror}): the hub creates it when it starts.")
        if not check_mode(self.outbound_path, write=True, execute=True):
            self.fail(f"The grader may not write to {self.outbound_path}.")

    def copy_files(self):
        """The release, each student's deadline file, and each student's own notebooks where the
        assignment gives variants."""
        from attention_platform.exchange.personal_release import issue

        super().copy_files()
        self._publish_deadlines()
        issue(self.root, self.coursedir.course_id, self.coursedir.root, self.src_path,
              self.coursedir.assignment_id, self.log)

    def _publish_deadlines(self) -> None:
        """Each student's deadline file of the released assignment (attention_platform/deadlines): what
        their Lab shows beside it. The release stands if they cannot be written; the grader writes
        them again at the next change of a late policy or an extension."""
        from attention_platform.deadlines.student_file import publish_all

        try:
            written = publish_all(self.coursedir.root, self.coursedir.assignment_id, dt.datetime.now(dt.timezone.utc),
                                  db_url=self.coursedir.db_url, exchange_root=self.root,
                                  course_id=self.coursedir.course_id)
        except (ValueError, OSError) as exc:  # a deadlines file of the course that cannot be used, a full disk
            self.log.warning("The students' deadline files of %s were not written: %s", self.coursedir.assignment_id,
                             exc)
        else:
            self.log.info("Deadline files of %s written for %d students", self.coursedir.assignment_id, written)


class PerStudentList(GraderExchangeRoot, ExchangeList):
    """The grader's listing of released assignments (the formgrader checks the exchange with it).

    Stock listing insists on writing to the exchange root and the formgrader would then call the
    exchange missing; ``--remove`` (unrelease) removes from ``outbound/``, the grader's.
    """


# ---------------------------------------------------------------------------------------- collect
class Skip(Exception):
    """One entry of a submission is not collected; the message says why."""


@dataclass
class Tally:
    """What one walk over a submission saw."""

    newest_ctime_ns: int = 0
    entries: int = 0
    files: int = 0
    bytes: int = 0
    truncated: bool = False


@dataclass
class Candidate:
    name: str
    top_ctime_ns: int
    trusted_ns: int = 0
    claim: dt.datetime | None = None
    claim_text: str = ""
    tally: Tally = field(default_factory=Tally)

    @property
    def trusted(self) -> dt.datetime:
        return utc(self.trusted_ns)


class StudentReport:
    """At most ``limit`` problem lines per student, then a count: a student cannot flood the TA's log."""

    def __init__(self, log, student: str, limit: int):
        self.log, self.student, self.limit = log, student, limit
        self.lines: list[str] = []
        self.hidden = 0

    def problem(self, text: str) -> None:
        if len(self.lines) < self.limit:
            self.lines.append(text)
        else:
            self.hidden += 1

    def flush(self) -> None:
        for line in self.lines:
            self.log.warning("%s: %s", show(self.student), line)
        if self.hidden:
            self.log.warning("%s: %d more problems of the same kinds not listed", show(self.student), self.hidden)


class PerStudentCollect(GraderExchangeRoot, ExchangeCollect):
    """Collect the newest submission of each student from ``inbound/<student>/`` (see the module)."""

    claim_tolerance = Float(
        30.0,
        help="Seconds a submission's claimed time (its timestamp.txt, what the student was shown) may lie "
             "before the time the kernel recorded for it and still be kept as written. An honest submit "
             "stamps its claim just before copying, well under a second before the kernel's record even "
             "for a large submission, so 30 s leaves a wide margin. A claim outside it is replaced by the "
             "kernel's time and reported; the tolerance is also the most a forged claim can gain.",
    ).tag(config=True)

    max_problem_lines = Integer(
        20,
        help="Problems listed one line each per student and collect; further ones are only counted.",
    ).tag(config=True)

    # ------------------------------------------------------------------ sources
    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.limits = ExchangeLimits(parent=self)
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        try:
            root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                course_fd = pass_through(root_fd, self.coursedir.course_id)
            finally:
                os.close(root_fd)
            try:
                self._inbound_fd = open_dir(course_fd, "inbound")
            finally:
                os.close(course_fd)
        except PermissionError:
            self.fail("You don't have read permissions for the directory: {}".format(self.inbound_path))
        except OSError:
            self.fail("Course not found: {}".format(self.inbound_path))
        pattern = self.coursedir.student_id or "*"
        try:
            names = os.listdir(self._inbound_fd)  # folders the hub made, one per account: bounded by the class
        except PermissionError:
            self.fail("You don't have read permissions for the directory: {}".format(self.inbound_path))
        self.students = sorted(n for n in names if is_plain_name(n) and fnmatch.fnmatchcase(n, pattern))
        self.src_records = []  # nbgrader's name for what is collected; filled per student below
        # feedback on submit, policy last or best: these students' submission is the attempt that counts
        self.counted = counted_attempts(self.config, self.coursedir, self.coursedir.assignment_id)

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.deadlines = self._course_deadlines()

    def _course_deadlines(self):
        """The course's late policies and extensions (attention_platform/deadlines). A file of them that
        cannot be used stops the collect with what to do: collecting by rules other than the
        instructor's would count what should not."""
        from attention_platform.deadlines.standing import Deadlines, DeadlinesError

        try:
            return Deadlines(self.coursedir.root, db_url=self.coursedir.db_url)
        except DeadlinesError as exc:
            self.fail(f"The course's deadlines cannot be read, nothing was collected: {exc}")

    def _due_of(self, student: str) -> dt.datetime | None:
        """``student``'s own deadline (their extension, if later than the due date), naive UTC."""
        due = self.deadlines.effective_due(self.coursedir.assignment_id, student)
        return None if due is None else due.astimezone(dt.timezone.utc).replace(tzinfo=None)

    def _counting(self, student: str, considered: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
        """The submissions that count under the late policy, and those received after the assignment
        closed to ``student`` (judged at the exchange's time, never at a time the student wrote)."""
        assignment = self.coursedir.assignment_id
        if assignment not in self.deadlines.policies:
            return considered, []
        at = dt.datetime.now(dt.timezone.utc)
        judged = [(c, self.deadlines.standing(assignment, student, at, c.trusted)) for c in considered]
        return [c for c, found in judged if found.counts], [c for c, found in judged if not found.counts]

    def init_dest(self):
        pass

    def copy_files(self):
        assignment = self.coursedir.assignment_id
        collected = 0
        try:
            for student in self.students:
                report = StudentReport(self.log, student, self.max_problem_lines)
                try:
                    collected += self._collect_student(student, report)
                except Exception as exc:  # noqa: BLE001 - one student's submission never stops the batch
                    report.problem(f"not collected: {exc.__class__.__name__}: {exc}")
                    self.log.debug("collect of %s failed:\n%s", show(student), traceback.format_exc())
                finally:
                    report.flush()
        finally:
            os.close(self._inbound_fd)
        if not self.src_records:
            self.log.warning("No submissions of '{}' for course '{}' to collect".format(
                assignment, self.coursedir.course_id))
        else:
            self.log.info("Processed {} submissions of '{}' for course '{}' ({} copied)".format(
                len(self.src_records), assignment, self.coursedir.course_id, collected))

    # ------------------------------------------------------------------ one student
    def _collect_student(self, student: str, report: StudentReport) -> int:
        if student in self.counted:
            counts, received = self.counted[student]
            self.log.info("Keeping %s's submission of %s: under feedback on submit the attempt that counts ('%s') "
                          "is already there (received %s UTC); newer submissions that were not graded do not count",
                          show(student), self.coursedir.assignment_id, counts, received.strftime("%Y-%m-%d %H:%M:%S"))
            return 0
        try:
            folder_fd = open_dir(self._inbound_fd, student)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                report.problem("inbound folder is not a folder: skipped")
            else:
                report.problem(f"inbound folder cannot be opened ({exc.strerror}): skipped")
            return 0
        try:
            folder = os.fstat(folder_fd)
            try:
                candidates, others = self._candidates(student, folder_fd, report)
            except OSError as exc:
                report.problem(f"inbound folder cannot be read ({exc.strerror}): skipped")
                return 0
            if not candidates:
                return 0
            considered = self._time_candidates(folder_fd, folder, candidates, report)
            used_bytes = sum(c.tally.bytes for c in considered)
            used_entries = others + sum(c.tally.entries + 1 for c in considered)
            if used_bytes > self.limits.student_quota_bytes or used_entries > self.limits.student_quota_entries:
                report.problem("over the exchange quota: {} in {} entries (quota {} in {} entries)".format(
                    megabytes(used_bytes), used_entries, megabytes(self.limits.student_quota_bytes),
                    self.limits.student_quota_entries))
            if not considered:
                return 0
            due = self._due_of(student)
            for candidate in considered:
                self._check_claim(candidate, report)
            counting, closed = self._counting(student, considered)
            if closed:
                self.log.warning("%s: not counted: %d submission%s received after the assignment closed to them "
                                 "(kept in the exchange)", show(student), len(closed), "s" * (len(closed) != 1))
            if not counting:
                return 0
            chosen = self._choose(counting, due)
            counted, text = self._counted_time(chosen)
            if due is not None and counted > due:
                self.log.warning("%s: late: %s was received %s UTC, %s after the%s due date %s UTC",
                                 show(student), show(chosen.name), counted.strftime("%Y-%m-%d %H:%M:%S"),
                                 str(counted - due).split(".")[0], "" if due == self.duedate else " student's",
                                 due.strftime("%Y-%m-%d %H:%M:%S"))
            if self.check_owner:
                self._check_owner(student, folder_fd, chosen.name)
            self.src_records.append({"username": student, "filename": os.path.join(student, chosen.name),
                                     "timestamp": counted})
            try:
                return self._copy_if_newer(student, folder_fd, folder, chosen, counted, text, report)
            except Skip as why:  # swapped between choosing and copying: the next collect sees it anew
                report.problem(f"not collected: {show(chosen.name)}: {why}")
                return 0
        finally:
            os.close(folder_fd)

    def _candidates(self, student: str, folder_fd: int, report: StudentReport) -> tuple[list[Candidate], int]:
        """This assignment's submissions in the student's folder, read in bounded time.

        Returns them (newest by their folder's ctime first) and the number of other entries.
        """
        assignment = self.coursedir.assignment_id
        found, others, read = [], 0, 0
        with os.scandir(folder_fd) as entries:
            for entry in entries:
                read += 1
                if read > self.limits.student_quota_entries:
                    report.problem("inbound folder holds more than {} entries (over the quota): only the first {} "
                                   "were looked at".format(self.limits.student_quota_entries,
                                                           self.limits.student_quota_entries))
                    break
                name = entry.name
                parts = name.rsplit("+", 3)
                if name.startswith(".") or len(parts) < 3 or parts[1] != assignment \
                        or not fnmatch.fnmatchcase(name, "*+{}+*".format(assignment)):
                    others += 1  # hidden half-made submissions, other assignments
                    continue
                if parts[0] != student:
                    report.problem(f"skipped {show(name)}: it names student {show(parts[0])} but sits in this "
                                   "student's folder")
                    others += 1
                    continue
                try:
                    st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    report.problem(f"skipped {show(name)}: {describe(st.st_mode)}, not a submission folder")
                    others += 1
                    continue
                found.append(Candidate(name, st.st_ctime_ns))
        found.sort(key=lambda c: (c.top_ctime_ns, c.name), reverse=True)
        kept = self.limits.max_kept_submissions
        if len(found) > kept:
            report.problem("{} submissions of '{}' (over the quota of {}): only the {} received last are "
                           "considered".format(len(found), assignment, kept, kept))
            others += len(found) - kept
            found = found[:kept]
        return found, others

    def _time_candidates(self, folder_fd, folder, candidates, report) -> list[Candidate]:
        """Walk each candidate without copying: the kernel's time of its newest change, its size."""
        considered = []
        for candidate in candidates:
            try:
                fd = self._open_submission(folder_fd, folder, candidate.name)
            except Skip as why:
                report.problem(f"skipped {show(candidate.name)}: {why}")
                continue
            try:
                candidate.tally = self._walk(fd, folder, None, report, quiet=True)
                candidate.trusted_ns = candidate.tally.newest_ctime_ns
                candidate.claim, candidate.claim_text = self._read_claim(fd, candidate.name)
            except OSError as exc:
                report.problem(f"skipped {show(candidate.name)}: cannot be read ({exc.strerror})")
                continue
            finally:
                os.close(fd)
            considered.append(candidate)
        return considered

    def _open_submission(self, folder_fd: int, folder: os.stat_result, name: str) -> int:
        try:
            fd = open_dir(folder_fd, name)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise Skip("it is no longer a folder") from None
            raise Skip(f"cannot be opened ({exc.strerror})") from None
        st = os.fstat(fd)
        if st.st_dev != folder.st_dev:
            os.close(fd)
            raise Skip("another file system is mounted there")
        return fd

    def _read_claim(self, fd: int, name: str) -> tuple[dt.datetime | None, str]:
        """The time the student's side wrote (timestamp.txt), else the one in the folder's name."""
        text = ""
        try:
            raw = self._read_small(fd, "timestamp.txt", MAX_CLAIM_BYTES)
            text = raw.decode("utf-8").strip()
            return parse_utc(text), text
        except (OSError, Skip, UnicodeDecodeError, ValueError, OverflowError):
            pass
        try:
            text = name.rsplit("+", 3)[2]
            return parse_utc(text), ""
        except (IndexError, ValueError, OverflowError):
            return None, ""

    @staticmethod
    def _read_small(dir_fd: int, name: str, limit: int) -> bytes:
        fd = os.open(name, OPEN_FILE, dir_fd=dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Skip("not a regular file")
            data = os.read(fd, limit + 1)
        finally:
            os.close(fd)
        if len(data) > limit:
            raise Skip("too long")
        return data

    def copy_one(self, folder_fd: int, name: str, dest: str, report: StudentReport) -> tuple[Candidate, dt.datetime, str]:
        """Copy the submission ``name`` of the student's folder open at ``folder_fd`` into the new
        folder ``dest`` exactly as collect copies one (regular files only, nothing followed, within
        the limits; problems go to ``report``), and return it with the time that counts and that
        time's text. Feedback on submit grades what this copies (attention_platform/feedback_on_submit).
        Raises Skip when the submission cannot be opened."""
        if not hasattr(self, "limits"):
            self.limits = ExchangeLimits(parent=self)
        folder = os.fstat(folder_fd)
        top = self._open_submission(folder_fd, folder, name)
        try:
            candidate = Candidate(name, os.fstat(top).st_ctime_ns)
            os.mkdir(dest, 0o700)
            dest_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                candidate.tally = self._walk(top, folder, dest_fd, report)
            finally:
                os.close(dest_fd)
            candidate.trusted_ns = candidate.tally.newest_ctime_ns
            candidate.claim, candidate.claim_text = self._read_claim(top, name)
        finally:
            os.close(top)
        counted, text = self._counted_time(candidate)
        return candidate, counted, text

    def _choose(self, considered: list[Candidate], due: dt.datetime | None) -> Candidate:
        """The newest by the kernel's time; with before_duedate, the newest received by the student's
        deadline ``due``, if any."""
        ordered = sorted(considered, key=lambda c: (c.trusted_ns, c.name), reverse=True)
        if due is not None and self.before_duedate:
            on_time = [c for c in ordered if c.trusted <= due]
            if on_time:
                return on_time[0]
        return ordered[0]

    def _counted_time(self, candidate: Candidate) -> tuple[dt.datetime, str]:
        """The time that counts and its text for the collected timestamp.txt."""
        trusted = candidate.trusted
        claim = candidate.claim
        if claim is not None and candidate.claim_text and \
                trusted - dt.timedelta(seconds=self.claim_tolerance) <= claim <= \
                trusted + dt.timedelta(microseconds=CLOCK_GRANULARITY_NS // 1000):
            return claim, candidate.claim_text
        stamp = dt.datetime.fromtimestamp(candidate.trusted_ns / 1e9, dt.timezone.utc)
        return trusted, stamp.strftime(self.timestamp_format)

    def _check_claim(self, candidate: Candidate, report: StudentReport) -> None:
        counted, _text = self._counted_time(candidate)
        trusted = candidate.trusted.strftime("%Y-%m-%d %H:%M:%S")
        if candidate.claim is None:
            report.problem(f"{show(candidate.name)} claims no readable time: the exchange's {trusted} UTC counts")
        elif not candidate.claim_text:
            report.problem(f"{show(candidate.name)} has no readable timestamp.txt: the exchange's {trusted} UTC counts")
        elif counted != candidate.claim:
            if candidate.claim < candidate.trusted:
                gap = "{} before".format(str(candidate.trusted - candidate.claim).split(".")[0])
            else:
                gap = "{} after".format(str(candidate.claim - candidate.trusted).split(".")[0])
            report.problem("{} claims {} UTC, {} the exchange received it ({} UTC): the exchange's time counts"
                           .format(show(candidate.name), candidate.claim.strftime("%Y-%m-%d %H:%M:%S"), gap, trusted))

    def _check_owner(self, student: str, folder_fd: int, name: str) -> None:
        try:
            uid = os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_uid
            owner = pwd.getpwuid(uid).pw_name
        except (KeyError, OSError):
            owner = "unknown id"
        if owner != student:
            self.log.warning("%s: %s belongs to %s, not to the student; cheating attempt? (ExchangeCollect.check_owner)",
                             show(student), show(name), show(owner))

    # ------------------------------------------------------------------ copying
    def _copy_if_newer(self, student, folder_fd, folder, chosen, counted, text, report) -> int:
        assignment = self.coursedir.assignment_id
        dest = self.coursedir.format_path(self.coursedir.submitted_directory, student, assignment)
        if os.path.isdir(dest):
            try:
                existing = self.coursedir.get_existing_timestamp(dest)
            except Exception:  # noqa: BLE001 - an unreadable old timestamp means: collect again
                existing = None
            if self.update and (existing is None or counted > existing):
                self.log.info("Updating submission: {} {}".format(show(student), assignment))
            elif self.before_duedate and existing != counted:
                self.log.info("Updating submission: {} {}".format(show(student), assignment))
            else:
                self.log.info(("No newer submission to collect: {} {}" if self.update else
                               "Submission already exists, use --update to update: {} {}").format(show(student), assignment))
                return 0
        else:
            self.log.info("Collecting submission: {} {}".format(show(student), assignment))

        parent = os.path.dirname(dest)
        os.makedirs(parent, exist_ok=True)
        building = os.path.join(parent, ".collecting-{}-{}".format(assignment, secrets.token_hex(4)))
        os.mkdir(building, 0o755)
        try:
            dest_fd = os.open(building, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                src_fd = self._open_submission(folder_fd, folder, chosen.name)
                try:
                    tally = self._walk(src_fd, folder, dest_fd, report)
                finally:
                    os.close(src_fd)
                if tally.newest_ctime_ns > chosen.trusted_ns:  # changed while we copied: later, never earlier
                    chosen.trusted_ns = tally.newest_ctime_ns
                    counted, text = self._counted_time(chosen)
                    self.src_records[-1]["timestamp"] = counted
                fd = os.open("timestamp.txt", CREATE_FILE, 0o644, dir_fd=dest_fd)
                with os.fdopen(fd, "w") as fh:
                    fh.write(text)
            finally:
                os.close(dest_fd)
            if os.path.isdir(dest):
                old = os.path.join(parent, ".replaced-{}-{}".format(assignment, secrets.token_hex(4)))
                os.rename(dest, old)
                os.rename(building, dest)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(building, dest)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        return 1

    def _ignored(self, name: str, is_dir: bool) -> bool:
        """nbgrader's own ignore/include patterns (CourseDirectory.ignore/include), silently, as stock does."""
        if any(fnmatch.fnmatch(name, p) for p in self.coursedir.ignore):
            return True
        return not is_dir and not any(fnmatch.fnmatch(name, p) for p in self.coursedir.include)

    def _file_limit(self) -> int:
        return min(self.limits.max_file_bytes, 1000 * self.coursedir.max_file_size)

    def _walk(self, top_fd: int, folder: os.stat_result, dest_fd: int | None, report: StudentReport,
              quiet: bool = False) -> Tally:
        """Walk a submission without following anything; copy its regular files into ``dest_fd`` if given.

        ``quiet``: a timing walk, whose problems the copy walk will report.
        """
        tally = Tally(newest_ctime_ns=os.fstat(top_fd).st_ctime_ns)
        say = (lambda text: None) if quiet else report.problem
        self._walk_dir(top_fd, "", 0, folder, dest_fd, tally, say)
        tally.newest_ctime_ns = max(tally.newest_ctime_ns, os.fstat(top_fd).st_ctime_ns)
        return tally

    def _walk_dir(self, fd, prefix, depth, folder, dest_fd, tally, say) -> None:
        budget = self.limits.max_submission_entries - tally.entries
        names = []
        with os.scandir(fd) as entries:
            for entry in entries:
                if len(names) >= budget:
                    if not tally.truncated:
                        say("more than {} entries in the submission: the rest was not collected".format(
                            self.limits.max_submission_entries))
                    tally.truncated = True
                    break
                names.append(entry.name)
        tally.entries += len(names)
        # Notebooks first: if a limit is reached, it is reached on the rest.
        names.sort(key=lambda n: (not n.endswith(".ipynb"), n))
        for name in names:
            rel = prefix + name
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            tally.newest_ctime_ns = max(tally.newest_ctime_ns, st.st_ctime_ns)
            if depth == 0 and name == "timestamp.txt":
                continue  # collect writes the time that counts
            if self._ignored(name, stat.S_ISDIR(st.st_mode)):
                continue
            try:
                if stat.S_ISDIR(st.st_mode):
                    self._walk_subdir(fd, name, rel, st, depth, folder, dest_fd, tally, say)
                elif stat.S_ISREG(st.st_mode):
                    self._take_file(fd, name, st, folder, dest_fd, tally)
                else:
                    raise Skip(describe(st.st_mode, fd, name) + ", not a regular file")
            except Skip as why:
                say(f"not collected: {show(rel)}: {why}")

    def _walk_subdir(self, fd, name, rel, st, depth, folder, dest_fd, tally, say) -> None:
        if depth + 1 > self.limits.max_depth:
            raise Skip(f"a folder nested deeper than {self.limits.max_depth} levels")
        try:
            child = open_dir(fd, name)
        except OSError as exc:
            raise Skip(f"cannot be opened ({exc.strerror})") from None
        try:
            cst = os.fstat(child)
            if (cst.st_dev, cst.st_ino) != (st.st_dev, st.st_ino):
                raise Skip("replaced while being collected")
            if cst.st_dev != folder.st_dev:
                raise Skip("another file system is mounted there")
            child_dest = None
            if dest_fd is not None:
                os.mkdir(name, 0o755, dir_fd=dest_fd)
                child_dest = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                     dir_fd=dest_fd)
            try:
                self._walk_dir(child, rel + "/", depth + 1, folder, child_dest, tally, say)
            finally:
                if child_dest is not None:
                    os.close(child_dest)
            tally.newest_ctime_ns = max(tally.newest_ctime_ns, os.fstat(child).st_ctime_ns)
        finally:
            os.close(child)

    def _take_file(self, fd, name, st, folder, dest_fd, tally) -> None:
        if st.st_uid != folder.st_uid:
            raise Skip(f"belongs to uid {st.st_uid}, not to the owner of the student's folder "
                       "(a hard link to someone else's file)")
        limit = self._file_limit()
        if st.st_size > limit:
            raise Skip(f"{megabytes(st.st_size)}, larger than the {megabytes(limit)} a file may hold")
        room = self.limits.max_submission_bytes - tally.bytes
        if st.st_size > room:
            raise Skip(f"{megabytes(st.st_size)} would take the submission past {megabytes(self.limits.max_submission_bytes)}")
        if dest_fd is None:
            tally.files += 1
            tally.bytes += st.st_size
            return
        copied, ctime_ns = self._copy_file(fd, name, st, dest_fd, min(limit, room))
        tally.files += 1
        tally.bytes += copied
        tally.newest_ctime_ns = max(tally.newest_ctime_ns, ctime_ns)

    @staticmethod
    def _copy_file(fd, name, st, dest_fd, limit) -> tuple[int, int]:
        """Copy one regular file; the ctime returned is read after the last byte, on the same descriptor."""
        src = os.open(name, OPEN_FILE, dir_fd=fd)
        try:
            opened = os.fstat(src)
            if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                raise Skip("replaced while being collected")
            dst = os.open(name, CREATE_FILE, 0o644, dir_fd=dest_fd)
            copied = 0
            try:
                while True:
                    block = os.read(src, 1 << 20)
                    if not block:
                        break
                    copied += len(block)
                    if copied > limit:
                        raise Skip("grew past the size limit while being collected")
                    view = memoryview(block)
                    while view:
                        view = view[os.write(dst, view):]
            except BaseException:
                os.close(dst)
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dest_fd)
                raise
            os.close(dst)
            return copied, os.fstat(src).st_ctime_ns
        finally:
            os.close(src)


def describe(mode: int, fd: int | None = None, name: str | None = None) -> str:
    """``kind_of(mode)``; a link also says where it points (it is never followed)."""
    if not stat.S_ISLNK(mode):
        return kind_of(mode)
    target = ""
    if fd is not None:
        with contextlib.suppress(OSError):
            target = " to " + show(os.readlink(name, dir_fd=fd)[:200])
    return f"a symbolic link{target} (not followed)"


# ---------------------------------------------------------------------------------------- feedback
class PerStudentReleaseFeedback(GraderExchangeRoot, ExchangeReleaseFeedback):
    """Release each student's feedback into ``feedback/<student>/`` only.

    A student whose feedback cannot be released (no submission secret, an unreadable
    file, no feedback folder in the exchange) gets one line in the log; everyone else's
    feedback is released.
    """

    def init_dest(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.outbound_feedback_path = os.path.join(self.course_path, "feedback")
        self.dest_path = self.outbound_feedback_path
        try:
            root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                course_fd = pass_through(root_fd, self.coursedir.course_id)
            finally:
                os.close(root_fd)
            try:
                self._feedback_fd = pass_through(course_fd, "feedback")  # root's, mode 0711
            finally:
                os.close(course_fd)
        except OSError as exc:
            self.fail(f"No feedback folder in the exchange ({self.outbound_feedback_path}: {exc.strerror}); "
                      "the hub creates it when it starts.")

    def copy_files(self):
        exclude = set(filter(None, (self.coursedir.student_id_exclude or "").split(",")))
        regexp = re.escape(os.path.sep).join([
            self.coursedir.format_path(self.coursedir.feedback_directory, "(?P<student_id>.*)",
                                       self.coursedir.assignment_id, escape=True),
            "(?P<notebook_id>.*).html",
        ])
        by_student: dict[str, list[tuple[str, str]]] = {}
        for html_file in sorted(glob.glob(os.path.join(self.src_path, "*.html"))):
            match = re.match(regexp, html_file)
            if match is None:
                self.log.error("Could not match %r with regexp %r", html_file, regexp)
                continue
            student_id, notebook_id = match.group("student_id"), match.group("notebook_id")
            if student_id not in exclude:
                by_student.setdefault(student_id, []).append((notebook_id, html_file))
        released, failed = 0, 0
        try:
            for student_id, notebooks in sorted(by_student.items()):
                try:
                    released += self._release_student(student_id, notebooks)
                except Exception as exc:  # noqa: BLE001 - one student never stops everyone's feedback
                    failed += 1
                    self.log.error("Feedback for %s on '%s' NOT released: %s", show(student_id),
                                   self.coursedir.assignment_id, exc)
                    self.log.debug("release_feedback of %s failed:\n%s", show(student_id), traceback.format_exc())
                else:
                    self._count_for_the_lms(student_id)
        finally:
            os.close(self._feedback_fd)
        if failed:
            self.log.error("Feedback on '%s' released for %d students; %d could not be released (see above)",
                           self.coursedir.assignment_id, len(by_student) - failed, failed)

    def _count_for_the_lms(self, student_id: str) -> None:
        """Released feedback makes the student's score one the LMS receives (attention_platform/lms)."""
        try:
            note_release(self.coursedir.root, self.coursedir.assignment_id, student_id)
        except Exception as exc:  # noqa: BLE001 - the feedback is released; the LMS's copy is not the release's
            self.log.error("Feedback for %s released, but not marked for the LMS: %s", show(student_id), exc)

    def _release_student(self, student_id: str, notebooks: list[tuple[str, str]]) -> int:
        if not is_plain_name(student_id):
            raise ValueError("this student id cannot name a folder in the exchange")
        feedback_dir = os.path.dirname(notebooks[0][1])
        secret_path = os.path.join(feedback_dir, "submission_secret.txt")
        try:
            with open(secret_path, "rb") as fh:
                secret_bytes = fh.read(MAX_SECRET_BYTES + 1)
        except FileNotFoundError:
            raise ValueError("the collected submission has no submission_secret.txt, which names the feedback "
                             "file the student's server looks for; the student must submit again through "
                             "the Assignments tab") from None
        except OSError as exc:
            raise ValueError(f"its submission_secret.txt cannot be read ({exc.strerror})") from None
        if not secret_bytes.strip() or len(secret_bytes) > MAX_SECRET_BYTES:
            raise ValueError("its submission_secret.txt is empty or too long to be one")
        try:
            secret = secret_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("its submission_secret.txt is not text") from None
        try:
            with open(os.path.join(feedback_dir, "timestamp.txt")) as fh:
                timestamp = fh.read(MAX_CLAIM_BYTES).strip()
        except (OSError, UnicodeDecodeError):
            timestamp = "no timestamp"
        try:
            student_fd = pass_through(self._feedback_fd, student_id)
        except FileNotFoundError:
            raise ValueError("they have no feedback folder in the exchange (the hub makes it when their server "
                             "first starts)") from None
        except OSError as exc:
            raise ValueError(f"their feedback folder in the exchange cannot be opened ({exc.strerror})") from None
        released = 0
        try:
            for notebook_id, html_file in notebooks:
                try:
                    with open(html_file, "rb") as fh:
                        html = fh.read()
                except OSError as exc:
                    self.log.error("Feedback for %s on '%s/%s' NOT released: %s cannot be read (%s)", show(student_id),
                                   self.coursedir.assignment_id, notebook_id, html_file, exc.strerror)
                    continue
                checksum = notebook_hash(secret=secret, notebook_id=notebook_id)
                self._write_atomically(student_fd, "{}.html".format(checksum), html)
                released += 1
                self.log.info("Released feedback for student '%s' on '%s/%s/%s' (%s)", show(student_id),
                              self.coursedir.course_id, self.coursedir.assignment_id, notebook_id, timestamp)
        finally:
            os.close(student_fd)
        return released

    @staticmethod
    def _write_atomically(dir_fd: int, name: str, data: bytes) -> None:
        """A student never reads half a file: write a hidden temporary, then rename it into place."""
        temporary = ".{}.{}.tmp".format(name, secrets.token_hex(4))
        fd = os.open(temporary, CREATE_FILE, 0o640, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                os.fchmod(fh.fileno(), 0o640)
            os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise


def counted_attempts(config, coursedir, assignment: str) -> dict:
    """``{student: (policy's counts, time received)}`` of students whose attempt that counts the
    feedback-on-submit grader has installed as their submission (policy ``last`` or ``best``):
    collect leaves those alone (attention_platform/feedback_on_submit)."""
    from attention_platform.attempts.ledger import Ledger
    from attention_platform.attempts.policy import FeedbackOnSubmit, PolicyError
    from attention_platform.attempts.policy_store import with_saved_policies

    try:
        policy = FeedbackOnSubmit(config=with_saved_policies(config, coursedir.root)).policy_for(assignment)
    except PolicyError:
        return {}
    if policy.counts not in ("last", "best"):
        return {}
    ledger = Ledger(coursedir.db_url)
    try:
        return {row["student"]: (policy.counts, row["received_at"]) for row in ledger.attempts(assignment)
                if row["counted"]}
    finally:
        ledger.close()
