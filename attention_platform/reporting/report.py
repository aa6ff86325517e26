"""The misconception report: what a class got wrong, by idea, for the people who teach.

``collect(db_url, assignment)`` reads an nbgrader gradebook into a ``ReportData``
(plain numbers, no pixels); ``render_html(data)`` turns it into one
self-contained HTML page (matplotlib PNGs embedded as data URIs, the numbers
also embedded as JSON for tools); ``write_report`` does both and returns a
one-screen summary. Misconception labels come from the check registry
(``grader_tests.registry``), never from this file.

A check *fails* for a student when its grade is below the cell's max score;
a grade nbgrader has not scored (``None``) is *not graded*. A grade id in the
gradebook with no check in the registry (renamed or removed since grading) is
shown under its raw id with a note. Bad input never raises a traceback at the
user: a missing gradebook or unknown assignment raises ``ReportError`` with a
sentence; an assignment with no submissions gives an explicit empty report.
"""

from __future__ import annotations

import base64
import html
import io
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, TextIO

from attention_platform import venv
from attention_platform.console import track
from attention_platform.course.assignment_checks import by_notebook_order, checks_by_grade_id
from grader_tests.registry import GRADE_ID_PREFIX


UNKNOWN_CHECK_NOTE = "not in the current check registry: renamed or removed since grading"
NOT_A_CHECK_NOTE = "graded cell that is not one of our hidden checks"
GRADED = ("graded", "partly graded")  # statuses with a score
FAILED_EVERYTHING = "failed every check (probably nothing implemented yet: start from the beginning)"


class ReportError(Exception):
    """Bad input, with a message meant for the person running the command."""


# ---------------------------------------------------------------- data

@dataclass
class CheckStat:
    grade_id: str
    label: str  # the misconception a failure points to (raw grade id when unknown)
    title: str
    max_score: float
    known: bool  # in the current registry
    note: str = ""
    notebook: str = ""
    failed: list[str] = field(default_factory=list)  # student ids
    passed: list[str] = field(default_factory=list)
    not_graded: list[str] = field(default_factory=list)
    not_submitted: list[str] = field(default_factory=list)  # submission lacks this check's notebook
    # failed, but no misconception can be read from it (see ``why_not_attempted``):
    not_attempted: list[str] = field(default_factory=list)  # the answer is still the stub, or empty
    did_not_run: list[str] = field(default_factory=list)  # the check could not run the student's code

    @property
    def graded(self) -> int:
        return len(self.failed) + len(self.passed)

    @property
    def fail_share(self) -> float:
        return len(self.failed) / self.graded if self.graded else 0.0


@dataclass
class StudentRow:
    student_id: str
    name: str
    status: str  # "graded" | "partly graded" | "not graded" | "no submission"
    score: float | None
    max_score: float
    failed: list[str] = field(default_factory=list)  # grade ids
    timestamp: str = ""
    unscored: list[str] = field(default_factory=list)  # notebooks with grades nobody scored
    missing: list[str] = field(default_factory=list)  # notebooks of the assignment not in the submission
    not_attempted: list[str] = field(default_factory=list)  # notebooks left as released (stubs), or empty
    did_not_run: list[str] = field(default_factory=list)  # notebooks whose checks could not run the code
    late: str = ""  # how late by the student's own deadline, and what the late policy made of it


