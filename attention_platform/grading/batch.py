"""``attention-course autograde-batch ASSIGNMENT``: grade a whole class in parallel.

The same steps as ``nbgrader autograde`` with the course's ``nbgrader_config.py``,
in one process:

1. per student (main thread): create/update the student and the submission
   (timestamp, lateness) in the standard nbgrader gradebook, copy the
   submission's files to ``autograded/``, read the notebook and run the
   configured ``Autograde.sanitize_preprocessors`` (nbgrader's own classes);
2. in ``--jobs`` worker threads: ``grade_notebook`` (one fresh sandbox per
   submission from one warm zygote, judges in this process) -- the step
   ``SandboxedExecute`` performs inside ``nbgrader autograde``;
3. per student (main thread): the rest of ``Autograde.autograde_preprocessors``
   (``SanitizeCheckOutputs``, ``LimitOutput``, ``SaveAutoGrades``, late
   penalties, ...), then the autograded notebook is written.

nbgrader's database preprocessors open a new ``Gradebook`` per notebook; here
they share one session (``_shared_gradebook``), which is most of the speed-up
besides the warm sandbox. Grades land in the same tables, so the formgrader
shows them as if ``nbgrader autograde`` had run.

Why this loop and not nbgrader's own ``Autograde`` app per submission: that app converts one
notebook at a time on one thread (its preprocessors keep per-notebook state on themselves and
it opens a gradebook per notebook), so it cannot overlap one student's sandbox run with another's
database work, and run per submission as a process it pays its whole start (imports, gradebook,
kernel) for each one. Everything that decides a grade is still nbgrader's: the course's configured
preprocessor classes (instantiated per thread, ``Pipeline``), its gradebook tables and its
validator; only the loop around them is ours, and tests/grading/test_cheats.py
(``test_autograde_batch_gives_the_same_grades_as_nbgrader_autograde``) and ``make bench``
compare its grades with stock ``nbgrader autograde``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from pathlib import Path

import nbformat
from nbformat.v4.rwbase import rejoin_lines

from attention_platform import bounded_json, start_up_gc, third_party_patches
from attention_platform.console import progress_bar
from attention_platform.course import variants
from attention_platform.course.directory import NotACourse, require_course

# A submitted notebook's shape is checked before it is parsed; its size is collect's (ExchangeLimits).
SUBMITTED_NOTEBOOK = replace(bounded_json.NOTEBOOK, max_bytes=100_000_000)


class BatchError(Exception):
    """The batch cannot begin (the message says what to do first); nothing was graded."""


@dataclass
class StudentOutcome:
    student: str
    score: float = 0.0
    max_score: float = 0.0
    failed: list = field(default_factory=list)
    status: str = "ok"
    seconds: float = 0.0


class _Session:
    """The gradebook's session as nbgrader's preprocessors see it in a shared gradebook: their
    per-cell ``commit()`` does nothing, and their ``rollback()`` after a failed write is left to the
    owner of the transaction (the error reaches it). The owner commits, so a student's grades are
    written together or not at all. Nothing is written per cell (SaveAutoGrades commits after every
    one): whatever reads the database first writes what is pending (the session's autoflush), so
    every read still sees every write before it."""

    def __init__(self, session):
        self._session = session

    def commit(self):
        pass

    def rollback(self):
        pass

    def __getattr__(self, name):
        return getattr(self._session, name)


class SharedGradebook:
    """What ``Gradebook(url)`` returns inside the batch (and inside feedback on submit's grading): one
    open gradebook, never closed early."""

    # Read-only look-ups of the instructor's (source) notebook: the same for every student.
    CACHED = ("find_notebook", "find_source_cell", "find_grade_cell", "find_solution_cell", "find_task_cell",
              "find_graded_cell", "find_assignment")

    # Of those, the instructor's cells that OverwriteCells reads of every cell of every submission, and the
    # notebooks whose cells it and RestoreCellMetadata list for every submission: with ``remembered`` (a dict
    # its owner empties whenever the definition changes), found ones are kept across gradebooks as
    # CellDefinition and NotebookDefinition snapshots (a cell a submission names that is not there is
    # looked up each time).
    REMEMBERED = {"find_source_cell": lambda row: CellDefinition(row),
                  "find_graded_cell": lambda row: CellDefinition(row),
                  "find_notebook": lambda row: NotebookDefinition(row)}

    def __init__(self, gradebook, *, remembered: dict | None = None):
        self._gb = gradebook
        self.db = _Session(gradebook.db)
        self._cache: dict = {}
        self._remembered = remembered

    def __call__(self, *args, **kwargs):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass

    def _submitted(self, kind: str, name: str, notebook: str, assignment: str, student: str):
        """A student's grade or comment rows of one notebook, loaded in one query each (the
        submission they belong to found once for both)."""
        from nbgrader.api import Comment, Grade
        from sqlalchemy.orm import joinedload

        key = (kind, notebook, assignment, student)
        if key not in self._cache:
            submitted = self._gb.find_submission_notebook(notebook, assignment, student)
            for each, model in (("grades", Grade), ("comments", Comment)):
                # each row with its cell, whose name keys it (read row by row, each cell was a query of its own)
                rows = self._gb.db.query(model).options(joinedload(model.cell)).filter(model.notebook_id == submitted.id)
                self._cache[(each, notebook, assignment, student)] = {row.name: row for row in rows}
        rows = self._cache[key]
        if name not in rows:
            return getattr(self._gb, "find_grade" if kind == "grades" else "find_comment")(name, notebook, assignment, student)
        return rows[name]

    def find_grade(self, grade_cell: str, notebook: str, assignment: str, student: str):
        return self._submitted("grades", grade_cell, notebook, assignment, student)

    def find_comment(self, solution_cell: str, notebook: str, assignment: str, student: str):
        return self._submitted("comments", solution_cell, notebook, assignment, student)

    def __getattr__(self, name):
        method = getattr(self._gb, name)
        if name not in self.CACHED:
            return method

        def cached(*args):
            key = (name, args)
            if self._remembered is not None and name in self.REMEMBERED:
                found = self._remembered.get(key)
                if found is None:
                    found = self.REMEMBERED[name](method(*args))  # MissingEntry propagates, as nbgrader's
                    self._remembered[key] = found
                return found
            if key not in self._cache:
                try:
                    self._cache[key] = (True, method(*args))
                except Exception as exc:  # noqa: BLE001 - e.g. MissingEntry: remembered too
                    self._cache[key] = (False, exc)
            ok, value = self._cache[key]
            if not ok:
                raise value
            return value

        return cached


class CellDefinition:
    """One of the instructor's cells as the gradebook defines it, its columns only (name, type,
    points, source, checksum, locked, ...): kept across gradebook sessions, where a row of one
    session would have expired. Reading anything else of it (a relationship) is an AttributeError."""

    def __init__(self, row):
        from sqlalchemy import inspect

        for column in inspect(row).mapper.column_attrs:
            setattr(self, column.key, getattr(row, column.key))


class NotebookDefinition:
    """One of the instructor's notebooks as the gradebook defines it: its table's columns (name,
    kernelspec, ...; not the sums over its submissions, which change) and its cells of each kind
    (as :class:`CellDefinition`, in the gradebook's order). Reading anything else is an AttributeError."""

    CELLS = ("grade_cells", "solution_cells", "task_cells", "source_cells")

    def __init__(self, row):
        for column in row.__table__.columns:
            setattr(self, column.key, getattr(row, column.key))
        for cells in self.CELLS:
            setattr(self, cells, [CellDefinition(cell) for cell in getattr(row, cells)])


class _CachedJsonschema:
    """``jsonschema`` for nbgrader's cell-metadata checks with the validator built once
    per schema: ``jsonschema.validate`` re-checks the schema itself on every call
    (most of nbgrader's per-notebook CPU time); errors raised are the same."""

    def __init__(self, real):
        self._real, self._cache, self._verdicts = real, {}, {}
        self._keys: dict[int, tuple] = {}  # id(schema) -> (schema, its key): one validator's schema is one object

    def validate(self, instance, schema, *args, **kwargs):
        import json

        known = self._keys.get(id(schema))
        if known is not None and known[0] is schema:
            key = known[1]
        else:
            key = json.dumps(schema, sort_keys=True)
            if len(self._keys) >= 64:
                self._keys.clear()
            self._keys[id(schema)] = (schema, key)  # the schema kept alive, so its id is not reused
        validator = self._cache.get(key)
        if validator is None:
            cls = self._real.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._cache[key] = cls(schema)
        # The same cell metadata comes back in every submission (RestoreCellMetadata puts the
        # instructor's back): its verdict is remembered, the error included.
        try:
            seen = (key, json.dumps(instance, sort_keys=True))
        except (TypeError, ValueError):
            seen = None
        if seen is not None and seen in self._verdicts:
            error = self._verdicts[seen]
        else:
            error = self._real.exceptions.best_match(validator.iter_errors(instance))
            if seen is not None and len(self._verdicts) < 10_000:
                self._verdicts[seen] = error
        if error is not None:
            raise error

    def __getattr__(self, name):
        return getattr(self._real, name)


def gradebook_patched(replacement):
    """Point every ``Gradebook`` name nbgrader's preprocessors use at ``replacement`` (called as
    ``Gradebook(db_url, course_id)``), and build nbgrader's metadata validator once: OverwriteCells
    and CheckCellMetadata make a ``MetadataValidator`` per cell, which reads and parses its schema
    file each time, for every submission; it keeps nothing but that schema, so one serves them all
    (``third_party_patches.grade_into``)."""
    import nbgrader.nbgraderformat.common as nbgrader_format
    from nbgrader.preprocessors import overwritecells

    return third_party_patches.grade_into(replacement, overwritecells.MetadataValidator(),
                                          _CachedJsonschema(nbgrader_format.jsonschema))


@contextlib.contextmanager
def _shared_gradebook(gradebook):
    """Point every ``Gradebook`` name nbgrader's preprocessors use at one open gradebook,
    and build nbgrader's metadata validator once."""
    with gradebook_patched(SharedGradebook(gradebook)) as shared:
        yield shared


def _fresh(session, rows) -> None:
    """Expire one student's submitted assignment and notebooks (``rows``): their scores and lateness
    are computed by the database (column properties), so they are read again after grades change.
    The rows are the ones staging made or found for the student (``_BatchRun.start``), not looked for
    among every row the session holds: those grow with each student graded, which made a class's
    batch quadratic in its size."""
    for row in rows:
        if row in session:  # a step rolled back may have taken it out
            session.expire(row)


def load_course_config(course: Path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


class Pipeline:
    """The course's ``nbgrader autograde`` steps around the sandbox, built once per process.

    ``root``/``db_url``/``source`` grade in another course directory and gradebook than the
    course's own (feedback on submit's scratch course) with the course's configuration.
    """

    def __init__(self, course: Path, *, root: Path | None = None, db_url: str | None = None,
                 source: Path | None = None, config=None):
        from nbgrader import preprocessors as pp
        from nbgrader.coursedir import CourseDirectory

        from attention_platform.grading.sandbox.grading import seed_function
        from attention_platform.grading.sandboxed_execute import SandboxedExecute

        self.course = Path(course).resolve()
        self.config = config if config is not None else load_course_config(self.course)
        coursedir = CourseDirectory(config=self.config)
        coursedir.root = str(Path(root).resolve() if root else self.course)
        if db_url:
            coursedir.db_url = db_url
        self.coursedir = coursedir
        self.root = Path(coursedir.root)
        self.db_url = coursedir.db_url
        self.source = Path(source) if source else self.course / coursedir.source_directory
        sandboxed = SandboxedExecute(config=self.config)
        self.limits, self.seed_for = sandboxed.limits(), seed_function(sandboxed.secret_seed)
        self._sanitize_classes = list(self.config.Autograde.sanitize_preprocessors)
        self._post_classes = [cls for cls in self.config.Autograde.autograde_preprocessors
                              if not (isinstance(cls, type) and issubclass(cls, (pp.Execute, SandboxedExecute)))]
        self._local = threading.local()  # nbgrader's preprocessors keep per-notebook state on themselves
        self.ignore = list(coursedir.ignore)
        self._source_files: dict[str, list[Path]] = {}

    @property
    def sanitize(self) -> list:
        """This thread's instances of the course's ``Autograde.sanitize_preprocessors``."""
        if not hasattr(self._local, "sanitize"):
            self._local.sanitize = [cls(config=self.config) for cls in self._sanitize_classes]
        return self._local.sanitize

    @property
    def post(self) -> list:
        """This thread's instances of the course's ``Autograde.autograde_preprocessors`` after execution."""
        if not hasattr(self._local, "post"):
            self._local.post = [cls(config=self.config) for cls in self._post_classes]
        return self._local.post

    def submitted(self, student: str, assignment: str) -> Path:
        return self.root / self.coursedir.submitted_directory / student / assignment

    def autograded(self, student: str, assignment: str) -> Path:
        return self.root / self.coursedir.autograded_directory / student / assignment

    def source_files(self, assignment: str) -> list[Path]:
        """The instructor's non-notebook files of the assignment (data), copied next to every submission."""
        if assignment not in self._source_files:
            source_dir = self.source / assignment
            self._source_files[assignment] = [
                p for p in source_dir.rglob("*") if p.is_file() and p.suffix != ".ipynb"
                and not any(fnmatch(part, pat) for part in p.relative_to(source_dir).parts for pat in self.ignore)]
        return self._source_files[assignment]

    def stage(self, gb, student: str, assignment: str, src: Path, dest: Path, timestamp=None):
        """Student and submission rows, and ``dest`` holding the submission's other files and the
        instructor's (as nbgrader's autograde prepares ``autograded/``). The caller commits. Returns
        the submitted assignment (nbgrader's ``SubmittedAssignment``)."""
        from nbgrader.utils import parse_utc

        gb.update_or_create_student(student)
        if timestamp is None:
            stamp_file = src / "timestamp.txt"
            stamp = stamp_file.read_text().strip() if stamp_file.exists() else ""
            timestamp = parse_utc(stamp) if stamp else None
        if timestamp is not None:
            submission = gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        else:
            submission = gb.update_or_create_submission(assignment, student)
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for path in src.rglob("*"):
            rel = path.relative_to(src)
            if path.is_file() and path.suffix != ".ipynb" and not any(
                    fnmatch(part, pat) for part in rel.parts for pat in self.ignore):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, dest / rel)
        source_dir = self.source / assignment
        for path in self.source_files(assignment):
            rel = path.relative_to(source_dir)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest / rel)
        return submission

    def resources(self, student: str, assignment: str, notebook_id: str, dest: Path) -> dict:
        return {"unique_key": notebook_id, "output_files_dir": f"{notebook_id}_files",
                "metadata": {"name": notebook_id, "path": str(dest)},
                "nbgrader": {"student": student, "assignment": assignment, "notebook": notebook_id,
                             "db_url": self.db_url}}

    def read(self, path: Path, resources: dict):
        """The submitted notebook, sanitised as nbgrader's autograde does before executing it.
        Raises for a file that is not a notebook (rejected for that student alone)."""
        text = path.read_text()
        bounded_json.check_shape(text, SUBMITTED_NOTEBOOK, "the notebook")
        raw = json.loads(text)
        if isinstance(raw, dict) and raw.get("nbformat") == 4:  # read without schema validation,
            nb = rejoin_lines(nbformat.from_dict(raw))  # which nbgrader only logs anyway
        else:
            nb = nbformat.reads(text, as_version=4)
        for pre in self.sanitize:
            nb, resources = pre(nb, resources)
        nb = nbformat.from_dict(nb)  # as nbgrader's write-then-read between the two phases
        who = resources["nbgrader"]
        variants.write_cells(nb, self.course, who["assignment"], who["student"], who["notebook"])
        return nb

    def seeds_for(self, student: str, assignment: str):
        """Each check's seed for ``student``'s submission (their variant's for the checks that have one)."""
        return variants.seeds_for(self.course, assignment, student, self.seed_for)

    def finish(self, nb, resources: dict, dest: Path, notebook_id: str, after_save=None, compact: bool = False):
        """The rest of nbgrader's autograde after execution, then the autograded notebook is written.
        ``after_save()`` runs once the grades are saved (a session that keeps its rows across
        commits expires the submission's computed scores there). ``compact``: written without
        nbformat's layout for people (indented, one line of text per string), which costs more than
        saving the grades, for a copy that only the grader's own steps read back (any notebook reader
        reads the same notebook); ``nb`` itself then loses nbformat's transient fields, as a reader's copy does."""
        from nbgrader.preprocessors import SaveAutoGrades

        for pre in self.post:
            nb, resources = pre(nb, resources)  # __call__ honours each preprocessor's `enabled`
            if after_save is not None and isinstance(pre, SaveAutoGrades):
                after_save()
        if compact:
            from nbformat.v4.nbjson import BytesEncoder, strip_transient

            text = json.dumps(strip_transient(nb), cls=BytesEncoder, sort_keys=True, ensure_ascii=False)
        else:
            text = nbformat.v4.nbjson.writes(nb)
        (dest / f"{notebook_id}.ipynb").write_text(text)
        return nb

    def missing(self, gb, student: str, assignment: str, notebook_id: str) -> None:
        """A notebook the student did not submit scores 0, as nbgrader's autograde records it."""
        submission = gb.find_submission_notebook(notebook_id, assignment, student)
        for grade in submission.grades:
            grade.auto_score = 0
            grade.needs_manual_grade = False


