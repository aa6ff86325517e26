"""Each student's own copy of the notebooks whose numbers vary, written where only they can read it.

The release in ``outbound/`` is everyone's; a variant must reach its student alone. The grader owns
each student's ``feedback/<student>/`` (grader:student-group 2750, exchange_layout.py), which that
student's server sees read-only and nobody else's sees at all, so the student's own notebooks go to
``feedback/<student>/variants/<assignment>/``, and ``outbound/.variants/<assignment>`` marks the
assignment as one that has them (the student's fetch, exchange/submit.py, then refuses to hand out
the release's numbers). The numbers come from attention_platform/course/variants.py; nothing here
writes the course's key or anything derived from it but the student's own input cells.

Students are the folders of ``inbound/`` (the hub makes one when a student's server first starts):
a student who logs in for the first time after the release gets their copy when the assignment is
released again or ``attention-course variants write`` runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat

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
            try:
                mine = open_dir(folders["feedback"], student)
            except OSError as exc:
                log.warning("No own copy of %s for %s: their feedback folder cannot be opened (%s)",
                            assignment, student, exc.strerror)
                continue
            try:
                if on:
                    _write_for(mine, course_dir, release_dir, assignment, student)
                    written += 1
                else:
                    _remove_for(mine, assignment)
            except Exception as exc:  # noqa: BLE001 - one student's copy never stops the others'
                log.warning("No own copy of %s for %s: %s: %s", assignment, student, type(exc).__name__, exc)
            finally:
                os.close(mine)
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


def _write_for(student_fd: int, course_dir, release_dir: str, assignment: str, student: str) -> None:
    folder = _own_dir(student_fd, PERSONAL_FOLDER, 0o750)
    try:
        mine = _own_dir(folder, assignment, 0o750)
        try:
            for name, data in _personal_notebooks(course_dir, release_dir, assignment, student).items():
                _write_atomically(mine, name, data)
        finally:
            os.close(mine)
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