@dataclass
class ReportData:
    assignment: str
    generated: str
    max_score: float
    students: list[StudentRow]
    checks: list[CheckStat]
    notes: list[str] = field(default_factory=list)

    @property
    def graded_students(self) -> list[StudentRow]:
        return [s for s in self.students if s.status in GRADED]

    @property
    def failed_everything(self) -> list[str]:
        """Graded students who passed no check at all."""
        passed_any = {s for c in self.checks for s in c.passed}
        return sorted(s.student_id for s in self.graded_students if s.failed and s.student_id not in passed_any)

    def topics(self) -> list[tuple[str, list[str], list[str]]]:
        """Follow-up topics: ``(misconception, grade ids, students)``, biggest first.

        Checks sharing a label are one topic; students who failed every check
        are listed once, separately, rather than under every topic."""
        skip = set(self.failed_everything)
        by_label: dict[str, tuple[list[str], set[str]]] = {}
        for check in self.checks:
            ids, who = by_label.setdefault(check.label, ([], set()))
            ids.append(check.grade_id)
            who.update(s for s in check.failed if s not in skip)
        topics = [(label, ids, sorted(who)) for label, (ids, who) in by_label.items() if who]
        return sorted(topics, key=lambda t: (-len(t[2]), t[0]))

    def summary_numbers(self) -> dict:
        scores = [s.score for s in self.graded_students if s.score is not None]
        return {
            "assignment": self.assignment,
            "students": len(self.students),
            "graded": len(self.graded_students),
            "partly_graded": sum(s.status == "partly graded" for s in self.students),
            "no_submission": sum(s.status == "no submission" for s in self.students),
            "not_graded": sum(s.status == "not graded" for s in self.students),
            "max_score": self.max_score,
            "mean": round(statistics.fmean(scores), 3) if scores else None,
            "median": statistics.median(scores) if scores else None,
            "full_marks": sum(s == self.max_score for s in scores),
            "failed_everything": self.failed_everything,
            "fail_counts": {c.grade_id: len(c.failed) for c in self.checks},
            "not_attempted": sorted({s for c in self.checks for s in c.not_attempted}),
            "did_not_run": sorted({s for c in self.checks for s in c.did_not_run}),
        }

    def to_json(self) -> dict:
        return {
            "summary": self.summary_numbers(),
            "checks": [dict(asdict(c), graded=c.graded, fail_share=round(c.fail_share, 4)) for c in self.checks],
            "students": [asdict(s) for s in self.students],
            "topics": [{"misconception": t, "grade_ids": ids, "students": who} for t, ids, who in self.topics()],
            "notes": self.notes,
        }


def _sqlite_path(db_url: str) -> Path | None:
    if db_url.startswith("sqlite:///"):
        return Path(db_url[len("sqlite:///"):])
    return None


def default_db_url(course: Path) -> str:
    from attention_platform.settings import settings

    return settings().nbgrader_db_url or "sqlite:///" + str(Path(course).resolve() / "gradebook.db")


def open_gradebook(db_url: str):
    """nbgrader's Gradebook, refusing to create a missing sqlite file."""
    from nbgrader.api import Gradebook

    venv.activate()  # nbgrader runs `alembic` from PATH when it meets a database without tables
    path = _sqlite_path(db_url)
    if path is not None and not path.is_file():
        raise ReportError(
            f"no gradebook at {path}: nothing has been graded in this course yet "
            "(run `nbgrader generate_assignment` and `nbgrader autograde` first, or pass --db-url)")
    try:
        return Gradebook(db_url)
    except Exception as exc:  # a corrupt file or an unreachable database: one sentence, no traceback
        raise ReportError(f"cannot open the gradebook {db_url}: {type(exc).__name__}: {exc}") from None


def _check_meta(grade_id: str, max_score: float, registered: dict) -> CheckStat:
    check = registered.get(grade_id)
    if check is not None:
        return CheckStat(grade_id, check.misconception, check.title, max_score, True)
    note = UNKNOWN_CHECK_NOTE if grade_id.startswith(GRADE_ID_PREFIX) else NOT_A_CHECK_NOTE
    return CheckStat(grade_id, grade_id, grade_id, max_score, False, note)


def _order(grade_id: str, registered: dict, checks: dict, nb_order: dict) -> tuple[int, int, str]:
    """Notebook order, then the assignment's check order, then name."""
    order = {name: i for i, name in enumerate(registered)}
    nb = nb_order.get(checks[grade_id].notebook, 0) if grade_id in checks else 0
    return (nb, order.get(grade_id, len(order)), grade_id)


NOT_ATTEMPTED, DID_NOT_RUN, MISCONCEPTION = "not attempted", "did not run", "failed"
# What the grader writes when a check could not run the student's code at all
# (attention_platform/grading/sandbox/grading.py): a failure that says nothing about an idea.
_DID_NOT_RUN = ("No hidden check could run", "This check could not finish", "The hidden check could not run your code",
                "Your code's results could not be read", "is not a registered hidden check")