def autograde_batch(course: Path, assignment: str, *, jobs: int | None = None, students: list[str] | None = None,
                    progress: bool = True, log=print, on_progress=None) -> list[StudentOutcome]:
    """Autograde every submission of ``assignment`` in ``course``; return one outcome per student.
    :class:`BatchError` if there is nothing to grade: no course, an assignment the course or its
    gradebook does not know, no submission (by the ``students`` named). ``on_progress(done, total,
    grading, finished)`` is called when a student's notebooks have gone to the sandbox (``finished``
    None) and when a student is done (``finished`` their :class:`StudentOutcome`); ``grading`` lists
    the students whose notebooks are in the sandbox."""
    from nbgrader.api import Gradebook, MissingEntry

    from grader_tests.registry import picture_modules

    from attention_platform.grading.course_lock import course_grading_lock
    from attention_platform.grading.sandbox import first_use
    from attention_platform.grading.sandbox.client import get_zygote

    started = time.monotonic()
    try:
        course_dir = require_course(course)  # before the worker starts: a mistyped course is said at once
    except NotACourse as exc:
        raise BatchError(str(exc)) from None
    # From the main thread (it lives as long as this process); already started by the command line,
    # which warms the same first uses: the ones the assignment's notebooks need.
    zygote = get_zygote(first_use.needed_by_assignment(course_dir, assignment))
    pipeline = Pipeline(course_dir)
    found = submitted_students(pipeline, assignment, students)
    missing = sorted(set(students or ()) - set(found))
    jobs = max(1, jobs or (os.cpu_count() or 2) + 1)

    with course_grading_lock(pipeline.root), \
            Gradebook(pipeline.db_url, pipeline.coursedir.course_id) as gb, _shared_gradebook(gb) as shared, \
            ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="grade") as pool:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise BatchError(_unknown_assignment(pipeline, assignment)) from None
        if not found:
            raise BatchError(_nothing_submitted(pipeline, assignment, missing))
        bar = progress_bar(len(found), f"autograding {assignment}") if progress else None
        session = gb.db
        session.commit()  # the gradebook's set-up, before its transactions begin with BEGIN
        nesting_savepoints(gb.engine)
        gb.db = shared.db  # the gradebook API's own commits are left to the batch's steps (_BatchRun._step)
        # A commit per student must not expire the instructor's rows every student's grading reads
        # (notebooks, cells: ~25 SELECTs a student to load them again); what a student's grading
        # must read fresh, its own submission's computed scores, is expired by hand (_fresh).
        (session() if callable(session) else session).expire_on_commit = False  # the scoped session's Session
        run = _BatchRun(pipeline, gb, session, pool, zygote, assignment, bar, on_progress, len(found))
        for student in found:
            run.start(student)
            while len(run.pending) >= 2 * jobs:  # keep the pool busy but finish what is done: memory stays flat
                run.finish_some()
        while run.pending:
            run.finish_some()
        if bar:
            bar.close()
        run.commit()  # the last steps
        session.expire_all()  # the scores below as the database computes them now
        gb.db = session
        _read_scores(gb, assignment, run.outcomes)
    for student in missing:  # asked for by name: a row that says why nothing was graded
        run.outcomes[student] = StudentOutcome(student, status="error: no submission")
    for pictures in picture_modules():
        pictures.save_measurements()  # what the pictures measured, for the next batch
    if log:
        log(summary_table(list(run.outcomes.values()), time.monotonic() - started))
    return list(run.outcomes.values())


