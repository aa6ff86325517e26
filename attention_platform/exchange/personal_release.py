"""Each student's own copy of the notebooks whose numbers vary, written where only they can read it.

The release in ``outbound/`` is everyone's; a variant must reach its student alone. The grader owns
each student's ``feedback/<student>/`` (grader:student-group 2750, exchange_layout.py), which that
student's server sees read-only and nobody else's sees at all, so the student's own notebooks go to
``feedback/<student>/variants/<assignment>/``, and ``outbound/.variants/<assignment>`` marks the
assignment as one that has them (the student's fetch, exchange/submit.py, then refuses to hand out
the release's numbers). The numbers come from attention_platform/course/variants.py; nothing here
writes the course's key or anything derived from it but the student's own input cells.

Students are the folders of ``inbound/`` (the hub makes one when a student's server first starts):
a student who logs in for the first time after the release gets their copy from the grader's
feedback-on-submit service (:class:`MissingCopies`, within seconds), or when the assignment is
released again or ``attention-course variants write`` runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from typing import Callable

import nbformat

from attention_platform.course import variants
from attention_platform.exchange.exchange_layout import is_plain_name, open_dir, pass_through
from attention_platform.exchange.submit import PERSONAL_FOLDER, VARIANT_MARKS


@contextlib.contextmanager
def _course_folders(exchange_root: str, course_id: str):
    """Descriptors of the course's ``outbound``, ``inbound`` and ``feedback`` folders (nothing followed);
    an exchange the hub did not lay out (the grader's own, in a test) may have no inbound or feedback."""
    opened: dict[str, int] = {}
    root = os.open(exchange_root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        course = pass_through(root, course_id)
        try:
            opened["outbound"] = open_dir(course, "outbound")
            with contextlib.suppress(FileNotFoundError):
                opened["inbound"] = open_dir(course, "inbound")
                opened["feedback"] = pass_through(course, "feedback")
            yield opened
        finally:
            os.close(course)
            for fd in opened.values():
                os.close(fd)
    finally:
        os.close(root)


def _own_dir(parent_fd: int, name: str, mode: int) -> int:
    """A folder of the grader's in ``parent_fd``. In a student's feedback folder it inherits the folder's
    group (the student's) and its set-group-id bit, so what is written below is the student's to read;
    the grader, not in that group, must not chmod it (the kernel would drop the set-group-id bit)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, mode, dir_fd=parent_fd)
    fd = open_dir(parent_fd, name)
    if stat.S_IMODE(os.fstat(fd).st_mode) & mode != mode:  # a umask took some of it
        os.fchmod(fd, mode)
    return fd


def _write_atomically(dir_fd: int, name: str, data: bytes) -> None:
    from attention_platform.exchange.exchange import PerStudentReleaseFeedback

    PerStudentReleaseFeedback._write_atomically(dir_fd, name, data)


def _personal_notebooks(course_dir, release_dir: str, assignment: str, student: str) -> dict[str, bytes]:
    found = variants.cells(course_dir, assignment, student)
    if found is None:
        return {}
    notebook_id = found[0]
    nb = nbformat.read(os.path.join(release_dir, f"{notebook_id}.ipynb"), as_version=4)
    variants.write_cells(nb, course_dir, assignment, student, notebook_id)
    return {f"{notebook_id}.ipynb": nbformat.writes(nb).encode()}


def issue(exchange_root: str, course_id: str, course_dir, release_dir: str, assignment: str, log) -> int:
    """Write every student's own notebooks of ``assignment`` (or, with its variants off, remove them
    and the mark); the number of students written for. One student's failure is logged and costs
    only them their copy (their fetch then says it is not ready)."""
    on = variants.is_on(course_dir, assignment)
    written = 0
    with _course_folders(exchange_root, course_id) as folders:
        try:
            students = sorted(name for name in os.listdir(folders["inbound"]) if is_plain_name(name)) \
                if "feedback" in folders else []
        except OSError as exc:  # the release itself is done: only the students' own copies are missing
            log.warning("No student's own copy of %s written or removed: the exchange's inbound cannot be "
                        "listed (%s)", assignment, exc.strerror)
            students = []
        if on:
            marks = _own_dir(folders["outbound"], VARIANT_MARKS, 0o755)
            try:
                _write_atomically(marks, assignment, b"")
            finally:
                os.close(marks)
        for student in students:
            written += _issue_to(folders["feedback"], course_dir, release_dir, assignment, student, on, log)
        if not on:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                marks = open_dir(folders["outbound"], VARIANT_MARKS)
                try:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(assignment, dir_fd=marks)
                finally:
                    os.close(marks)
    if on:
        log.info("Wrote their own numbers of %s for %d students", assignment, written)
    return written


def _issue_to(feedback_fd: int, course_dir, release_dir: str, assignment: str, student: str, on: bool, log) -> bool:
    """Write (or, off, remove) ``student``'s own copy; whether it was written. A failure is logged and
    costs only them their copy."""
    try:
        mine = open_dir(feedback_fd, student)
    except OSError as exc:
        log.warning("No own copy of %s for %s: their feedback folder cannot be opened (%s)",
                    assignment, student, exc.strerror)
        return False
    try:
        if not on:
            _remove_for(mine, assignment)
            return False
        _write_for(mine, course_dir, release_dir, assignment, student)
        return True
    except Exception as exc:  # noqa: BLE001 - one student's copy never stops the others'
        log.warning("No own copy of %s for %s: %s: %s", assignment, student, type(exc).__name__, exc)
        return False
    finally:
        os.close(mine)


def _lacks_copy(feedback_fd: int, student: str, assignment: str) -> bool:
    """``student`` has a feedback folder but no own copy of ``assignment``: one stat when they have it."""
    try:
        os.stat(f"{student}/{PERSONAL_FOLDER}/{assignment}", dir_fd=feedback_fd, follow_symlinks=False)
        return False
    except FileNotFoundError:
        pass
    except OSError:  # anything but "missing" is for a release or `variants write` to report
        return False
    try:
        return stat.S_ISDIR(os.stat(student, dir_fd=feedback_fd, follow_symlinks=False).st_mode)
    except OSError:  # no folder yet: their server has not started
        return False


class MissingCopies:
    """The own copies of students whose feedback folder appeared after a release with variants (their
    first login), written by the grader's service each time it looks. Nothing missing costs a stat per
    student and marked assignment, and no key; a copy that could not be written is logged once and left
    to the next release or ``attention-course variants write``."""

    def __init__(self, exchange_root, course_id: str, course_dir, release_dir_of: Callable[[str], str], log):
        self.exchange_root, self.course_id, self.course_dir = str(exchange_root), course_id, course_dir
        self.release_dir_of, self.log = release_dir_of, log
        self.failed: set[tuple[str, str]] = set()  # (assignment, student)

    def write_missing(self) -> int:
        """Write every missing copy; how many were written."""
        written = 0
        with _course_folders(self.exchange_root, self.course_id) as folders:
            if "feedback" not in folders:
                return 0
            try:
                marks = open_dir(folders["outbound"], VARIANT_MARKS)
            except (FileNotFoundError, NotADirectoryError):
                return 0  # no assignment has variants
            try:
                marked = sorted(name for name in os.listdir(marks) if is_plain_name(name))
            finally:
                os.close(marks)
            if not marked:
                return 0
            students = sorted(name for name in os.listdir(folders["inbound"]) if is_plain_name(name))
            for assignment in marked:
                missing = [student for student in students if (assignment, student) not in self.failed
                           and _lacks_copy(folders["feedback"], student, assignment)]
                if not missing or not variants.is_on(self.course_dir, assignment):
                    continue
                release_dir = self.release_dir_of(assignment)
                for student in missing:
                    if _issue_to(folders["feedback"], self.course_dir, release_dir, assignment, student, True, self.log):
                        written += 1
                        self.log.info("Wrote %s's own numbers of %s (their first login was after the release)",
                                      student, assignment)
                    else:
                        self.failed.add((assignment, student))
        return written


def _write_for(student_fd: int, course_dir, release_dir: str, assignment: str, student: str) -> None:
    """The student's folder of ``assignment`` appears only with its notebooks in it: their fetch takes an
    existing folder as their copy, so an empty one would hand out the release's numbers."""
    notebooks = _personal_notebooks(course_dir, release_dir, assignment, student)
    folder = _own_dir(student_fd, PERSONAL_FOLDER, 0o750)
    try:
        try:
            os.stat(assignment, dir_fd=folder, follow_symlinks=False)
            building = assignment  # written before: each notebook is replaced whole
        except FileNotFoundError:
            building = f".new-{assignment}"
        mine = _own_dir(folder, building, 0o750)
        try:
            for name, data in notebooks.items():
                _write_atomically(mine, name, data)
        finally:
            os.close(mine)
        if building != assignment:
            os.rename(building, assignment, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def _remove_for(student_fd: int, assignment: str) -> None:
    try:
        folder = open_dir(student_fd, PERSONAL_FOLDER)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(assignment, dir_fd=folder)
    finally:
        os.close(folder)
