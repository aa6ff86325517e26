"""Grade exports as nbgrader export plug-ins.

Stock ``nbgrader export`` (CsvExportPlugin, grades.csv) is untouched; these are
selected with ``--exporter`` from the course root::

    nbgrader export --exporter=attention_platform.reporting.exports.CheckBreakdownExportPlugin --to checks.csv
    nbgrader export --exporter=attention_platform.reporting.exports.CanvasExportPlugin --to canvas.csv

or through ``attention-course export-checks`` / ``export-canvas``, which add
progress and a summary. ``--assignment``/``--student`` filter as for stock export.

CheckBreakdownExportPlugin: one row per (assignment, student, graded cell), with
the check's misconception label from the registry, the student's own deadline (their extension, if
any), how late the submission was and its late penalty (attention_platform/deadlines), and a status
(passed / failed / not graded / no submission); a grade id with no check in the
registry keeps its raw id and says so in the ``note`` column; ``variant`` names the student's own
numbers where the assignment gives each student theirs (attention_platform/course/variants.py). A notebook missing
from the student's ``submitted/`` folder is ``not submitted`` (nbgrader scores it 0).

CanvasExportPlugin: the layout Canvas's Gradebook "Import" reads, which is the
layout of its own Gradebook export: the identity columns ``Student, ID,
SIS User ID, SIS Login ID, Section``, then one column per assignment, and a
second row ``Points Possible``. Canvas matches rows to students by ID, SIS User
ID or SIS Login ID; the nbgrader student id goes into ``SIS Login ID`` by default
(``CanvasExportPlugin.id_column``), which is what JupyterHub's LMS login gives
us. With ``CanvasExportPlugin.roster`` set to a Canvas Gradebook export CSV,
``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID`` and ``Section`` are copied
from it for the matching students, so the file imports without guesswork.
A student without a submission scores 0, as in nbgrader's own export.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Enum, Unicode

from grader_tests.registry import GRADE_ID_PREFIX

from attention_platform.console import track
from attention_platform.course import variants
from attention_platform.course.assignment_checks import checks_by_grade_id
from attention_platform.reporting.report import NOT_A_CHECK_NOTE, UNKNOWN_CHECK_NOTE

CHECK_COLUMNS = [
    "assignment", "student_id", "last_name", "first_name", "email", "timestamp", "variant", "deadline",
    "late_by_minutes", "late_penalty", "grade_id", "check_id", "misconception", "score", "max_score", "status", "note",
]
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "    Points Possible"  # Canvas writes (and skips on import) this exact row label


def _fmt(x) -> str:
    return "" if x is None else format(float(x), "g")


class _Selecting(ExportPlugin):
    """Shared assignment/student selection (``--assignment``, ``--student``)."""

    summary: dict

    def _assignments(self, gradebook: Gradebook):
        wanted = [str(a) for a in self.assignment]
        found = [a for a in gradebook.assignments if not wanted or a.name in wanted]
        missing = sorted(set(wanted) - {a.name for a in found})
        if missing:
            self.log.warning("not in the gradebook, skipped: %s", ", ".join(missing))
        return found

    def _students(self, gradebook: Gradebook):
        wanted = [str(s) for s in self.student]
        found = [s for s in sorted(gradebook.students, key=lambda s: s.id) if not wanted or s.id in wanted]
        missing = sorted(set(wanted) - {s.id for s in found})
        if missing:
            self.log.warning("not in the gradebook, skipped: %s", ", ".join(missing))
        return found


class CheckBreakdownExportPlugin(_Selecting):
    """Per-check breakdown: one CSV row per assignment × student × graded cell."""

    course_root = Unicode("", help="Course directory whose submitted/ tells which notebooks a student handed "
                                   "in (default: nbgrader's CourseDirectory.root when run by nbgrader export)."
                          ).tag(config=True)

    def _root(self) -> str:
        return self.course_root or getattr(getattr(self.parent, "coursedir", None), "root", "")

    def _variant(self, student: str, assignment: str) -> str:
        """The id of the student's own numbers (attention_platform/course/variants.py); "" without them."""
        return variants.variant_id(self._root(), assignment, student) if self._root() else ""

    def _submitted_folder(self, student: str, assignment: str) -> Path | None:
        root = self._root()
        folder = Path(root) / "submitted" / student / assignment if root else None
        return folder if folder is not None and folder.is_dir() else None

    def _deadlines(self, gradebook: Gradebook):
        """The course's deadlines, or None without a course directory (the columns stay empty)."""
        from attention_platform.deadlines.standing import Deadlines

        root = self._root()
        return Deadlines(root, gradebook=gradebook) if root else None

    @staticmethod
    def _late_columns(deadlines, assignment: str, student: str, submission) -> dict:
        if deadlines is None:
            return {}
        found = deadlines.standing(assignment, student, submission.timestamp, submission.timestamp) \
            if submission is not None and submission.timestamp is not None else None
        due = deadlines.effective_due(assignment, student)
        return {"deadline": due.strftime("%Y-%m-%d %H:%M:%S UTC") if due else "",
                "late_by_minutes": format(found.late_by.total_seconds() / 60, ".0f") if found and found.late_by else "",
                "late_penalty": _fmt(submission.late_submission_penalty) if submission is not None else ""}

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "check_breakdown.csv"
        assignments, students = self._assignments(gradebook), self._students(gradebook)
        deadlines = self._deadlines(gradebook)
        counts = {"rows": 0, "passed": 0, "failed": 0, "not graded": 0, "no submission": 0, "not submitted": 0}
        unknown: set[str] = set()
        with open(dest, "w", newline="", encoding="utf-8") as fh:
            out = csv.DictWriter(fh, CHECK_COLUMNS)
            out.writeheader()
            for assignment in assignments:
                cells = [(cell.name, cell.max_score) for nb in assignment.notebooks for cell in nb.grade_cells]
                registered = checks_by_grade_id(assignment.name)
                label = f"exporting {assignment.name} checks"
                for student in track(students, len(students), label):
                    base = {"assignment": assignment.name, "student_id": student.id,
                            "last_name": student.last_name or "", "first_name": student.first_name or "",
                            "email": student.email or "", "variant": self._variant(student.id, assignment.name)}
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        grades = [(name, max_score, None, "no submission") for name, max_score in cells]
                        base["timestamp"] = ""
                        base.update(self._late_columns(deadlines, assignment.name, student.id, None))
                    else:
                        base["timestamp"] = str(submission.timestamp or "")
                        base.update(self._late_columns(deadlines, assignment.name, student.id, submission))
                        grades = []
                        folder = self._submitted_folder(student.id, assignment.name)
                        for nb in submission.notebooks:
                            if folder is not None and not (folder / f"{nb.name}.ipynb").exists():
                                # nbgrader scores a missing notebook 0; that is no misconception
                                grades += [(g.name, g.max_score, g.auto_score, "not submitted") for g in nb.grades]
                                continue
                            for g in nb.grades:
                                score = g.manual_score if g.manual_score is not None else g.auto_score
                                status = ("not graded" if score is None
                                          else "passed" if score >= g.max_score else "failed")
                                grades.append((g.name, g.max_score, score, status))
                    for name, max_score, score, status in grades:
                        check = registered.get(name)
                        # a written answer is no check: only a check id the registry lost is news
                        if check is None and name.startswith(GRADE_ID_PREFIX):
                            unknown.add(name)
                        note = "" if check else (UNKNOWN_CHECK_NOTE if name.startswith(GRADE_ID_PREFIX)
                                                 else NOT_A_CHECK_NOTE)
                        out.writerow(dict(base, grade_id=name,
                                          check_id=check.id if check else "",
                                          misconception=check.misconception if check else name,
                                          score=_fmt(score), max_score=_fmt(max_score), status=status, note=note))
                        counts["rows"] += 1
                        counts[status] += 1
        self.summary = dict(counts, dest=dest, assignments=[a.name for a in assignments],
                            students=len(students), unknown_grade_ids=sorted(unknown))
        self.log.info("Per-check breakdown written to %s (%d rows)", dest, counts["rows"])
        if unknown:
            self.log.warning("hidden checks graded here that the check registry (grader_tests/) no longer has: %s. "
                             "Their rows keep the raw grade id (see the note column); if a check was renamed, "
                             "give it its old id back or re-run autograde so the gradebook uses the new one",
                             ", ".join(sorted(unknown)))