def _unknown_assignment(pipeline: Pipeline, assignment: str) -> str:
    source = pipeline.source
    if not (source / assignment).is_dir():
        known = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
        return (f"no assignment {assignment!r} in this course ({source} holds "
                f"{', '.join(repr(name) for name in known) or 'none'})")
    return (f"the gradebook ({pipeline.db_url}) has no assignment {assignment!r}: release it first with "
            f"`nbgrader generate_assignment {assignment}`, which records it and its graded cells there")


def _nothing_submitted(pipeline: Pipeline, assignment: str, asked: list[str]) -> str:
    where = pipeline.root / pipeline.coursedir.submitted_directory
    if asked:
        return f"no submission of {assignment!r} by {', '.join(asked)} in {where}"
    return (f"no submission of {assignment!r} in {where}: collect them first (`nbgrader collect {assignment}`, "
            "or Collect in the formgrader)")


def submitted_students(pipeline: Pipeline, assignment: str, only: list[str] | None = None) -> list[str]:
    """Students with a ``submitted/<student>/<assignment>`` folder, sorted; only ``only`` if given."""
    submitted_root = pipeline.root / pipeline.coursedir.submitted_directory
    found = sorted(p.parent.name for p in submitted_root.glob(f"*/{assignment}"))
    return [s for s in found if s in set(only)] if only else found


