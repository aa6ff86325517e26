"""Grading one attempt: the course's own autograde pipeline, on a scratch course of the grader's.

No second grader. An attempt goes through ``grading/batch.py``'s :class:`Pipeline` — the
course's ``Autograde.sanitize_preprocessors``, ``grade_notebook`` (a fresh sandbox per
notebook through the sandbox broker, judges in this process) and the course's
``Autograde.autograde_preprocessors`` — and its feedback page through the course's
``GenerateFeedback`` (our feedback template and per-check summary). The only difference from
the TA's autograde is *where* results land:

* every attempt is graded in the grader's scratch course ``<course>/attempts/`` with its own
  gradebook (the assignment's definition copied from the course's gradebook, refreshed when
  the instructor regenerates), so grading an attempt never touches what the TA is grading;
* the attempt that counts (policy ``last`` or ``best``) is *installed* into the course: its
  files into ``submitted/`` and ``autograded/``, its grades into the course's gradebook through
  the same post-execution preprocessors (``SaveAutoGrades``, late penalties, ...), so the
  formgrader, manual grading and exports see exactly what the student was shown.

Threads: one attempt per worker thread; each thread has its own gradebook sessions
(:class:`GradebookRouter`), the scratch gradebook is SQLite in WAL mode (readers never block
the one writer) and every write transaction is short (staging, then each notebook's results).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from attention_platform.course.assignment_checks import by_notebook_order, checks_by_grade_id
from attention_platform.reporting import read_once

from .intake import Intake
from attention_platform.attempts.policy import Policy

WORK = "attempts"  # the scratch course and the archive of graded attempts, in the course directory
ASIDE = "graded"  # in WORK: graded attempts waiting for their pages and archive, one folder each
DEFINITION_SECONDS = 5.0  # how stale the scratch definition may be after the instructor regenerates


@dataclass
class Attempt:
    id: int
    assignment: str
    student: str
    submission: str  # folder name in the student's inbound
    intake: Intake
    timestamp: object  # datetime the gradebook records
    policy: Policy
    parts: dict = field(default_factory=dict)  # the service's share of where its time went (PARTS)
    # Once graded, where its files and grades wait for its pages and archive (:meth:`Engine.set_aside`);
    # None: still in the scratch course
    aside: Path | None = None


@dataclass
class Result:
    score: float = 0.0
    max_score: float = 0.0
    manual_max: float = 0.0  # written answers the course staff grade
    checks: list = field(default_factory=list)  # [{id, notebook, title, passed, points, started}]
    not_started: set = field(default_factory=set)  # notebooks whose every answer cell is as released
    notes: list = field(default_factory=list)  # per notebook: stopped, missing, not a notebook
    seconds: float = 0.0
    pages: dict = field(default_factory=dict)  # notebook -> feedback page file name in the student's folder
    parts: dict = field(default_factory=dict)  # where the time went: part -> seconds (PARTS)
    # the "sandbox" part by notebook: notebook -> seconds its cells and probes took in their sandbox
    sandbox_by_notebook: dict = field(default_factory=dict)


# The note an attempt gets instead of its feedback pages when they cannot be made.
PAGE_MISSING = "the feedback page could not be made; your results above are complete"

# Where a graded attempt's time goes, as the grader logs it per attempt (bench-feedback-on-submit reads it):
# the engine's parts, then the service's (intake and status, feedback pages, archive and what counts).
PARTS = ("sandbox", "judges", "pictures", "gradebook", "status and ledger", "feedback pages", "archive and install")


def _untouched(nb) -> bool:
    """Every answer cell of the submitted notebook is as released: nbgrader's own test for "No
    response." (the released cell's checksum, which its sanitising wrote into each cell)."""
    from nbgrader.utils import compute_checksum, is_solution

    answers = [cell for cell in nb.cells if is_solution(cell)]
    return bool(answers) and all(cell.metadata.nbgrader.get("checksum") == compute_checksum(cell) for cell in answers)


