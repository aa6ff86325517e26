"""An all-or-nothing ``nbgrader submit`` (student side of nbgrader's pluggable exchange).

Stock ``ExchangeSubmit`` copies the student's files straight into their final folder
``inbound/<student>+<assignment>+<timestamp>+<random>/``. A grader who collects while that
copy runs, a server killed half-way, or a disk that fills up leaves a *partial* submission
exactly where ``collect`` looks. Here a submission is built in a hidden folder next to its
final place (``.partial-<final name>``, which no collect glob matches: a leading dot is
never matched by ``*``), flushed to disk, and renamed into place in one ``rename(2)``. The
inbound therefore holds complete submissions only; a failure leaves nothing behind but,
at worst, a hidden folder that the student's next submit sweeps away.

A retry is idempotent: when the student's newest complete submission already holds exactly
the files being submitted (same bytes), nothing new is filed and the student is told when
it was received. A student whose server died after the rename but before the browser saw
the answer can therefore press Submit again without creating a second copy.

Errors that concern the student (exchange full, read-only, not writable, a submission over
the course's limits) end in an ``ExchangeError`` whose message says, in one sentence, that
the submission was NOT received, why, and what to do; the Assignments tab shows it.

The course's limits (``ExchangeLimits``, below; collect reads the same class) are
checked before anything is copied: files, bytes and folder depth of the submission. After a
new submission is in, the student's own oldest submissions of the assignment beyond the
kept number (or the per-student bytes quota) are removed: only the newest counts, and a
student must never be locked out of submitting by their own earlier submits. Collect
enforces the same limits on the grader's side, whatever a student writes by hand.

Natively a student's exchange root is a *view* that root owns and the student may only
read (jupyter_config/jupyterhub_config.py); stock nbgrader insists on writing to its exchange root, so
the student's fetch, feedback and list use the ``View*`` classes below, which only need to
pass through it.

Wired in ``jupyter_config/student/nbgrader_config.py``:
``c.ExchangeFactory.submit = "attention_platform.exchange.submit.AtomicSubmit"``.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import shutil
import stat
import time
from dataclasses import dataclass

from nbgrader.exchange.default.fetch_assignment import ExchangeFetchAssignment
from nbgrader.exchange.default.fetch_feedback import ExchangeFetchFeedback
from nbgrader.exchange.default.list import ExchangeList
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import check_mode, ignore_patterns
from traitlets import Integer
from traitlets.config import LoggingConfigurable

PARTIAL_PREFIX = ".partial-"
# Files nbgrader adds to a submission; they differ on every submit and are not the student's work.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")
# A leftover hidden folder older than this is swept away by the student's next submit
# (younger ones may belong to a submit running in another tab).
STALE_PARTIAL_SECONDS = 600
# Per-student variants (attention_platform/exchange/personal_release.py): the grader writes a student's
# own notebooks into feedback/<student>/PERSONAL_FOLDER/<assignment>/ (their folder alone) and marks an
# assignment that has them with an empty outbound/VARIANT_MARKS/<assignment>.
PERSONAL_FOLDER = "variants"
VARIANT_MARKS = ".variants"
MAX_PERSONAL_NOTEBOOK_BYTES = 16 * 1024 * 1024

_ERRNO_MESSAGES = {
    errno.ENOSPC: "the course's submission storage is full",
    errno.EDQUOT: "the course's submission storage quota is used up",
    errno.EFBIG: "a file is larger than the submission storage accepts",
    errno.EROFS: "the course's submission storage is read-only right now",
    errno.EACCES: "you are not allowed to write to the course's submission folder",
    errno.EPERM: "you are not allowed to write to the course's submission folder",
}


def not_received(reason: str) -> str:
    """The one message a student reads when a submit fails for a reason outside their work."""
    return (f"Your submission was NOT received: {reason}. Nothing was handed in, and your files "
            "are unchanged in your home folder. Please try again in a few minutes; if this keeps "
            "happening, tell your instructor (before the deadline) with this message.")


def content_digest(folder: str, ignore=None) -> str:
    """SHA-256 over the relative paths and bytes of a submission's files (exchange files excluded).

    ``ignore`` is a ``shutil.copytree``-style callable: what submit would not copy is not counted.
    """
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        skipped = set(ignore(root, dirs + files)) if ignore else set()
        dirs[:] = sorted(d for d in dirs if d not in skipped)
        for name in sorted(f for f in files if f not in skipped):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            if rel in EXCHANGE_FILES:
                continue
            digest.update(rel.encode() + b"\0")
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 16), b""):
                    digest.update(block)
            digest.update(b"\0")
    return digest.hexdigest()


def _fsync_tree(folder: str) -> None:
    for root, _dirs, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class ExchangeLimits(LoggingConfigurable):
    """What a student may keep in the exchange, and what collect copies from one submission.

    Here, in the exchange's student half, because the student's image carries this package. Read by
    both sides: ``AtomicSubmit`` refuses a submission over a per-submission limit and prunes the
    student's own oldest submissions beyond the per-student quota;
    ``PerStudentCollect`` enforces the same numbers on whatever is actually in the
    student's folder, which the student can also write by hand. Configure as
    ``c.ExchangeLimits.<name>`` in the grader's and the students' nbgrader config.
    """

    max_file_bytes = Integer(
        100_000_000,
        help="Largest single file (bytes) a submission may hold; a larger file is refused at submit and "
             "not collected. nbgrader's own CourseDirectory.max_file_size applies as well (the smaller wins).",
    ).tag(config=True)

    max_submission_bytes = Integer(
        100_000_000,
        help="Most bytes of regular files in one submission; nbgrader's CourseDirectory.max_dir_size "
             "default is the same 100 MB. Files past it are not collected.",
    ).tag(config=True)

    max_submission_entries = Integer(
        1000,
        help="Most entries of any kind (files, folders, links) in one submission; collect stops reading "
             "a submission there.",
    ).tag(config=True)

    max_depth = Integer(
        8,
        help="Deepest folder nesting inside a submission (0: files at its top only); deeper folders are "
             "refused at submit and not collected.",
    ).tag(config=True)

    max_kept_submissions = Integer(
        10,
        help="Submissions of one assignment a student keeps in the exchange. Submit removes the student's "
             "own oldest ones beyond it; collect considers only the newest this many.",
    ).tag(config=True)

    student_quota_bytes = Integer(
        500_000_000,
        help="Most bytes one student keeps in the exchange for one assignment (all their kept submissions "
             "of it); submit removes their oldest submissions to stay under it, collect reports a student "
             "over it.",
    ).tag(config=True)

    student_quota_entries = Integer(
        5000,
        help="Most entries one student keeps in the exchange for one assignment (their kept submissions and "
             "everything in them); collect reads at most this many names in the student's folder and reports "
             "a student over it.",
    ).tag(config=True)


class ReadOnlyViewRoot:
    """The student's exchange root is the hub's, read-only: nbgrader's check for write access is wrong here.

    Everything a student writes goes into their own inbound folder below it, which the
    exchange actions check themselves.
    """

    def ensure_root(self):
        if not os.path.isdir(self.root) or not check_mode(self.root, read=True, execute=True):
            self.fail("The course's exchange is not available ({}); please contact your instructor."
                      .format(self.root))


class ViewFetchAssignment(ReadOnlyViewRoot, ExchangeFetchAssignment):
    """Stock fetch through the student's read-only view, with the student's own numbers where the
    assignment gives each student a variant: their notebooks from their own feedback folder replace
    the released ones. A student whose own copy is not written yet is told so and gets nothing: work
    on the release's numbers would be graded against their own."""

    def init_src(self):
        super().init_src()
        assignment = self.coursedir.assignment_id
        self.personal_path = os.path.join(self.course_path, "feedback", PERSONAL_FOLDER, assignment)
        if os.path.exists(os.path.join(self.outbound_path, VARIANT_MARKS, assignment)) \
                and not os.path.isdir(self.personal_path):
            self.fail(f"Your own copy of {assignment} is not ready yet: in this assignment every student works "
                      "with their own numbers, and yours are written shortly after your first login. "
                      "Please wait a minute and fetch it again; if it is still not ready then, ask your instructor.")

    def do_copy(self, src, dest):
        existed = set(os.listdir(dest)) if os.path.isdir(dest) else set()
        super().do_copy(src, dest)
        if not os.path.isdir(self.personal_path):
            return
        for name in sorted(os.listdir(self.personal_path)):
            source = os.path.join(self.personal_path, name)
            if name in existed or not name.endswith(".ipynb") or not os.path.exists(os.path.join(dest, name)):
                continue  # a refetch restores missing files only; only released notebooks are replaced
            info = os.lstat(source)
            if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_PERSONAL_NOTEBOOK_BYTES:
                shutil.copyfile(source, os.path.join(dest, name))