def _read_scores(gb, assignment: str, outcomes: dict[str, StudentOutcome]) -> None:
    """Each graded student's score and maximum, as the formgrader lists them (nbgrader's
    ``submission_dicts``: one query for the class, not three per student, which a large class's
    batch would wait for at its end)."""
    scores = {row["student"]: (row["score"], row["max_score"]) for row in gb.submission_dicts(assignment)}
    for student, outcome in outcomes.items():
        if student in scores:
            outcome.score, outcome.max_score = (float(value or 0) for value in scores[student])


COMMIT_EVERY = 16  # gradebook steps per transaction (a student is two or three) ...
COMMIT_SECONDS = 0.5  # ... or fewer, if they took this long: the database is locked for writers meanwhile
# How long a transaction waits for another writer of the gradebook (feedback on submit's grader, a TA's save
# in the formgrader) before its students are reported failed: theirs are short, a sandbox never holds ours.
BUSY_SECONDS = 60


class GradebookBusy(Exception):
    """The transaction holding a student's steps could not be written: the database stayed locked."""


def nesting_savepoints(engine) -> None:
    """Make savepoints nest on SQLite. Its Python driver opens a transaction only before a write, so
    a SAVEPOINT issued first opens one of its own, and releasing it commits (SQLAlchemy's SQLite
    notes, "Serializable isolation / Savepoints"): a BEGIN at the start of every transaction of
    ``engine`` makes each savepoint a step inside the transaction, as on any other database.

    The BEGIN is IMMEDIATE, so each transaction takes the write lock at its start, waiting up to
    ``BUSY_SECONDS`` for another process's write (feedback on submit's ledger and installs). A deferred
    transaction that has read and then wants to write while another process holds the write lock is
    refused at once with "database is locked": SQLite does not wait there, as both would wait for ever."""
    from sqlalchemy import event

    def begin(connection):
        connection.exec_driver_sql(f"PRAGMA busy_timeout = {BUSY_SECONDS * 1000}")
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    if engine.dialect.name == "sqlite":
        event.listen(engine, "begin", begin)


