"""The graded cells of every assignment's notebooks, written from its catalogue (``grader_tests.registry``).

In every ``source/<assignment>/*.ipynb`` this owns:

* the check cells, the notebook's last cells, one per hidden check in catalogue order: grade id
  ``check_<id>``, its points, and the source ``# Hidden check (N points): <title>`` (the line
  students keep in their feedback) above the hidden ``grade("<id>", globals())``;
* the "grading" cell right after the intro: the points the notebook is worth, the table of what
  is graded and how, and in the assignment's first notebook the table of its parts;
* the points of the written answers a TA grades.

Everything else in a notebook is written by hand. Run after changing the catalogue, then
``make release``::

    python -m attention_platform.course.graded_cells          # rewrite every assignment's notebooks
    python -m attention_platform.course.graded_cells --check  # exit 1 if any notebook differs

``tests/course/test_graded_cells_in_sync.py`` runs the check.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests.catalogue import HiddenCheck, Part, WrittenAnswer
from grader_tests.registry import ASSIGNMENTS, AssignmentChecks, assignment

OVERVIEW_ID = "grading"
INTRO_ID = "intro"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def points_text(points: int) -> str:
    return f"{points} point" if points == 1 else f"{points} points"


def check_cell_source(check: HiddenCheck) -> str:
    return "\n".join([
        f"# Hidden check ({points_text(check.points)}): {check.title}",
        BEGIN_HIDDEN,
        "from grader_tests.kernel import grade",
        f'grade("{check.id}", globals())',
        END_HIDDEN,
    ])


def _how_graded(part: Part) -> str:
    if not part.written:
        return "all autograded by hidden checks after you submit"
    if not part.checks:
        return "all graded by a TA from your written answers"
    return (f"{part.auto_points} autograded by hidden checks after you submit, "
            f"{part.ta_points} graded by a TA from your written answers")


def _graded_table(part: Part) -> list[str]:
    lines = ["| # | what is graded | how | points |", "|---|---|---|---|"]
    for number, item in enumerate(part.graded, start=1):
        if isinstance(item, HiddenCheck):
            lines.append(f"| {number} | {item.title} | hidden check | {item.points} |")
        else:
            lines.append(f"| {number} | {item.question[0].upper()}{item.question[1:]}. | TA | {item.points} |")
    return lines


def parts_table(assignment: AssignmentChecks) -> list[str]:
    lines = ["| part | notebook | autograded | graded by a TA | points |", "|---|---|---|---|---|"]
    for part in assignment.parts:
        auto = str(part.auto_points) if part.checks else "–"
        ta = str(part.ta_points) if part.written else "–"
        lines.append(f"| {part.number} | `{part.file}`: {part.summary} | {auto} | {ta} | {part.points} |")
    return lines


def overview_markdown(part: Part, assignment: AssignmentChecks) -> str:
    parts = assignment.parts
    first = parts[0]
    where = "" if part is first else f" (the points of every part are listed in `{first.file}`)"
    lines = [
        "## What is graded",
        "",
        f"**This notebook (part {part.number} of {len(parts)}): {points_text(part.points)}**, "
        f"{_how_graded(part)}{where}.",
        "",
        *_graded_table(part),
    ]
    if part is first and len(parts) > 1:
        lines += [
            "",
            f"**The whole assignment: {points_text(assignment.points)}**: {assignment.auto_points} autograded by "
            f"hidden checks, {assignment.ta_points} graded by a TA from your written answers, in "
            f"{len(parts)} notebooks in this folder:",
            "",
            *parts_table(assignment),
        ]
    return "\n".join(lines)


def _nbgrader(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _stable_id(part: Part, grade_id: str) -> str:
    """A new cell's id, the same on every run (nbformat would draw a random one)."""
    return hashlib.sha1(f"{part.notebook}/{grade_id}".encode()).hexdigest()[:8]


def _cell(part: Part, kind, grade_id: str, source: str, old_cells: dict, **meta):
    new = new_code_cell if kind == "code" else new_markdown_cell
    cell = old_cells.get(grade_id) or new(id=_stable_id(part, grade_id))
    cell = nbformat.from_dict(cell)
    cell.source = source
    cell.metadata["nbgrader"] = _nbgrader(grade_id, **meta)
    if kind == "code":
        cell.outputs, cell.execution_count = [], None
    return cell


def synced(nb: nbformat.NotebookNode, part: Part, assignment: AssignmentChecks) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose graded cells say what ``part`` of ``assignment`` defines."""
    nb = nbformat.from_dict(nb)
    old = {_grade_id(cell): cell for cell in nb.cells if _grade_id(cell)}
    check_ids = {check.grade_id for check in part.checks}
    stale = [gid for gid in old if gid and gid.startswith("check_") and gid not in check_ids]
    if stale:
        raise ValueError(f"{part.file} has check cells the catalogue does not define: {', '.join(stale)}")
    cells = [cell for cell in nb.cells if _grade_id(cell) not in check_ids | {OVERVIEW_ID}]
    if not cells or _grade_id(cells[0]) != INTRO_ID:
        raise ValueError(f"{part.file} must start with its intro cell (grade id {INTRO_ID!r})")
    answers = {answer.grade_id: answer for answer in part.written}
    missing = set(answers) - {_grade_id(cell) for cell in cells}
    if missing:
        raise ValueError(f"{part.file} lacks the written-answer cells {', '.join(sorted(missing))}")
    for cell in cells:
        answer: WrittenAnswer | None = answers.get(_grade_id(cell))
        if answer is not None:
            cell.metadata["nbgrader"]["points"] = answer.points
    overview = _cell(part, "markdown", OVERVIEW_ID, overview_markdown(part, assignment), old, grade=False,
                     solution=False, locked=True)
    checks = [_cell(part, "code", check.grade_id, check_cell_source(check), old, grade=True, solution=False, locked=True,
                    points=check.points) for check in part.checks]
    nb.cells = [cells[0], overview, *cells[1:], *checks]
    return nb


def notebook_path(name: str, part: Part, course_root: Path = COURSE_ROOT) -> Path:
    return course_root / "source" / name / part.file


def drifted(name: str, course_root: Path = COURSE_ROOT) -> list[str]:
    """The source notebooks of assignment ``name`` whose graded cells differ from its catalogue."""
    found = assignment(name)
    names = []
    for part in found.parts:
        nb = nbformat.read(notebook_path(name, part, course_root), as_version=4)
        if nbformat.writes(synced(nb, part, found)) != nbformat.writes(nb):
            names.append(part.file)
    return names


def sync(name: str, course_root: Path = COURSE_ROOT) -> list[str]:
    """Rewrite assignment ``name``'s source notebooks from its catalogue; return those that changed."""
    found = assignment(name)
    changed = drifted(name, course_root)
    for part in found.parts:
        if part.file in changed:
            path = notebook_path(name, part, course_root)
            path.write_text(nbformat.writes(synced(nbformat.read(path, as_version=4), part, found)) + "\n")
    return changed


def main(argv: list[str] | None = None, course_root: Path = COURSE_ROOT) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        changed = [(name, file) for name in ASSIGNMENTS for file in drifted(name, course_root)]
        for name, file in changed:
            print(f"source/{name}/{file}: its graded cells differ from the assignment's catalogue", file=sys.stderr)
        return 1 if changed else 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name in ASSIGNMENTS:
        for file in sync(name, course_root):
            print(f"rewrote the graded cells of source/{name}/{file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