class ViewFetchFeedback(ReadOnlyViewRoot, ExchangeFetchFeedback):
    """Stock feedback fetch through the student's read-only view."""


class ViewList(ReadOnlyViewRoot, ExchangeList):
    """Stock listing through the student's read-only view."""


@dataclass
class Measure:
    """What a folder holds, counted the way a submission is copied."""

    entries: int = 0
    bytes: int = 0
    depth: int = 0
    largest: tuple[str, int] = ("", 0)
    over_entries: bool = False


def measure(folder: str, ignore=None, follow_links: bool = True, max_entries: int | None = None) -> Measure:
    """Entries, bytes of files and folder depth of ``folder``; stops counting past ``max_entries``.

    ``follow_links``: as ``shutil.copytree`` does when it copies the student's work (their own
    links, read with their own rights); the bound keeps a link loop finite.
    """
    found = Measure()
    for root, dirs, files in os.walk(folder, followlinks=follow_links):
        skipped = set(ignore(root, dirs + files)) if ignore else set()
        dirs[:] = [d for d in dirs if d not in skipped]
        depth = 0 if root == folder else os.path.relpath(root, folder).count(os.sep) + 1
        found.depth = max(found.depth, depth)
        for name in (f for f in files if f not in skipped):
            try:
                size = (os.stat if follow_links else os.lstat)(os.path.join(root, name)).st_size
            except OSError:
                size = 0
            found.bytes += size
            if size > found.largest[1]:
                found.largest = (os.path.relpath(os.path.join(root, name), folder), size)
        found.entries += len(dirs) + len([f for f in files if f not in skipped])
        if max_entries is not None and found.entries > max_entries:
            found.over_entries = True
            break
    return found