@dataclass
class _InFlight:
    """A notebook in the sandbox, and what finishing it needs."""

    student: str
    notebook_id: str
    nb: object
    resources: dict
    dest: Path
    t0: float


class _BatchRun:
    """One batch: each student staged and read on the main thread, their notebooks graded on the
    pool, each finished (nbgrader's remaining preprocessors, the gradebook) as it comes back. One
    student's failure becomes their outcome's status and never stops the batch."""

    def __init__(self, pipeline: Pipeline, gb, session, pool, zygote, assignment: str, bar, on_progress=None,
                 total: int = 0):
        self.pipeline, self.gb, self.session, self.pool, self.zygote = pipeline, gb, session, pool, zygote
        self.assignment, self.bar, self.on_progress, self.total, self.done = assignment, bar, on_progress, total, 0
        self.notebook_ids = [nb.name for nb in gb.find_assignment(assignment).notebooks]
        self.pending: dict = {}
        self.outcomes: dict[str, StudentOutcome] = {}
        self.rows: dict[str, list] = {}  # each student's submitted assignment and its notebooks (for _fresh)
        self.steps, self.since = 0, 0.0  # steps since the last commit, and when the first of them ended
        self.uncommitted: set[str] = set()  # students with a step in the transaction not yet committed
        self.not_saved: dict[str, str] = {}  # student -> why a transaction of theirs was refused (what they are told)

    def start(self, student: str) -> None:
        """Stage ``student``'s submission and send each of its notebooks to the pool."""
        t0 = time.monotonic()
        outcome = self.outcomes[student] = StudentOutcome(student)
        src = self.pipeline.submitted(student, self.assignment)
        dest = self.pipeline.autograded(student, self.assignment)
        try:
            with self._step(student):  # the student and the submission exist whatever happens to the notebook
                submission = self.pipeline.stage(self.gb, student, self.assignment, src, dest)
                self.rows[student] = [submission, *submission.notebooks]  # made with it, or loaded once if found
        except Exception as exc:  # noqa: BLE001
            outcome.status = self.not_saved.get(student) or f"error: {type(exc).__name__}: {exc}"[:60]
            self._count_if_done(student)
            return
        for notebook_id in self.notebook_ids:
            self._send(student, notebook_id, src, dest, t0)
        if self.on_progress and student in self._grading():
            self.on_progress(self.done, self.total, self._grading(), None)
        self._count_if_done(student)

    def _send(self, student: str, notebook_id: str, src: Path, dest: Path, t0: float) -> None:
        from attention_platform.grading.sandbox.grading import grade_notebook, submission_files

        outcome, path = self.outcomes[student], src / f"{notebook_id}.ipynb"
        resources = self.pipeline.resources(student, self.assignment, notebook_id, dest)
        if not path.exists():
            outcome.status = f"missing {notebook_id}.ipynb"
            try:
                with self._step(student):
                    self.pipeline.missing(self.gb, student, self.assignment, notebook_id)
            except GradebookBusy:
                outcome.status = self.not_saved[student]
            return
        try:
            with self._step(student):
                nb = self.pipeline.read(path, resources)
        except Exception as exc:  # noqa: BLE001 - e.g. not JSON: rejected for this student alone
            outcome.status = f"rejected: {unreadable(exc)}"[:60]
            shutil.rmtree(dest, ignore_errors=True)
            return
        future = self.pool.submit(grade_notebook, nb, zygote=self.zygote, limits=self.pipeline.limits,
                                  seed_for=self.pipeline.seeds_for(student, self.assignment),
                                  filename=f"{notebook_id}.ipynb",
                                  extra_files=submission_files(dest, notebook_id))
        self.pending[future] = _InFlight(student, notebook_id, nb, resources, dest, t0)

    def finish_some(self) -> None:
        """Wait for at least one graded notebook and finish every one that is back. Before blocking,
        the steps so far are committed: the gradebook is never locked for a sandbox's sake."""
        done, _ = wait(list(self.pending), timeout=0)
        if not done:
            self.commit()
            done, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
        for future in done:
            flight = self.pending.pop(future)
            self._finish(future, flight)
            self._count_if_done(flight.student)

    def _finish(self, future, flight: _InFlight) -> None:
        outcome, session, student = self.outcomes[flight.student], self.session, flight.student
        rows = self.rows.get(student, [])
        try:
            result = future.result()
            with self._step(student):  # the late penalty then reads the scores just saved
                self.pipeline.finish(flight.nb, flight.resources, flight.dest, flight.notebook_id,
                                     after_save=lambda: _fresh(session, rows))
            outcome.failed += [c.check_id for c in result.checks.values() if not c.passed]
            if result.stopped:
                outcome.status = f"stopped: {result.stopped}"[:60]
        except Exception as exc:  # noqa: BLE001 - one student's failure never stops the batch
            outcome.status = self.not_saved.get(student) or f"error: {type(exc).__name__}: {exc}"[:60]
        outcome.seconds += time.monotonic() - flight.t0
        # The process's first notebook finished (imports, configuration, the first picture): the
        # end of its start-up, if its command paused the collector for it (start_up_gc).
        start_up_gc.resume()

    @contextlib.contextmanager
    def _step(self, student: str):
        """One step's gradebook writes (a student's staging, a notebook's sanitising or its grades) in
        a savepoint of its own: a step that fails takes back its own writes and no one else's. The
        transaction around the steps is committed every ``COMMIT_EVERY`` steps or ``COMMIT_SECONDS``
        -- one fsync for several students instead of two per student (a tenth of the batch's time on
        this machine) -- and before the batch waits for a sandbox (:meth:`finish_some`), so a TA
        saving a manual grade meanwhile waits well under a second for the database; what a crash
        leaves uncommitted is graded again by the next run. A transaction the database refuses
        (:class:`GradebookBusy`) costs the students with a step in it, each reported failed, and no one else."""
        from sqlalchemy.exc import OperationalError

        self.uncommitted.add(student)
        try:
            savepoint = self.session.begin_nested()
        except OperationalError as exc:
            self._lost(exc)
            raise GradebookBusy(_database_said(exc)) from None
        try:
            yield
        except BaseException:
            try:
                savepoint.rollback()
            except OperationalError as exc:
                self._lost(exc)
            raise
        savepoint.commit()
        if self.steps == 0:
            self.since = time.monotonic()
        self.steps += 1
        if self.steps >= COMMIT_EVERY or time.monotonic() - self.since >= COMMIT_SECONDS:
            self.commit()

    def commit(self) -> None:
        """Write the steps so far; if the database refuses, the students they belong to are failed."""
        from sqlalchemy.exc import OperationalError

        try:
            if self.steps:
                self.session.commit()
        except OperationalError as exc:
            self._lost(exc)
        self.steps = 0
        self.uncommitted.clear()

    def _lost(self, exc: Exception) -> None:
        """The transaction is gone: roll it back so the next student's steps begin afresh, and say
        so for every student whose steps it held (their files in autograded/ are graded again next run)."""
        self.session.rollback()
        for student in self.uncommitted:
            self.not_saved[student] = self.outcomes[student].status = f"error: not saved: {_database_said(exc)}"[:60]
        self.uncommitted.clear()
        self.steps = 0

    def _grading(self) -> list[str]:
        return sorted({flight.student for flight in self.pending.values()})

    def _count_if_done(self, student: str) -> None:
        """Advance the progress once a student has no notebook left in the sandbox."""
        if any(flight.student == student for flight in self.pending.values()):
            return
        self.done += 1
        if self.bar:
            self.bar.set_postfix_str(student)
            self.bar.update()
        if self.on_progress:
            self.on_progress(self.done, self.total, self._grading(), self.outcomes[student])