class CanvasExportPlugin(_Selecting):
    """Canvas Gradebook import CSV: Student, ID, SIS User ID, SIS Login ID, Section, <assignments>."""

    id_column = Enum(["SIS Login ID", "SIS User ID", "ID"], default_value="SIS Login ID",
                     help="Canvas column that receives the nbgrader student id.").tag(config=True)
    roster = Unicode("", help="A Canvas Gradebook export CSV: its identity columns are copied for "
                              "students whose id matches (in id_column, or Email).").tag(config=True)
    assignment_header = Unicode("{name}", help="Header of each assignment column; {name} is the nbgrader "
                                "assignment. Use e.g. '{name} (12345)' to hit an existing Canvas "
                                "assignment by its id.").tag(config=True)

    def _read_roster(self) -> dict[str, dict[str, str]]:
        if not self.roster:
            return {}
        with open(self.roster, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
        index: dict[str, dict[str, str]] = {}
        for row in rows:
            if (row.get("Student") or "").strip() == POINTS_POSSIBLE.strip():
                continue
            for key in (self.id_column, "SIS Login ID", "Email", "ID"):
                value = (row.get(key) or "").strip()
                if value:
                    index.setdefault(value, row)
        return index

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "canvas_grades.csv"
        assignments, students = self._assignments(gradebook), self._students(gradebook)
        roster = self._read_roster()
        headers = [self.assignment_header.format(name=a.name) for a in assignments]
        unmatched, missing = [], 0
        with open(dest, "w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(CANVAS_IDENTITY + headers)
            out.writerow([POINTS_POSSIBLE, "", "", "", ""] + [_fmt(a.max_score) for a in assignments])
            for student in track(students, len(students), "exporting Canvas grades"):
                row = {k: "" for k in CANVAS_IDENTITY}
                known = roster.get(student.id) or (roster.get(student.email) if student.email else None)
                if known:
                    row.update({k: known.get(k, "") or "" for k in CANVAS_IDENTITY})
                else:
                    if roster:
                        unmatched.append(student.id)
                    name = ", ".join(p for p in (student.last_name, student.first_name) if p)
                    row["Student"] = name or student.id
                    row[self.id_column] = student.id
                scores = []
                for assignment in assignments:
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        missing += 1
                        scores.append("0")
                    else:
                        scores.append(_fmt(max(0.0, submission.score - (submission.late_submission_penalty or 0))))
                out.writerow([row[k] for k in CANVAS_IDENTITY] + scores)
        self.summary = {"dest": dest, "students": len(students), "assignments": [a.name for a in assignments],
                        "missing_submissions": missing, "unmatched_in_roster": unmatched,
                        "id_column": self.id_column}
        self.log.info("Canvas gradebook CSV written to %s (%d students)", dest, len(students))
        if unmatched:
            self.log.warning("not in the Canvas roster (id left in %s): %s", self.id_column, ", ".join(unmatched))


def run_export(plugin_class, db_url: str, *, to: str, assignments=(), students=(), stream=None, **traits) -> dict:
    """Run an export plug-in in-process on the gradebook at ``db_url``; return its summary."""
    import logging

    from attention_platform.reporting.report import open_gradebook

    log = logging.getLogger("attention_platform.reporting.exports")
    log.propagate = False
    log.setLevel(logging.WARNING)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    log.addHandler(handler)
    try:
        plugin = plugin_class(to=str(to), assignment=list(assignments), student=list(students), log=log, **traits)
        Path(to).parent.mkdir(parents=True, exist_ok=True)
        with open_gradebook(db_url) as gb:
            plugin.export(gb)
    finally:
        log.removeHandler(handler)
    return plugin.summary