class GradebookRouter:
    """What ``nbgrader.api.Gradebook(db_url, ...)`` means in the feedback-on-submit grader: the
    calling thread's open gradebook for that URL (see :meth:`opened`), as the batch grader shares
    one per batch; a real one for any other call.

    The gradebooks of the URLs in ``kept`` (the scratch course's and the course's, opened for every
    attempt) stay open in each thread from one block to the next. Opening one costs nbgrader a new
    database engine, a look at every table's columns, and a fresh compile of every statement it
    then runs (an engine's compiled statements are its own). A kept gradebook's session is
    closed after every block, so each block reads the database as it is; it is opened anew when
    its file was replaced (another inode)."""

    def __init__(self, real, kept: tuple[str, ...] = ()):
        self.real = real
        self.gradebook_class = _gradebook_class(real)
        self.kept = frozenset(kept)
        self.local = threading.local()
        self._all_kept: list = []  # every thread's kept gradebooks, closed by close()
        self._lock = threading.Lock()

    def __call__(self, db_url, course_id="default_course", *args, **kwargs):
        shared = getattr(self.local, "opened", {}).get(db_url)
        return shared if shared is not None else self.real(db_url, course_id, *args, **kwargs)

    def _open(self, db_url: str, course_id: str):
        """(gradebook, whether it stays open after the block)."""
        if db_url not in self.kept:
            return self.real(db_url, course_id), False
        identity = _file_identity(db_url)
        kept = self.local.__dict__.setdefault("kept", {})
        found = kept.get((db_url, course_id))
        if found is not None and found[1] == identity and identity is not None:
            return found[0], True
        if found is not None:
            self._forget(found[0])
            del kept[(db_url, course_id)]
        gb = self.real(db_url, course_id)
        identity = _file_identity(db_url)  # made by the gradebook if it was not there
        if identity is None:
            return gb, False
        kept[(db_url, course_id)] = (gb, identity)
        with self._lock:
            self._all_kept.append(gb)
        return gb, True

    def _forget(self, gb) -> None:
        with self._lock:
            if gb in self._all_kept:
                self._all_kept.remove(gb)
        gb.close()

    @contextlib.contextmanager
    def opened(self, db_url: str, course_id: str, remembered: dict | None = None):
        """This thread's gradebook for ``db_url`` until the block ends: yields the gradebook (whose
        own commits do nothing: the session writes what is pending before any read of it, and the owner
        commits) and its session (commit/rollback the real transaction); with
        ``remembered``, the instructor's cells found are kept there (``SharedGradebook.REMEMBERED``)."""
        from attention_platform.grading.batch import SharedGradebook

        from attention_platform import sqlite_files

        path = sqlite_files.path_of(db_url) if db_url not in self.kept else None
        with sqlite_files.opening(path) if path else contextlib.nullcontext():
            if path:  # a set-aside gradebook: on the engine every such file shares (sqlite_files)
                gb, keep = sqlite_files.gradebook(self.gradebook_class, path, course_id), True
            else:
                gb, keep = self._open(db_url, course_id)
            session = gb.db
            shared = SharedGradebook(gb, remembered=remembered)
            gb.db = shared.db
            opened = self.local.__dict__.setdefault("opened", {})
            opened[db_url] = shared
            try:
                yield gb, session
            except BaseException:
                session.rollback()
                raise
            finally:
                opened.pop(db_url, None)
                gb.db = session
                if keep:
                    session.remove()  # what was not committed is rolled back; the next block reads afresh
                else:
                    gb.close()

    def close(self) -> None:
        """Close every thread's kept gradebooks (their engines and pooled connections)."""
        with self._lock:
            kept, self._all_kept = self._all_kept, []
        for gb in kept:
            gb.close()


def _gradebook_class(real) -> type:
    """nbgrader's Gradebook class behind ``real``: itself, another router's, or nbgrader's own."""
    if isinstance(real, type):
        return real
    if isinstance(getattr(real, "gradebook_class", None), type):
        return real.gradebook_class
    import nbgrader.api

    return nbgrader.api.Gradebook


def _file_identity(db_url: str) -> tuple[int, int] | None:
    """(device, inode) of a ``sqlite:///`` URL's file; None for any other URL or no file."""
    from attention_platform import sqlite_files

    path = sqlite_files.path_of(db_url)
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _definition(gb, assignment: str) -> dict:
    """The assignment's definition in a gradebook: notebooks and their cells, as generate_assignment
    recorded them (what autograde restores check cells and scores from)."""
    row = gb.find_assignment(assignment)
    notebooks = []
    for nb in sorted(row.notebooks, key=lambda n: n.name):
        notebooks.append({
            "name": nb.name, "kernelspec": nb.kernelspec,
            "grade": sorted([c.name, float(c.max_score), c.cell_type] for c in nb.grade_cells),
            "solution": sorted(c.name for c in nb.solution_cells),
            "task": sorted([c.name, float(c.max_score), c.cell_type] for c in nb.task_cells),
            "source": sorted([c.name, c.cell_type, bool(c.locked), c.source, c.checksum] for c in nb.source_cells),
        })
    return {"duedate": row.duedate.isoformat() if row.duedate else None, "notebooks": notebooks}