class AtomicSubmit(ReadOnlyViewRoot, ExchangeSubmit):
    """``nbgrader submit`` that files a complete submission or nothing, within the course's limits."""

    def init_dest(self):
        try:
            super().init_dest()
        except Exception as exc:
            if "write permissions" in str(exc):
                inbound = os.path.join(self.root, self.coursedir.course_id, "inbound")
                reason = _ERRNO_MESSAGES[errno.EROFS if _read_only(inbound) else errno.EACCES]
                self.fail(not_received(reason))
            raise

    def _own_submissions(self) -> list[str]:
        pattern = os.path.join(self.inbound_path, "{}+{}+*".format(
            self.assignment_filename.split("+")[0], self.coursedir.assignment_id))
        # <student>+<assignment>+<timestamp>+<random>: newest timestamp first.
        return sorted(glob.glob(pattern), key=lambda p: os.path.basename(p).split("+")[2], reverse=True)

    def _feedback_on_submit_refusal(self) -> str | None:
        """Feedback on submit's answer to an attempt that would count for nothing (the policy counts
        graded attempts and none is left): the Assignments tab asks before it submits, a terminal's
        ``nbgrader submit`` gets the same answer here. The grader applies the policy again anyway."""
        from attention_platform.attempts.refusal import submit_refusal

        student = self.assignment_filename.split("+")[0]
        return submit_refusal(self.root, self.coursedir.course_id, self.coursedir.assignment_id,
                              self.inbound_path, student)

    def _sweep_stale_partials(self) -> None:
        student = self.assignment_filename.split("+")[0]
        pattern = os.path.join(self.inbound_path, "{}{}+{}+*".format(PARTIAL_PREFIX, student,
                                                                    self.coursedir.assignment_id))
        for path in glob.glob(pattern):
            try:
                if time.time() - os.lstat(path).st_mtime > STALE_PARTIAL_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass

    def copy_files(self):
        self.init_release()
        self.check_filename_diff()
        self._sweep_stale_partials()

        final = os.path.join(self.inbound_path, self.assignment_filename)
        partial = os.path.join(self.inbound_path, PARTIAL_PREFIX + self.assignment_filename)
        self.log.info("Source: {}".format(self.src_path))
        self.log.info("Destination: {}".format(final))

        # An identical, complete submission is already in: a retry, not a new submission.
        newest = self._own_submissions()[:1]
        if newest:
            try:
                same = content_digest(newest[0]) == content_digest(self.src_path, self._ignore())
            except OSError:
                same = False
            if same:
                with open(os.path.join(newest[0], "timestamp.txt")) as fh:
                    received = fh.read().strip()
                self.timestamp = received  # what the student is shown and cached
                if not self._cached(received):  # a record only where the first submit's answer was lost
                    self._copy_to_cache(newest[0], received)
                self.log.info("Already received at {}: identical to your last submission; nothing new "
                              "was filed.".format(received))
                self.log.info("Submitted as: {} {} {}".format(
                    self.coursedir.course_id, self.coursedir.assignment_id, received))
                return

        refusal = self._feedback_on_submit_refusal()
        if refusal:
            self.fail(refusal)

        import secrets
        from stat import S_IRGRP, S_IROTH, S_IRUSR, S_IWUSR, S_IXGRP, S_IXOTH, S_IXUSR

        limits = ExchangeLimits(parent=self)
        size = self._check_limits(limits)
        superseded = self._superseded(limits, size)
        try:
            self.do_copy(self.src_path, partial)
            with open(os.path.join(partial, "timestamp.txt"), "w") as fh:
                fh.write(self.timestamp)
            with open(os.path.join(partial, "submission_secret.txt"), "w") as fh:
                fh.write(secrets.token_hex(64))
            self.set_perms(
                partial,
                fileperms=(S_IRUSR | S_IWUSR | S_IRGRP | S_IROTH),
                dirperms=(S_IRUSR | S_IWUSR | S_IXUSR | S_IRGRP | S_IXGRP | S_IROTH | S_IXOTH))
            os.chmod(partial, 0o777)  # as stock nbgrader: the instructor can delete it later
            _fsync_tree(partial)
            os.rename(partial, final)  # the only step collect can observe: all or nothing
            fd = os.open(self.inbound_path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException as exc:
            shutil.rmtree(partial, ignore_errors=True)
            if isinstance(exc, (shutil.Error, OSError)):
                code = _errno_of(exc)
                reason = _ERRNO_MESSAGES.get(code)
                if reason is None:
                    reason = "the course's submission storage failed ({})".format(
                        os.strerror(code) if code else type(exc).__name__)
                self.log.error("submit of %s failed: %r", self.assignment_filename, exc)
                self.fail(not_received(reason))
            if isinstance(exc, RuntimeError) and "too big" in str(exc):  # nbgrader's max_dir_size
                self.fail(not_received(
                    "your assignment folder is larger than the {:.0f} MB a submission may hold; remove large "
                    "files (data, outputs) from it".format(self.coursedir.max_dir_size / 1000)))
            raise

        with open(os.path.join(final, "submission_secret.txt")) as fh:
            self._secret = fh.read()
        self._prune(superseded, limits)
        self._copy_to_cache(final, self.timestamp)
        self.log.info("Submitted as: {} {} {}".format(
            self.coursedir.course_id, self.coursedir.assignment_id, str(self.timestamp)))

    def _ignore(self):
        return ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                               max_file_size=self.coursedir.max_file_size, log=self.log)

    def _check_limits(self, limits: ExchangeLimits) -> Measure:
        """Refuse, before anything is written, a submission the course would not collect whole."""
        size = measure(self.src_path, self._ignore(), max_entries=limits.max_submission_entries)
        if size.over_entries:
            self.fail(not_received(
                "your assignment folder holds more than {} files and folders, the most a submission may hold; "
                "remove generated files (data, checkpoints, outputs) from it".format(limits.max_submission_entries)))
        if size.depth > limits.max_depth:
            self.fail(not_received(
                "folders in your assignment folder are nested {} levels deep, more than the {} a submission "
                "may have".format(size.depth, limits.max_depth)))
        name, largest = size.largest
        if largest > limits.max_file_bytes:
            self.fail(not_received(
                "{} is {:.1f} MB, larger than the {:.1f} MB a file in a submission may be; remove it from "
                "your assignment folder".format(name, largest / 1e6, limits.max_file_bytes / 1e6)))
        most = min(limits.max_submission_bytes, limits.student_quota_bytes)
        if size.bytes > most:
            self.fail(not_received(
                "your assignment folder holds {:.1f} MB, more than the {:.1f} MB a submission may hold; remove "
                "large files (data, outputs) from it".format(size.bytes / 1e6, most / 1e6)))
        if size.entries + 1 > limits.student_quota_entries:
            self.fail(not_received(
                "your assignment folder holds {} files and folders, more than the {} the course keeps for "
                "you; remove generated files from it".format(size.entries, limits.student_quota_entries)))
        return size

    def _superseded(self, limits: ExchangeLimits, new: Measure) -> list[str]:
        """The student's own oldest submissions that must go once the new one is in."""
        kept, used_bytes, used_entries = 1, new.bytes, new.entries + 1
        superseded = []
        for path in self._own_submissions():  # newest first
            size = measure(path, follow_links=False, max_entries=limits.student_quota_entries)
            used_bytes += size.bytes
            used_entries += size.entries + 1
            kept += 1
            if kept > limits.max_kept_submissions or used_bytes > limits.student_quota_bytes \
                    or used_entries > limits.student_quota_entries:
                superseded.append(path)
        return superseded

    def _prune(self, superseded: list[str], limits: ExchangeLimits) -> None:
        """Remove the student's own superseded submissions; a failure costs nothing but space."""
        for path in superseded:
            try:
                shutil.rmtree(path)
            except OSError as exc:
                self.log.warning("Could not remove your older submission %s: %s", os.path.basename(path), exc)
                continue
            self.log.info("Removed your older submission of %s: the course keeps your %d newest (%.0f MB at most)",
                          os.path.basename(path).split("+")[2], limits.max_kept_submissions,
                          limits.student_quota_bytes / 1e6)

    def _cached(self, timestamp: str) -> bool:
        """Whether the student's own record already holds a submission received at ``timestamp``."""
        student = self.assignment_filename.split("+")[0]
        pattern = os.path.join(glob.escape(self.cache_path), "{}+{}+*".format(
            glob.escape(student), glob.escape(self.coursedir.assignment_id)))
        for folder in glob.glob(pattern):
            try:
                with open(os.path.join(folder, "timestamp.txt")) as fh:
                    if fh.read().strip() == timestamp:
                        return True
            except OSError:
                continue
        return False

    def _copy_to_cache(self, submission: str, timestamp: str) -> None:
        """The student's own record of what they submitted (the Assignments tab lists it).

        A failure here is logged, not raised: the submission itself is safely in, and an
        error would make the student submit again for nothing.
        """
        base = self.assignment_filename.rsplit("+", 1)[0] if self.add_random_string else self.assignment_filename
        cache_path = os.path.join(self.cache_path, base)
        try:
            os.makedirs(self.cache_path, exist_ok=True)
            if not os.path.isdir(cache_path):
                self.do_copy(self.src_path, cache_path)
                with open(os.path.join(cache_path, "timestamp.txt"), "w") as fh:
                    fh.write(timestamp)
                with open(os.path.join(submission, "submission_secret.txt")) as src, \
                        open(os.path.join(cache_path, "submission_secret.txt"), "w") as dst:
                    dst.write(src.read())
        except OSError as exc:
            self.log.warning("Submitted, but the local record in %s could not be written: %s", cache_path, exc)


def _errno_of(exc: BaseException) -> int | None:
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        for _src, _dst, why in exc.args[0]:
            for code, text in ((errno.ENOSPC, "No space left"), (errno.EROFS, "Read-only"),
                               (errno.EDQUOT, "quota"), (errno.EACCES, "Permission denied"),
                               (errno.EFBIG, "File too large")):
                if text in str(why):
                    return code
    return None


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