_STUB = ("NotImplementedError", "there is no class named")


def failure_reasons(notebook_file: Path | None) -> dict[str, str]:
    """For each failed check cell of an autograded notebook: ``not attempted`` (its answer is
    still the stub), ``did not run`` (the grader could not run the code), or ``failed`` (a
    misconception). Empty when the notebook cannot be read."""
    import nbformat

    if notebook_file is None or not notebook_file.is_file():
        return {}
    try:
        nb = nbformat.read(notebook_file, as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable file tells nothing: fall back to the scores
        return {}
    reasons = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        errors = [str(o.get("evalue", "")) for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if not errors:
            continue
        message = errors[0]
        if any(marker in message for marker in _DID_NOT_RUN):
            reasons[meta.get("grade_id", "")] = DID_NOT_RUN
        elif any(marker in message for marker in _STUB):
            reasons[meta.get("grade_id", "")] = NOT_ATTEMPTED
        else:
            reasons[meta.get("grade_id", "")] = MISCONCEPTION
    return reasons


class CheckTable:
    """The assignment's graded cells as the report counts them: hidden checks by grade id, in
    notebook then catalogue order; other graded cells (written answers) only by name."""

    def __init__(self, assignment_row):
        self.checks: dict[str, CheckStat] = {}
        self.others: set[str] = set()
        self.registered = checks_by_grade_id(assignment_row.name)  # the assignment's, in its order
        in_order = sorted((nb.name for nb in assignment_row.notebooks), key=by_notebook_order(assignment_row.name))
        self.nb_order = {name: i for i, name in enumerate(in_order)}
        for notebook in assignment_row.notebooks:
            for cell in notebook.grade_cells:
                self.stat_for(cell.name, notebook.name, float(cell.max_score))

    def stat_for(self, name: str, notebook: str, max_score: float) -> CheckStat | None:
        if not name.startswith(GRADE_ID_PREFIX):
            self.others.add(name)
            return None
        if name not in self.checks:
            self.checks[name] = _check_meta(name, max_score, self.registered)
            self.checks[name].notebook = notebook
        return self.checks[name]

    def order(self, grade_id: str) -> tuple[int, int, str]:
        return _order(grade_id, self.registered, self.checks, self.nb_order)

    def ordered(self) -> list[CheckStat]:
        return [self.checks[k] for k in sorted(self.checks, key=self.order)]


def collect(db_url: str, assignment: str, *, course: Path | None = None,
            log: Callable[[str], None] | None = None, stream: TextIO | None = None) -> ReportData:
    """Read ``assignment`` from the gradebook at ``db_url``.

    With ``course`` (the nbgrader course directory), a notebook missing from a
    student's ``submitted/<student>/<assignment>/`` folder counts as *not
    submitted* rather than as failing its checks (nbgrader scores it 0; the
    score keeps that 0, the misconception counts leave it out)."""
    from nbgrader.api import MissingEntry

    log = log or (lambda msg: print(msg, file=stream or sys.stderr))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open_gradebook(db_url) as gb:
        known = sorted(a.name for a in gb.assignments)
        try:
            assign = gb.find_assignment(assignment)
        except MissingEntry:
            if not known:
                log("the gradebook is empty: no assignment has been generated or graded yet")
                return ReportData(assignment, generated, 0.0, [], [],
                                  ["The gradebook is empty: no assignment has been generated or graded yet."])
            raise ReportError(f"the gradebook has no assignment {assignment!r}; it has: {', '.join(known)}") from None
        table = CheckTable(assign)
        deadlines = _deadlines(course, gb)
        max_score = float(assign.max_score or 0.0)
        students = sorted(gb.students, key=lambda s: s.id)
        rows: list[StudentRow] = []
        for student in track(students, len(students), f"reading {assignment} submissions", stream=stream):
            name = " ".join(p for p in (student.first_name, student.last_name) if p)
            try:
                submission = gb.find_submission(assignment, student.id)
            except MissingEntry:
                rows.append(StudentRow(student.id, name, "no submission", None, max_score))
                continue
            rows.append(_student_row(student.id, name, submission, table, assignment, max_score, course))
            if deadlines is not None and submission.timestamp is not None:
                rows[-1].late = deadlines.standing(assignment, student.id, submission.timestamp,
                                                   submission.timestamp).staff_note()
    ordered = table.ordered()
    return ReportData(assignment, generated, max_score, rows, ordered, _notes(assignment, table, ordered, rows))


def _student_row(student_id: str, name: str, submission, table: CheckTable, assignment: str, max_score: float,
                 course: Path | None) -> StudentRow:
    """One student's row; every grade also lands in its check's counts."""
    row = StudentRow(student_id, name, "graded", None, max_score)
    row.timestamp = submission.timestamp.strftime("%Y-%m-%d %H:%M") if submission.timestamp else ""
    folder = Path(course) / "submitted" / student_id / assignment if course else None
    scored = 0
    for notebook in submission.notebooks:
        if folder is not None and folder.is_dir() and not (folder / f"{notebook.name}.ipynb").exists():
            row.missing.append(notebook.name)
            for grade in notebook.grades:
                stat = table.stat_for(grade.name, notebook.name, float(grade.max_score))
                if stat is not None:
                    stat.not_submitted.append(student_id)
            continue
        graded_file = Path(course) / "autograded" / student_id / assignment / f"{notebook.name}.ipynb" if course else None
        scored += _count_notebook(row, notebook, table, graded_file)
    row.unscored.sort(key=lambda n: table.nb_order.get(n, 0))
    if scored == 0:
        row.status, row.not_attempted, row.did_not_run, row.failed = "not graded", [], [], []
        return row
    row.status = "partly graded" if row.unscored else "graded"
    row.score = float(submission.score)
    row.failed.sort(key=table.order)
    return row


def _score(grade) -> float | None:
    # nbgrader's Grade.score reads 0 for a grade nobody scored; we do not
    return grade.manual_score if grade.manual_score is not None else grade.auto_score


def _count_notebook(row: StudentRow, notebook, table: CheckTable, graded_file: Path | None) -> int:
    """Count one submitted notebook's grades into ``row`` and the checks; how many were scored."""
    reasons = failure_reasons(graded_file)
    scored_checks = [g for g in notebook.grades if g.name.startswith(GRADE_ID_PREFIX) and _score(g) is not None]
    if not reasons and scored_checks and all(_score(g) < g.max_score for g in scored_checks):
        # no autograded notebook to read: a notebook failing every check is taken as empty
        reasons = {g.name: NOT_ATTEMPTED for g in scored_checks}
    kinds = {reasons.get(g.name) for g in scored_checks}
    if scored_checks and kinds == {NOT_ATTEMPTED}:
        row.not_attempted.append(notebook.name)
    elif scored_checks and kinds == {DID_NOT_RUN}:
        row.did_not_run.append(notebook.name)
    scored = unscored = 0
    for grade in notebook.grades:
        score = _score(grade)
        stat = table.stat_for(grade.name, notebook.name, float(grade.max_score))
        if score is None:
            unscored += 1
            if stat is not None:
                stat.not_graded.append(row.student_id)
            continue
        scored += 1
        if stat is None:
            continue
        if score >= grade.max_score:
            stat.passed.append(row.student_id)
            continue
        reason = reasons.get(grade.name, MISCONCEPTION)
        if reason == NOT_ATTEMPTED:
            stat.not_attempted.append(row.student_id)
        elif reason == DID_NOT_RUN:
            stat.did_not_run.append(row.student_id)
        else:
            stat.failed.append(row.student_id)
            row.failed.append(grade.name)
    if unscored:
        row.unscored.append(notebook.name)
    return scored


def _notes(assignment: str, table: CheckTable, ordered: list[CheckStat], rows: list[StudentRow]) -> list[str]:
    """What a reader must know to read the counts right, class-wide first, then per student."""
    notes = [f"{stat.grade_id}: {stat.note}; shown under its raw id." for stat in ordered if not stat.known]
    nobody = sorted({c.notebook for c in ordered if c.not_submitted and not c.graded and not c.not_graded},
                    key=lambda n: table.nb_order.get(n, 0))
    if nobody:
        notes.append(f"Not submitted by anyone graded here, so no misconception counts: {', '.join(nobody)}.")
    others = table.others
    if others:
        notes.append(f"{len(others)} graded cell(s) are not hidden checks (e.g. written answers) and count in the "
                     f"scores only: {', '.join(sorted(others)[:6])}{' …' if len(others) > 6 else ''}.")
    ungraded = [grade_id for grade_id in table.registered if grade_id not in table.checks]
    if table.checks and ungraded:
        shown = ", ".join(ungraded[:6]) + (f" and {len(ungraded) - 6} more" if len(ungraded) > 6 else "")
        notes.append(f"{len(ungraded)} check(s) of the registry have no grade cell in this assignment "
                     f"(added since grading): {shown}.")
    if not any(r.status in GRADED for r in rows):
        notes.insert(0, f"No submission of {assignment} has been autograded yet: this report is empty.")
    for row in rows:
        notes.extend(_student_notes(row))
    return notes


def _deadlines(course: Path | None, gb):
    """The course's deadlines (each student's own, attention_platform/deadlines), or None without a course."""
    from attention_platform.deadlines.standing import Deadlines, DeadlinesError

    if course is None:
        return None
    try:
        return Deadlines(course, gradebook=gb)
    except DeadlinesError as exc:
        raise ReportError(f"the course's deadlines cannot be read: {exc}") from None


def _student_notes(row: StudentRow) -> list[str]:
    notes = [f"{row.student_id}: {row.late}."] if row.late else []
    if row.not_attempted:
        notes.append(f"{row.student_id}: {', '.join(row.not_attempted)} not attempted (answers still the stubs "
                     "given, or empty): its failed checks count as not attempted, not as misconceptions.")
    if row.did_not_run:
        notes.append(f"{row.student_id}: the hidden checks of {', '.join(row.did_not_run)} could not run the "
                     "code (stopped, timed out or crashed): not counted as misconceptions.")
    if row.status == "not graded":
        notes.append(f"{row.student_id}: submitted but not autograded (autograde failed or is pending).")
    elif row.status == "partly graded":
        notes.append(f"{row.student_id}: not scored yet in {', '.join(row.unscored)} "
                     "(autograde failed for that notebook, or manual grading is pending).")
    return notes


# ---------------------------------------------------------------- plots

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def plot_histogram(data: ReportData) -> str | None:
    scores = [s.score for s in data.graded_students if s.score is not None]
    if not scores:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    top = max(data.max_score, max(scores))
    bins = [x - 0.5 for x in range(0, int(top) + 2)]
    ax.hist(scores, bins=bins, color="#4472c4", edgecolor="white")
    ax.set_xlabel(f"score (out of {data.max_score:g})")
    ax.set_ylabel("students")
    ax.set_xlim(-0.5, top + 0.5)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"{data.assignment}: total scores of {len(scores)} graded submissions")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def plot_fail_shares(data: ReportData) -> str | None:
    checks = [c for c in data.checks if c.graded]
    if not checks:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checks = sorted(checks, key=lambda c: c.fail_share)
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(checks) + 1.0))
    labels = [c.label if c.known else f"{c.grade_id} (unknown check)" for c in checks]
    shares = [100 * c.fail_share for c in checks]
    bars = ax.barh(labels, shares, color=["#c0504d" if c.known else "#999999" for c in checks])
    for bar, c in zip(bars, checks):
        ax.text(bar.get_width() + 1, bar.get_y() + bar.get_height() / 2, f"{len(c.failed)}/{c.graded}",
                va="center", fontsize=8)
    ax.set_xlim(0, 112)
    ax.set_xlabel("% of graded submissions failing the check")
    ax.set_title("Which misconceptions the class has")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