def _write_definition(gb, assignment: str, definition: dict) -> None:
    from nbgrader.utils import parse_utc

    duedate = parse_utc(definition["duedate"]) if definition["duedate"] else None
    gb.update_or_create_assignment(assignment, duedate=duedate)
    for nb in definition["notebooks"]:
        gb.update_or_create_notebook(nb["name"], assignment, kernelspec=nb["kernelspec"])
        for name, max_score, cell_type in nb["grade"]:
            gb.update_or_create_grade_cell(name, nb["name"], assignment, max_score=max_score, cell_type=cell_type)
        for name in nb["solution"]:
            gb.update_or_create_solution_cell(name, nb["name"], assignment)
        for name, max_score, cell_type in nb["task"]:
            gb.update_or_create_task_cell(name, nb["name"], assignment, max_score=max_score, cell_type=cell_type)
        for name, cell_type, locked, source, checksum in nb["source"]:
            gb.update_or_create_source_cell(name, nb["name"], assignment, cell_type=cell_type, locked=locked,
                                            source=source, checksum=checksum)


def _replace_tree(src: Path, dest: Path) -> None:
    """``dest`` becomes a copy of ``src`` in one rename: nobody sees half of it."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fresh = dest.parent / f".installing-{dest.name}-{os.getpid()}-{threading.get_ident()}"
    if fresh.exists():
        shutil.rmtree(fresh)
    shutil.copytree(src, fresh)
    if dest.exists():
        old = dest.parent / f".replaced-{dest.name}-{os.getpid()}-{threading.get_ident()}"
        os.rename(dest, old)
        os.rename(fresh, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(fresh, dest)


class Engine:
    """Grades attempts (worker threads) and installs the ones that count (see the module)."""

    def __init__(self, course: Path, *, work: Path | None = None, attempt_seconds: float = 180.0,
                 exchange_feedback: Path | None = None, log=None):
        from nbgrader.apps import NbGrader  # noqa: F401 - nbgrader's apps register their config classes

        from attention_platform.grading.batch import Pipeline

        from attention_platform.attempts.policy import load_config

        self.log = log or logging.getLogger("feedback-on-submit")
        self.course = Path(course).resolve()
        self.work = Path(work).resolve() if work else self.course / WORK
        self.work.mkdir(mode=0o700, exist_ok=True)
        self.attempt_seconds = attempt_seconds
        self.exchange_feedback = Path(exchange_feedback) if exchange_feedback else None
        self.config = load_config(self.course)  # as the TA's nbgrader commands and formgrader load it
        self.main = Pipeline(self.course, config=self.config)
        self.course_id = self.main.coursedir.course_id
        self.scratch_db = scratch_db = self.work / "gradebook.db"
        self.scratch = Pipeline(self.course, root=self.work, db_url=f"sqlite:///{scratch_db}",
                                source=self.main.source, config=self.config)
        self._definitions: dict[str, str] = {}  # assignment -> digest of what the scratch gradebook holds
        self._checked: dict[str, float] = {}  # assignment -> when the course's definition was last compared
        self._cells: dict = {}  # the scratch gradebook's instructor's cells, as grading found them (emptied on a rebuild)
        self._grading = SharedLock()  # attempts share it; rebuilding a definition takes it alone
        self._patch = None
        self.router = None

    # ------------------------------------------------------------------ life
    def start(self) -> "Engine":
        """Route nbgrader's gradebooks through this engine (for the process's life). The sandbox
        broker is reached at the first attempt (and again whenever it went away)."""
        import nbgrader.api
        from sqlalchemy import create_engine, text

        from attention_platform.grading.batch import gradebook_patched

        engine = create_engine(self.scratch.db_url)
        with engine.begin() as db:  # the scratch gradebook's readers (feedback pages) never block its writer
            db.execute(text("PRAGMA journal_mode=WAL"))
        engine.dispose()
        self.router = GradebookRouter(nbgrader.api.Gradebook, kept=(self.scratch.db_url, self.main.db_url))
        self._patch = gradebook_patched(self.router)
        self._patch.__enter__()
        return self

    def warm(self, assignments: list[str]) -> None:
        """What the first attempt would otherwise wait for: the checks' modules (torch), the
        teaching picture's fixed panels (and matplotlib's font cache, built once per account),
        the assignments' definitions, and a sandbox worker at the broker."""
        from grader_tests.registry import picture_modules  # imports torch and every judge

        from attention_platform.grading.sandbox.client import get_zygote
        from attention_platform.grading.sandbox.grading import probe_payload

        probe_payload()
        for pictures in picture_modules():
            pictures.warm()  # the next engine or batch of this account starts without matplotlib
        for assignment in assignments:
            try:
                self.ensure_definition(assignment)
            except Exception as exc:  # noqa: BLE001 - e.g. not generated yet: the first attempt tries again
                self.log.warning("the definition of %s cannot be read yet (%s)", assignment, exc)
        needed = tuple(sorted({name for assignment in assignments for name in self.first_uses(assignment)}))
        zygote = get_zygote(needed)
        zygote.warm(needed)
        zygote.wait_ready()

    def first_uses(self, assignment: str) -> tuple[str, ...]:
        """The first uses (grading/sandbox/first_use.py) ``assignment``'s source notebooks need: its
        sandboxes' worker pays those, and no other (each one paid makes every sandbox dearer)."""
        from attention_platform.grading.sandbox import first_use

        return first_use.needed_by_folder(self.main.source / assignment)

    def close(self) -> None:
        if self._patch is not None:
            self._patch.__exit__(None, None, None)
            self._patch = None
        if self.router is not None:
            self.router.close()

    # ------------------------------------------------------------------ the assignment's definition
    def ensure_definition(self, assignment: str) -> None:
        """The scratch gradebook holds the course gradebook's current definition of ``assignment``
        (rebuilt, while no attempt is being graded, when the instructor changed it; looked at
        every ``DEFINITION_SECONDS`` at most)."""
        if time.monotonic() - self._checked.get(assignment, -1e9) < DEFINITION_SECONDS:
            return
        with self.router.opened(self.main.db_url, self.course_id) as (gb, session):
            definition = _definition(gb, assignment)
            session.rollback()
        digest = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()
        if self._definitions.get(assignment) == digest:
            self._checked[assignment] = time.monotonic()
            return
        with self._grading.exclusive():
            if self._definitions.get(assignment) == digest:
                return
            with self.router.opened(self.scratch.db_url, self.course_id) as (gb, session):
                try:
                    current = _definition(gb, assignment)
                except Exception:  # noqa: BLE001 - MissingEntry: not there yet
                    current = None
                if current is not None and current != definition:
                    gb.remove_assignment(assignment)  # cells may have gone: start from the course's
                    session.commit()
                _write_definition(gb, assignment, definition)
                session.commit()
            self._cells.clear()
            self._definitions[assignment] = digest
            self._checked[assignment] = time.monotonic()
        self.log.info("scratch gradebook: the definition of %s follows the course's gradebook (%s)", assignment,
                      digest[:12])

    # ------------------------------------------------------------------ grading
    def grade(self, attempt: Attempt) -> Result:
        """Grade one attempt in the scratch course (its pages: :meth:`feedback_pages`)."""
        from grader_tests.registry import picture_modules

        started = time.monotonic()
        deadline = started + self.attempt_seconds
        self.ensure_definition(attempt.assignment)
        with self._grading.shared():
            result = self._grade(attempt, deadline)
        result.seconds = time.monotonic() - started
        in_sandboxes = sum(result.parts.get(part, 0.0) for part in ("sandbox", "judges", "pictures"))
        result.parts["gradebook"] = result.seconds - in_sandboxes  # staging, nbgrader's steps, the grades read
        for pictures in picture_modules():
            pictures.save_measurements()  # what this attempt measured (nothing, mostly): kept if the engine is killed
        return result

    def _grade(self, attempt: Attempt, deadline: float) -> Result:
        from attention_platform.grading.batch import unreadable
        from attention_platform.grading.sandbox.client import get_zygote
        from attention_platform.grading.sandbox.grading import grade_notebook, submission_files

        student, assignment, pipeline = attempt.student, attempt.assignment, self.scratch
        result = Result()
        needed = self.first_uses(assignment)  # read again: an instructor may have changed the assignment
        get_zygote(needed).warm(needed)
        src = pipeline.submitted(student, assignment)
        _replace_tree(attempt.intake.folder, src)
        dest = pipeline.autograded(student, assignment)
        with self.router.opened(pipeline.db_url, self.course_id, remembered=self._cells) as (gb, session):
            notebook_ids = [nb.name for nb in gb.find_assignment(assignment).notebooks]
            pipeline.stage(gb, student, assignment, src, dest, timestamp=_naive(attempt.timestamp))
            session.commit()
            for notebook_id in sorted(notebook_ids, key=by_notebook_order(assignment)):
                path = src / f"{notebook_id}.ipynb"
                if not path.exists():
                    pipeline.missing(gb, student, assignment, notebook_id)
                    session.commit()
                    result.notes.append(f"{notebook_id}.ipynb was not in the submission: its checks score 0")
                    continue
                if time.monotonic() > deadline:
                    pipeline.missing(gb, student, assignment, notebook_id)
                    session.commit()
                    result.notes.append(f"{notebook_id}.ipynb was not graded in this attempt: the attempt ran longer "
                                        f"than the {self.attempt_seconds:g} s feedback on submit allows")
                    continue
                resources = pipeline.resources(student, assignment, notebook_id, dest)
                try:
                    nb = pipeline.read(path, resources)
                except Exception as exc:  # noqa: BLE001 - not a notebook: this notebook scores 0
                    session.rollback()
                    pipeline.missing(gb, student, assignment, notebook_id)
                    session.commit()
                    result.notes.append(f"{notebook_id}.ipynb could not be read as a notebook "
                                        f"({unreadable(exc)}): its checks score 0")
                    continue
                if _untouched(nb):
                    result.not_started.add(notebook_id)
                graded = grade_notebook(nb, zygote=get_zygote(needed), limits=pipeline.limits,
                                        seed_for=pipeline.seeds_for(student, assignment),
                                        filename=f"{notebook_id}.ipynb",
                                        extra_files=submission_files(dest, notebook_id))
                in_sandbox = graded.seconds - graded.judging - graded.picturing
                result.sandbox_by_notebook[notebook_id] = in_sandbox
                for part, seconds in (("sandbox", in_sandbox), ("judges", graded.judging), ("pictures", graded.picturing)):
                    result.parts[part] = result.parts.get(part, 0.0) + seconds
                if graded.stopped:
                    result.notes.append(f"{notebook_id}.ipynb: {graded.stopped}")
                pipeline.finish(nb, resources, dest, notebook_id, compact=True)  # read by pages and install only
                session.commit()
            self._read_result(gb, attempt, result)
            session.rollback()
        return result

    def _read_result(self, gb, attempt: Attempt, result: Result) -> None:
        from nbgrader.api import BaseCell, Grade, Notebook, SubmittedNotebook

        checks, order = checks_by_grade_id(attempt.assignment), by_notebook_order(attempt.assignment)
        catalogue = {grade_id: i for i, grade_id in enumerate(checks)}  # the order the notebook shows them in
        submission = gb.find_submission(attempt.assignment, attempt.student)
        # every grade of the submission in one query (walking its rows loads each grade's cell and points alone)
        grades = (gb.db.query(Notebook.name, BaseCell.name, Grade.max_score, Grade.auto_score)
                  .select_from(Grade)
                  .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
                  .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
                  .join(BaseCell, Grade.cell_id == BaseCell.id)
                  .filter(SubmittedNotebook.assignment_id == submission.id).all())
        for notebook, name, max_score, auto_score in sorted(
                grades, key=lambda g: (order(g[0]), catalogue.get(g[1], len(catalogue)), g[1])):
            check = checks.get(name)
            max_score = float(max_score or 0)
            if check is None:  # a written answer: the course staff grade it
                result.manual_max += max_score
                continue
            got = float(auto_score or 0)
            result.score += got
            result.max_score += max_score
            result.checks.append({"id": check.id, "notebook": notebook, "title": check.title,
                                  "passed": got >= max_score > 0 or (max_score == 0 and got >= 0),
                                  "points": max_score, "started": notebook not in result.not_started})

    # ------------------------------------------------------------------ set aside, until its pages are made
    def set_aside(self, attempt: Attempt) -> None:
        """Move a graded attempt out of the scratch course, so that its student's next attempt can be
        graded before this one's pages are made: its submitted and autograded folders, and a copy of
        the scratch gradebook as it is now (the pages read this attempt's grades from it), go to
        ``<WORK>/graded/<id>``, laid out as a course of their own (:meth:`feedback_pages`, :meth:`archive`).
        If the copy cannot be made, nothing moves and the attempt stays where it is."""
        import sqlite3

        folder = self.work / ASIDE / str(attempt.id)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True, mode=0o700)
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.scratch_db}?mode=ro", uri=True)) as src, \
                    contextlib.closing(sqlite3.connect(folder / "gradebook.db")) as copy:
                src.backup(copy)  # what is committed: this attempt's grades; other workers' open writes not
        except (OSError, sqlite3.Error):
            shutil.rmtree(folder, ignore_errors=True)
            raise
        for step in (self.scratch.coursedir.submitted_directory, self.scratch.coursedir.autograded_directory):
            src = self.work / step / attempt.student / attempt.assignment
            if src.exists():
                (folder / step / attempt.student).mkdir(parents=True, mode=0o700)
                os.rename(src, folder / step / attempt.student / attempt.assignment)
        attempt.aside = folder

    def _finishing_root(self, attempt: Attempt) -> tuple[Path, str]:
        """The course folder and gradebook the attempt's pages and archive read: set aside, or the scratch."""
        if attempt.aside is not None:
            return attempt.aside, f"sqlite:///{attempt.aside / 'gradebook.db'}"
        return self.work, self.scratch.db_url

    def feedback_pages(self, attempt: Attempt, result: Result) -> None:
        """The feedback page of each notebook, as the TA's generate_feedback makes it, put where
        nbgrader's fetch_feedback finds it for this submission (``<hash>.html``)."""
        from nbgrader.converters import GenerateFeedback
        from nbgrader.coursedir import CourseDirectory
        from nbgrader.utils import notebook_hash

        root, db_url = self._finishing_root(attempt)
        coursedir = CourseDirectory(config=self.config)
        coursedir.root = str(root)
        coursedir.db_url = db_url
        coursedir.assignment_id = attempt.assignment
        coursedir.student_id = attempt.student
        out = Path(coursedir.format_path(coursedir.feedback_directory, attempt.student, attempt.assignment))
        if out.exists():
            shutil.rmtree(out)
        # A set-aside gradebook is the attempt's own, written by nobody while its pages are made: what
        # every page reads of the whole submission is read once. The scratch gradebook is not held.
        held = read_once.holding(db_url) if attempt.aside is not None else contextlib.nullcontext()
        with self.router.opened(db_url, self.course_id), held:
            # a copy: nbgrader's converters write their defaults into the config they are given
            config = copy.deepcopy(self.config)
            config.FeedbackSummary.variants_course = str(self.course)  # the scratch course has no key nor switch
            app = GenerateFeedback(coursedir=coursedir, config=config)
            app.log = self.log.getChild("generate_feedback")
            app.log.setLevel(logging.ERROR)  # one line per notebook and nbconvert's config chatter per attempt
            app.force = True
            try:
                app.start()
            except Exception as exc:  # noqa: BLE001 - the result stands; the page is missing
                result.notes.append(PAGE_MISSING)
                self.log.error("feedback pages of attempt %s failed: %s", attempt.id, exc)
                return
        if self.exchange_feedback is None or not attempt.intake.secret:
            return
        folder = self.exchange_feedback / attempt.student
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            for page in sorted(out.glob("*.html")):
                name = notebook_hash(secret=attempt.intake.secret, notebook_id=page.stem) + ".html"
                _put(fd, name, page.read_bytes())
                result.pages[page.stem] = name
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ archive and install
    def archive(self, attempt: Attempt) -> Path:
        """Move the attempt's graded files (from where it was set aside, else from the scratch course)
        into ``archive/<student>/<assignment>/<id>``."""
        folder = archived_attempt(self.work, attempt.student, attempt.assignment, attempt.id)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True, mode=0o700)
        root, _ = self._finishing_root(attempt)
        coursedir = self.scratch.coursedir
        for step, name in ((coursedir.submitted_directory, "submitted"), (coursedir.autograded_directory, "autograded"),
                           (coursedir.feedback_directory, "feedback")):
            src = root / step / attempt.student / attempt.assignment
            if src.exists():
                os.rename(src, folder / name)
        if attempt.aside is not None:
            shutil.rmtree(attempt.aside, ignore_errors=True)
        shutil.rmtree(attempt.intake.folder, ignore_errors=True)  # last: until now a restart grades it again
        return folder

    def forget_set_aside(self) -> None:
        """At start: what a stopped grader had set aside (each such attempt is graded again, from its intake)."""
        shutil.rmtree(self.work / ASIDE, ignore_errors=True)

    def install(self, attempt_id: int, student: str, assignment: str, timestamp, written_from: int | None = None) -> None:
        """Make the archived attempt the course's submission of ``student``: its files into
        ``submitted/`` and ``autograded/``, its grades into the course's gradebook (manual grades
        already given stay, as nbgrader's autograde keeps them). ``written_from``: another archived
        attempt whose written answers replace this one's (the newer work a TA grades under ``best``)."""
        from attention_platform.grading.course_lock import course_grading_lock

        archive = self.work / "archive" / student / assignment
        folder = archive / str(attempt_id)
        written = archive / str(written_from) / "autograded" if written_from not in (None, attempt_id) else None
        pipeline = self.main
        src = pipeline.submitted(student, assignment)
        with course_grading_lock(pipeline.root):  # never while a TA's autograde writes this course
            _replace_tree(folder / "submitted", src)
            if written is not None:  # a TA's own autograde of submitted/ keeps the same answers
                for path in src.glob("*.ipynb"):
                    _rewrite_written_answers(path, written / path.name)
            (src / "timestamp.txt").write_text(_naive(timestamp).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
            self._install_grades(folder, pipeline, student, assignment, timestamp, written)

    def _install_grades(self, folder: Path, pipeline, student: str, assignment: str, timestamp,
                        written: Path | None = None) -> None:
        src, dest = pipeline.submitted(student, assignment), pipeline.autograded(student, assignment)
        with self.router.opened(pipeline.db_url, self.course_id) as (gb, session):
            notebook_ids = [nb.name for nb in gb.find_assignment(assignment).notebooks]
            graded_texts = {notebook_id: _graded_answers(dest / f"{notebook_id}.ipynb") for notebook_id in notebook_ids}
            pipeline.stage(gb, student, assignment, src, dest, timestamp=_naive(timestamp))
            session.commit()
            for notebook_id in notebook_ids:
                graded = folder / "autograded" / f"{notebook_id}.ipynb"
                if not graded.exists():
                    pipeline.missing(gb, student, assignment, notebook_id)
                    session.commit()
                    continue
                import nbformat

                nb = nbformat.read(graded, as_version=4)
                if written is not None:
                    _with_written_answers(nb, written / f"{notebook_id}.ipynb")
                given = _manual_grades(gb, nb, notebook_id, assignment, student)  # before autograde re-flags them
                pipeline.finish(nb, pipeline.resources(student, assignment, notebook_id, dest), dest, notebook_id)
                _review_manual_grades(gb, nb, notebook_id, assignment, student, given, graded_texts[notebook_id])
                session.commit()

    def prune(self, student: str, assignment: str, keep: set[int]) -> list[int]:
        """Remove archived attempts of ``student`` not in ``keep``; returns their ids."""
        base = self.work / "archive" / student / assignment
        removed = []
        if base.is_dir():
            for folder in base.iterdir():
                if folder.name.isdigit() and int(folder.name) not in keep:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(int(folder.name))
        return removed


class SharedLock:
    """Many holders of ``shared()`` at once, or one of ``exclusive()``."""

    def __init__(self):
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextlib.contextmanager
    def shared(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._shared == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def archived_attempt(work: Path, student: str, assignment: str, attempt_id: int) -> Path:
    """The folder of an attempt's graded files (``submitted/``, ``autograded/``, ``feedback/``),
    kept for the newest attempts and the one that counts (FeedbackOnSubmit.keep_attempt_files)."""
    return Path(work) / "archive" / student / assignment / str(attempt_id)


def _is_written_answer(cell) -> bool:
    """A written answer: nbgrader's manually graded answer cell (a solution cell with points)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("solution")) and bool(meta.get("grade")) and bool(meta.get("grade_id"))


def _written_answers(nb) -> dict[str, str]:
    """The written answers of ``nb``: grade id to text."""
    return {cell.metadata.nbgrader["grade_id"]: cell.source for cell in nb.cells if _is_written_answer(cell)}


def _graded_answers(path: Path) -> dict[str, str] | None:
    """The written answers of the course's graded copy at ``path`` (the text a TA graded); None if
    there is none to read."""
    from attention_platform import bounded_json
    from attention_platform.grading.batch import SUBMITTED_NOTEBOOK

    try:
        return _written_answers(bounded_json.read_notebook(path, SUBMITTED_NOTEBOOK))
    except Exception:  # noqa: BLE001 - no graded copy (the first install) or not a notebook
        return None


def _manual_grades(gb, nb, notebook_id: str, assignment: str, student: str) -> dict[str, tuple[float, bool]]:
    """The grades a TA gave to the written answers of ``nb``: grade id to (score, needs a grade)."""
    from nbgrader.api import MissingEntry

    given = {}
    for grade_id in _written_answers(nb):
        try:
            grade = gb.find_grade(grade_id, notebook_id, assignment, student)
        except MissingEntry:
            continue
        if grade.manual_score is not None:
            given[grade_id] = (grade.manual_score, grade.needs_manual_grade)
    return given


def _review_manual_grades(gb, nb, notebook_id: str, assignment: str, student: str,
                          given: dict[str, tuple[float, bool]], graded_texts: dict[str, str] | None) -> None:
    """After a new install of the submission: a TA's grade on a written answer whose text is the one
    they graded stays as they left it (nbgrader's autograde would flag it for review); one whose text
    changed is no grade for what the student submitted now: it is cleared and the answer needs a
    grade again, the earlier score leading the TA's comment so the TA sees it when grading."""
    answers = _written_answers(nb)
    for grade_id, (score, needed) in given.items():
        grade = gb.find_grade(grade_id, notebook_id, assignment, student)
        if graded_texts is not None and graded_texts.get(grade_id) == answers[grade_id]:
            grade.needs_manual_grade = needed
            continue
        comment = gb.find_comment(grade_id, notebook_id, assignment, student)
        earlier = (f"Graded {score:g} of {grade.max_score:g} for an earlier text of this answer; "
                   "the student has since submitted a new one.")
        comment.manual_comment = f"{earlier}\n\n{comment.manual_comment}" if comment.manual_comment else earlier
        grade.manual_score, grade.needs_manual_grade = None, True


def _with_written_answers(nb, other: Path) -> bool:
    """Give each written answer of ``nb`` the text of the same answer (by grade id) in the notebook
    at ``other``, one the grader wrote itself (an attempt's autograded copy), if there is one.
    True if ``nb`` changed."""
    if not other.is_file():
        return False
    import nbformat

    answers = _written_answers(nbformat.read(other, as_version=4))
    changed = False
    for cell in nb.cells:
        if _is_written_answer(cell) and cell.metadata.nbgrader["grade_id"] in answers:
            changed |= cell.source != answers[cell.metadata.nbgrader["grade_id"]]
            cell.source = answers[cell.metadata.nbgrader["grade_id"]]
    return changed


def _rewrite_written_answers(path: Path, other: Path) -> None:
    """The submitted notebook at ``path`` with the written answers of ``other`` (``_with_written_answers``);
    one that cannot be read as a notebook, within the bounds grading reads it in, is left as it is
    (its grading said so already)."""
    import nbformat

    from attention_platform import bounded_json
    from attention_platform.grading.batch import SUBMITTED_NOTEBOOK

    try:
        nb = bounded_json.read_notebook(path, SUBMITTED_NOTEBOOK)
    except Exception:  # noqa: BLE001 - not a notebook: nothing to carry over
        return
    if _with_written_answers(nb, other):
        nbformat.write(nb, path)


def _naive(value):
    from attention_platform.attempts.ledger import naive

    return naive(value)


def _put(dir_fd: int, name: str, data: bytes, mode: int = 0o640) -> None:
    """Write ``name`` in the folder open at ``dir_fd`` in one rename (the student reads it)."""
    import secrets

    tmp = f".{name}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
