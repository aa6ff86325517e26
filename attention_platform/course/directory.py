"""Driving a course directory with the real nbgrader commands.

Used by the demo run and the end-to-end tests: copy the course, drop
submissions into ``submitted/``, run nbgrader, read scores from the gradebook.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.venv import environment, program

COURSE_FILES = ("source", "nbgrader_config.py")


class NotACourse(ValueError):
    """The folder given as the course has no ``nbgrader_config.py`` (the message says what to pass)."""


def require_course(course: Path) -> Path:
    """``course`` resolved, or :class:`NotACourse`: checked before a command reads or writes anything
    there (a mistyped ``--course`` must not get a gradebook.db of its own)."""
    if not (Path(course) / "nbgrader_config.py").is_file():
        raise NotACourse(f"no nbgrader course at {course} (it has no nbgrader_config.py): "
                         "pass the course directory with --course")
    return Path(course).resolve()


def copy_course(dest: Path, course_root: Path = COURSE_ROOT) -> Path:
    """A fresh course directory at ``dest`` holding only the instructor's files."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in COURSE_FILES:
        src = course_root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def source_assignments(course: Path) -> list[str]:
    """The assignments of ``course``: the folders of its ``source/`` (nbgrader's assignment ids), by
    name. Links are not followed, and hidden folders (``.ipynb_checkpoints``) are none."""
    try:
        entries = list(os.scandir(Path(course) / "source"))
    except FileNotFoundError:
        return []
    return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))


def nbgrader(course: Path, *args: str, check: bool = False, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course`` with this interpreter's environment."""
    return subprocess.run([program("nbgrader"), *args], cwd=course, env=environment(), capture_output=True,
                          text=True, check=check, timeout=timeout)


def write_submission(course: Path, student: str, notebook, *, assignment: str, name: str,
                     timestamp: datetime | None = None) -> Path:
    """File a submission as ``nbgrader collect`` would. ``notebook`` is a
    NotebookNode, or raw bytes/str to store verbatim (for broken files);
    ``name`` is its file name (one call per notebook of the assignment)."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(notebook, (bytes, bytearray)):
        path.write_bytes(notebook)
    elif isinstance(notebook, str):
        path.write_text(notebook)
    else:
        nbformat.write(notebook, path)
    stamp = (timestamp or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    (folder / "timestamp.txt").write_text(stamp)
    return path


def check_scores(course: Path, *, assignment: str, notebook: str | None) -> dict[str, dict[str, float | None]]:
    """``{student: {grade_id: score}}`` for every autograded submission of ``assignment`` in the
    gradebook: of ``notebook`` (its id or file name), or of every notebook if ``notebook`` is None
    (grade ids of different notebooks are prefixed ``<notebook id>/`` then)."""
    from nbgrader.api import Gradebook, MissingEntry

    db_url = "sqlite:///" + str(course / "gradebook.db")
    table: dict[str, dict[str, float | None]] = {}
    with Gradebook(db_url) as gb:
        for student in gb.students:
            if notebook is None:
                try:
                    submission = gb.find_submission(assignment, student.id)
                except MissingEntry:
                    continue
                table[student.id] = {f"{nb.name}/{grade.name}": grade.score
                                     for nb in submission.notebooks for grade in nb.grades}
                continue
            try:
                found = gb.find_submission_notebook(notebook.removesuffix(".ipynb"), assignment, student.id)
            except MissingEntry:
                continue
            table[student.id] = {grade.name: grade.score for grade in found.grades}
    return table