# ---------------------------------------------------------------- html

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{margin-bottom:.2rem} .sub{color:#666;margin-top:0}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.92rem}
th,td{border:1px solid #ddd;padding:.3rem .55rem;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
.kpi{display:flex;gap:1rem;flex-wrap:wrap} .kpi div{background:#f5f7fb;border-radius:6px;padding:.6rem 1rem}
.kpi b{display:block;font-size:1.4rem} .note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4rem .8rem;margin:.3rem 0}
.unknown{color:#777;font-style:italic} .empty{background:#eef;padding:1rem;border-radius:6px}
.tag{display:inline-block;background:#fde8e7;border-radius:4px;padding:0 .35rem;margin:.1rem;font-size:.85rem}
img{max-width:100%} td.num{white-space:nowrap}
"""


def _fmt(x: float | None) -> str:
    return "–" if x is None else format(x, "g")


def render_html(data: ReportData) -> str:
    e = html.escape
    nums = data.summary_numbers()
    labels = {c.grade_id: c.label for c in data.checks}
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Misconception report: {e(data.assignment)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Misconception report: {e(data.assignment)}</h1>",
        f"<p class='sub'>From the nbgrader gradebook, {e(data.generated)}. Each hidden check tests one idea; "
        "a failed check names the misconception behind it.</p>",
    ]
    for note in data.notes:
        out.append(f"<div class='note'>{e(note)}</div>")
    out.append("<div class='kpi' id='summary'>")
    for key, title in (("students", "students"), ("graded", "graded submissions"),
                       ("no_submission", "no submission"), ("mean", "mean score"), ("median", "median score"),
                       ("full_marks", "full marks")):
        value = nums[key]
        extra = f" / {data.max_score:g}" if key in ("mean", "median") and value is not None else ""
        out.append(f"<div><b data-key='{key}'>{e(_fmt(value))}{extra}</b>{e(title)}</div>")
    out.append("</div>")

    if not data.graded_students:
        out.append("<h2>Nothing to report</h2><p class='empty' id='empty'>No graded submissions: "
                   "there are no scores, misconceptions or follow-ups to show yet.</p>")
    else:
        hist, shares = plot_histogram(data), plot_fail_shares(data)
        out.append("<h2>Score distribution</h2>")
        if hist:
            out.append(f"<img id='histogram' alt='histogram of total scores' src='{hist}'>")
        out.append("<h2>Misconceptions: share of students failing each hidden check</h2>")
        if shares:
            out.append(f"<img id='fail-shares' alt='share failing each check' src='{shares}'>")
        out.append("<table id='checks'><tr><th>misconception</th><th>check (grade id)</th><th>points</th>"
                   "<th>failing</th><th>graded</th><th>share</th><th>students failing</th><th>notebook</th>"
                   "<th>not attempted</th><th>did not run</th></tr>")
        for c in sorted(data.checks, key=lambda c: (not c.graded, -c.fail_share)):  # ties: the table's order
            label = e(c.label) if c.known else f"<span class='unknown'>{e(c.grade_id)}</span> — {e(c.note)}"
            out.append(
                f"<tr data-grade-id='{e(c.grade_id)}'><td>{label}</td><td><code>{e(c.grade_id)}</code></td>"
                f"<td class='num'>{c.max_score:g}</td><td class='num failing'>{len(c.failed)}</td>"
                f"<td class='num'>{c.graded}</td>"
                f"<td class='num'>{f'{100 * c.fail_share:.0f}%' if c.graded else '–'}</td>"
                f"<td>{e(', '.join(c.failed))}</td><td>{e(c.notebook)}</td>"
                f"<td class='not-attempted'>{e(', '.join(c.not_attempted))}</td>"
                f"<td class='did-not-run'>{e(', '.join(c.did_not_run))}</td></tr>")
        out.append("</table>")

        out.append("<h2>Follow-up topics: who would benefit</h2>")
        topics = data.topics()
        if not topics and not data.failed_everything:
            out.append("<p>Every graded submission passed every check.</p>")
        out.append("<table id='topics'><tr><th>topic (misconception)</th><th>students</th><th>count</th></tr>")
        for label, ids, who in topics:
            out.append(f"<tr data-grade-ids='{e(' '.join(ids))}'><td>{e(label)}</td><td>{e(', '.join(who))}</td>"
                       f"<td class='num'>{len(who)}</td></tr>")
        if data.failed_everything:
            out.append(f"<tr data-grade-ids='*'><td>{e(FAILED_EVERYTHING)}</td>"
                       f"<td>{e(', '.join(data.failed_everything))}</td>"
                       f"<td class='num'>{len(data.failed_everything)}</td></tr>")
        out.append("</table>")

    out.append("<h2>Students</h2>")
    if not data.students:
        out.append("<p class='empty'>No students in the gradebook.</p>")
    else:
        out.append("<table id='students'><tr><th>student</th><th>status</th><th>score</th><th>submitted</th>"
                   "<th>failed checks (misconception)</th></tr>")
        for s in data.students:
            failed = "".join(f"<span class='tag' title='{e(g)}'>{e(labels.get(g, g))}</span>" for g in s.failed)
            score = f"{_fmt(s.score)} / {s.max_score:g}" if s.score is not None else "–"
            status = s.status + (f" ({', '.join(s.unscored)} not scored)" if s.unscored else "")
            if s.not_attempted:
                status += f"; not attempted: {', '.join(s.not_attempted)}"
            if s.did_not_run:
                status += f"; checks did not run: {', '.join(s.did_not_run)}"
            missing = (f"<br><small title='{e(', '.join(s.missing))}'>{len(s.missing)} notebook(s) not submitted"
                       "</small>" if s.missing else "")
            out.append(f"<tr data-student='{e(s.student_id)}'><td>{e(s.student_id)}</td><td>{e(status)}{missing}</td>"
                       f"<td class='num'>{score}</td><td>{e(s.timestamp)}"
                       f"{f'<br><small>{e(s.late)}</small>' if s.late else ''}</td><td>{failed}</td></tr>")
        out.append("</table>")
    payload = json.dumps(data.to_json()).replace("</", "<\\/")
    out.append(f"<script type='application/json' id='report-data'>{payload}</script>")
    out.append("</body></html>")
    return "\n".join(out)


def summary_text(data: ReportData, out: Path | None = None) -> str:
    """The one-screen summary printed at the end of ``attention-course report``."""
    n = data.summary_numbers()
    lines = [f"Misconception report for {data.assignment}"]
    if out is not None:
        lines.append(f"  written to   {out}")
    partly = f" ({n['partly_graded']} partly)" if n["partly_graded"] else ""
    lines.append(f"  students     {n['students']} in the gradebook: {n['graded']} graded{partly}, "
                 f"{n['no_submission']} without a submission, {n['not_graded']} not graded")
    if n["graded"]:
        lines.append(f"  scores       mean {n['mean']:g}, median {n['median']:g} of {data.max_score:g}; "
                     f"{n['full_marks']} with full marks")
        worst = sorted((c for c in data.checks if c.failed), key=lambda c: -c.fail_share)  # ties: the table's order
        if worst:
            lines.append("  most missed")
            for c in worst[:6]:
                lines.append(f"    {len(c.failed):>3}/{c.graded:<3} {c.label}")
    for note in data.notes[:5]:
        lines.append(f"  note: {note}" if len(note) <= 110 else f"  note: {note[:109]}…")
    if len(data.notes) > 5:
        lines.append(f"  … and {len(data.notes) - 5} more notes in the report")
    return "\n".join(lines)


def write_report(db_url: str, assignment: str, out: Path, *, course: Path | None = None,
                 stream: TextIO | None = None) -> ReportData:
    """Collect, render and write the report to ``out``; progress goes to ``stream``."""
    stream = stream if stream is not None else sys.stderr
    started = time.monotonic()
    data = collect(db_url, assignment, course=course, stream=stream)
    print("rendering plots and HTML…", file=stream, flush=True)
    page = render_html(data)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    print(f"report written in {time.monotonic() - started:.1f} s", file=stream, flush=True)
    return data


def read_report_data(path: Path) -> dict:
    """The JSON numbers embedded in a written report (for tests and tools)."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.index("<script type='application/json' id='report-data'>") + len(
        "<script type='application/json' id='report-data'>")
    end = text.index("</script>", start)
    return json.loads(text[start:end].replace("<\\/", "</"))
