"""Feedback pages kept for reuse: a graded notebook's page is made once, whoever asks for it again.

Feedback on submit makes the page of every notebook of every graded attempt; the attempt that counts
is installed into the course, and the TA's ``generate_feedback`` would make the same pages again. So
each page made is kept (gzip, in a folder of the grader's, ``FeedbackHTMLExporter.reused_pages_folder``)
under a key that holds everything the page is made from:

* the autograded notebook, whole;
* what the gradebook says of the submission: every notebook's grades (automatic and manual scores,
  extra credit, points), comments and late penalty (the page shows the assignment's total and
  every notebook's score), and which notebooks the graded folder holds;
* the assignment's checks as the page names them (title, misconception) and its notebooks' order;
* the student's variant id the page names (from the course's variant key and switch);
* the page's making: the exporter's and its preprocessors' settings and source files, our
  templates, and nbconvert's and nbgrader's versions. A setting tagged ``in_page_key`` is left out:
  the key holds what it finds (the course whose variant the page names: feedback on submit, making
  its pages in a scratch course, names the real one; the TA's ``generate_feedback`` leaves it to its root).

A submission after the assignment's due date has no key: its page's late note reads the student's
deadline (extension, late policy, late days spent on other assignments), so it is made every time.

A page is reused only when all of that is the same, so it is byte for byte the page that would
be made; a TA's manual grade or comment, a regrade, or a new template makes it again. The folder
keeps the ``reused_pages_kept`` pages used last.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import inspect
import json
import os
import secrets
from pathlib import Path

KEY_VERSION = "1"  # what a key is made of (this module, whose code is in every key too)


def _plain(value):
    """A setting as JSON: classes by their full name, anything else not plain by its type only
    (an object's repr may hold its address, which differs from one process to the next)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(item) for item in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


# Allow-lists kept as lists in a set's order, which changes from one process to the next: sorted.
UNORDERED = {"nbconvert.preprocessors.sanitize.SanitizeHTML": ("tags", "styles")}


def _settings(configurable) -> dict:
    unordered = {name for base in inspect.getmro(type(configurable))
                 for name in UNORDERED.get(f"{base.__module__}.{base.__qualname__}", ())}
    settings = {}
    for name in sorted(configurable.trait_names(config=True)):
        if name.startswith("reused_pages"):  # where pages are kept does not change them
            continue
        if configurable.trait_metadata(name, "in_page_key"):  # the key holds what it finds, not the setting
            continue
        value = _plain(getattr(configurable, name))
        settings[name] = sorted(value, key=json.dumps) if name in unordered and isinstance(value, list) else value
    return settings


@functools.lru_cache(maxsize=256)
def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _source_files(classes) -> list[str]:
    files = set()
    for cls in classes:
        for base in inspect.getmro(cls):
            with contextlib.suppress(TypeError, OSError):
                files.add(inspect.getsourcefile(base) or "")
    return sorted(files - {""})


@functools.lru_cache(maxsize=16)
def _templates_digest(folders: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                digest.update(f"{path.relative_to(folder)}\0{_file_digest(str(path))}\0".encode())
    return digest.hexdigest()


def making(exporter) -> str:
    """The digest of how ``exporter`` makes a page (its settings, its preprocessors', their code,
    the templates, the library versions)."""
    import nbconvert
    import nbgrader

    preprocessors = [p for p in getattr(exporter, "_preprocessors", []) if getattr(p, "enabled", True)]
    classes = [type(exporter), *(type(p) for p in preprocessors)]
    described = {
        "key": KEY_VERSION, "nbconvert": nbconvert.__version__, "nbgrader": nbgrader.__version__,
        "exporter": _settings(exporter),
        "preprocessors": [[_plain(type(p)), _settings(p)] for p in preprocessors],
        "code": {path: _file_digest(path) for path in [*_source_files(classes), __file__]},
        "templates": _templates_digest(tuple(sorted(str(p) for p in exporter.extra_template_basedirs))),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


@functools.lru_cache(maxsize=8)
def _database(db_url: str):
    """One SQLAlchemy engine per gradebook that is no SQLite file for the process (nbgrader's
    ``Gradebook`` makes and checks one each time it is opened, which costs more than the page); every
    SQLite file is read through the one engine of :mod:`attention_platform.sqlite_files`."""
    from sqlalchemy import create_engine

    return create_engine(db_url)


class LateSubmission(LookupError):
    """A submission after the assignment's due date: its page says how late it was by the student's own
    deadline (extensions, late policy, late days spent elsewhere), which the key does not hold."""


def graded(db_url: str, assignment: str, student: str) -> list:
    """What the gradebook holds of a submission that its feedback pages show: every grade and
    comment of each of its notebooks, and each notebook's late penalty. Raises LookupError for no
    submission, and for one after the due date (:class:`LateSubmission`), whose pages are made afresh.
    Read once for all of a submission's pages where the gradebook is held (:mod:`.read_once`)."""
    from attention_platform.reporting import read_once

    return read_once.once(db_url, ("graded", assignment, student), lambda: _read_graded(db_url, assignment, student))


def _read_graded(db_url: str, assignment: str, student: str) -> list:
    from nbgrader.api import Assignment, BaseCell, Comment, Grade, Notebook, SubmittedAssignment, SubmittedNotebook
    from sqlalchemy.orm import Session

    from attention_platform import sqlite_files

    def of_the_submission(query):
        return (query.join(SubmittedNotebook.assignment).join(SubmittedAssignment.assignment)
                .join(SubmittedNotebook.notebook)
                .filter(Assignment.name == assignment, SubmittedAssignment.student_id == student))

    path = sqlite_files.path_of(db_url)
    with sqlite_files.opening(path) if path else contextlib.nullcontext(), \
            Session(sqlite_files.ENGINE.get() if path else _database(db_url)) as session:
        times = of_the_submission(session.query(SubmittedAssignment.timestamp, Assignment.duedate)
                                  .select_from(SubmittedNotebook)).first()
        if times is not None and times[0] is not None and times[1] is not None and times[0] > times[1]:
            raise LateSubmission(f"{student}'s submission of {assignment} is after its due date")
        notebooks = of_the_submission(session.query(Notebook.name, SubmittedNotebook.late_submission_penalty)
                                      .select_from(SubmittedNotebook)).all()
        grades = of_the_submission(session.query(Notebook.name, BaseCell.name, Grade.auto_score, Grade.manual_score,
                                                 Grade.extra_credit, Grade.max_score, Grade.needs_manual_grade)
                                   .select_from(Grade).join(Grade.notebook).join(Grade.cell)).all()
        comments = of_the_submission(session.query(Notebook.name, BaseCell.name, Comment.auto_comment,
                                                   Comment.manual_comment)
                                     .select_from(Comment).join(Comment.notebook).join(Comment.cell)).all()
    if not notebooks:
        raise LookupError(f"no submission of {assignment} by {student}")
    return [sorted(map(list, rows), key=json.dumps) for rows in (notebooks, grades, comments)]


def _catalogue(assignment: str) -> list:
    """What the page shows of the assignment's checks (each one's title and misconception, from the
    grader's copy of its catalogue) and its notebooks' order."""
    from attention_platform.course.assignment_checks import checks_by_grade_id, notebook_order

    checks = checks_by_grade_id(assignment)
    return [list(notebook_order(assignment)),
            sorted([grade_id, check.title, check.misconception] for grade_id, check in checks.items())]


def _variant(exporter, assignment: str, student: str) -> list[str]:
    """The variant id the page names (from the course's key and switch, which the notebook does not hold)."""
    from attention_platform.reporting.feedback import FeedbackSummary

    return [p.variant(assignment, student) for p in getattr(exporter, "_preprocessors", [])
            if isinstance(p, FeedbackSummary) and getattr(p, "enabled", True)]


def page_key(exporter, nb, resources: dict | None) -> str | None:
    """The key of the page ``exporter`` makes of ``nb`` (read from the autograded folder nbgrader's
    ``resources`` name), or None if this is no graded notebook of a gradebook."""
    resources = resources or {}
    info = resources.get("nbgrader") or {}
    folder = (resources.get("metadata") or {}).get("path", "")
    if not all(info.get(name) for name in ("db_url", "assignment", "student", "notebook")) or not folder:
        return None
    try:
        present = sorted(name for name in os.listdir(folder) if name.endswith(".ipynb"))
        gradebook = graded(info["db_url"], info["assignment"], info["student"])
        variant = _variant(exporter, info["assignment"], info["student"])
    except Exception:  # noqa: BLE001 - no submission, no folder, no usable variant key: nothing to reuse
        return None
    if getattr(exporter, "_page_making", None) is None:  # settings, code and templates do not change in a process
        exporter._page_making = making(exporter)
    described = {
        "making": exporter._page_making, "notebook": nb, "present": present,
        "ids": [info["assignment"], info["student"], info["notebook"]], "gradebook": gradebook,
        "checks": _catalogue(info["assignment"]), "variant": variant,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()


class PageStore:
    """Pages by key, gzip files in ``folder`` (made private to the grader's account), the ``kept``
    used last. A folder that cannot be read or written reuses nothing and loses nothing."""

    def __init__(self, folder: str | os.PathLike, kept: int):
        self.folder = Path(folder)
        self.kept = kept

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.html.gz"

    def get(self, key: str) -> str | None:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                page = gzip.decompress(fh.read()).decode("utf-8")
            os.utime(path)  # used: kept the longer
            return page
        except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
            return None

    def put(self, key: str, page: str) -> None:
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.folder / f".{key}.{secrets.token_hex(4)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(gzip.compress(page.encode("utf-8"), compresslevel=1))
            os.rename(tmp, self._path(key))
            self._prune()
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)

    def _prune(self) -> None:
        with os.scandir(self.folder) as entries:
            pages = [(e.stat(follow_symlinks=False).st_mtime_ns, e.path) for e in entries if e.name.endswith(".html.gz")]
        if len(pages) <= self.kept:
            return
        for _, path in sorted(pages)[:len(pages) - self.kept]:
            with contextlib.suppress(OSError):
                os.unlink(path)