def _database_said(exc: Exception) -> str:
    """The database's own words of a failed write ("database is locked"), without the SQL."""
    return str(getattr(exc, "orig", exc))


def unreadable(exc: Exception) -> str:
    """What is wrong with a submitted file that could not be read as a notebook (``Pipeline.read``
    raised ``exc``), in a few words for the grade table and the student's feedback."""
    if isinstance(exc, bounded_json.TooComplex):
        return f"too large or complex to grade ({exc})"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON at line {exc.lineno}, column {exc.colno}"
    if isinstance(exc, UnicodeError):
        return "text that is not valid Unicode"
    return f"not a notebook: {type(exc).__name__}"


def summary_table(outcomes: list[StudentOutcome], elapsed: float) -> str:
    width = max([len(o.student) for o in outcomes] + [7])
    lines = [f"{'student':<{width}}  {'score':>11}  {'time':>6}  failed checks / status", "-" * (width + 60)]
    for o in sorted(outcomes, key=lambda o: o.student):
        detail = ", ".join(o.failed) if o.failed else "-"
        if o.status != "ok":
            detail = f"{o.status}; {detail}" if o.failed else o.status
        lines.append(f"{o.student:<{width}}  {format(o.score, 'g') + '/' + format(o.max_score, 'g'):>11}  "
                     f"{o.seconds:5.2f}s  {detail}")
    n = len(outcomes)
    ok = sum(1 for o in outcomes if o.status == "ok")
    mean = sum(o.score for o in outcomes) / n if n else 0.0
    lines.append("-" * (width + 60))
    lines.append(f"{n} submissions ({ok} ok) in {elapsed:.1f} s = {elapsed / max(n, 1):.3f} s per submission; "
                 f"mean score {mean:.2f}")
    return "\n".join(lines)
