"""Everything that states a check, its points or a total agrees with ``grader_tests/catalogue.py``:
the source notebooks' graded cells (and so the release and the feedback), the instructors' page on the
assignment (docs/instructors/assignment.md), the TA guide and the demo. Each test is shown able to fail on a drifted copy."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from attention_platform.course import demo, graded_cells
from attention_platform.course.notebooks import ASSIGNMENT, COURSE_ROOT
from grader_tests.self_attention.catalogue import ASSIGNMENT_POINTS, PARTS, Part

ASSIGNMENT_PAGE = COURSE_ROOT / "docs" / "instructors" / "assignment.md"
CHECKS_PAGE = COURSE_ROOT / "docs" / "instructors" / "hidden-checks.md"


def test_source_notebooks_say_what_the_catalogue_defines():
    assert graded_cells.drifted() == [], "run `python -m attention_platform.course.graded_cells`, then `make release`"


@pytest.fixture
def course_copy(tmp_path) -> Path:
    shutil.copytree(COURSE_ROOT / "source" / ASSIGNMENT, tmp_path / "source" / ASSIGNMENT)
    return tmp_path


def _edit_cell(course: Path, part: Part, grade_id: str, edit) -> None:
    path = graded_cells.notebook_path(part, course)
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    edit(cell)
    path.write_text(nbformat.writes(nb) + "\n")


@pytest.mark.parametrize("what, grade_id, edit", [
    ("a check's title in its cell", "check_sqrt_d_scale",
     lambda cell: setattr(cell, "source", cell.source.replace("divided by √D", "divided by D"))),
    ("a check's points", "check_shapes", lambda cell: cell.metadata.nbgrader.update(points=3)),
    ("the overview's total", "grading",
     lambda cell: setattr(cell, "source", cell.source.replace(f"{ASSIGNMENT_POINTS} points",
                                                              f"{ASSIGNMENT_POINTS + 1} points"))),
])
def test_a_drifted_notebook_is_named(course_copy, what, grade_id, edit):
    _edit_cell(course_copy, PARTS[0], grade_id, edit)
    assert graded_cells.drifted(course_copy) == [PARTS[0].file], what
    assert graded_cells.sync(course_copy) == [PARTS[0].file]
    assert graded_cells.drifted(course_copy) == []


def test_written_answer_points_come_from_the_catalogue(course_copy):
    part = next(p for p in PARTS if p.written)
    _edit_cell(course_copy, part, part.written[0].grade_id, lambda cell: cell.metadata.nbgrader.update(points=9))
    assert graded_cells.drifted(course_copy) == [part.file]


def _page_parts(text: str) -> tuple[int, dict[str, str]]:
    head = re.search(r"^## The assignment's six parts \((\d+) points\)$", text, re.M)
    rows = dict(re.findall(r"^\| `([\w.]+\.ipynb)` \|[^\n]*\| ([^|\n]+) \|$", text[head.end():], re.M))
    return int(head.group(1)), rows


def _graded_text(part: Part) -> str:
    texts = ([f"{part.auto_points} auto"] if part.checks else []) + ([f"{part.ta_points} TA"] if part.written else [])
    return " + ".join(texts)


def page_drift(text: str) -> list[str]:
    total, rows = _page_parts(text)
    problems = [] if total == ASSIGNMENT_POINTS else [f"the heading says {total} points, not {ASSIGNMENT_POINTS}"]
    for part in PARTS:
        if rows.get(part.file) != _graded_text(part):
            problems.append(f"{part.file} is listed as {rows.get(part.file)!r}, not {_graded_text(part)!r}")
    return problems


def test_the_assignment_page_states_the_catalogue_points():
    assert page_drift(ASSIGNMENT_PAGE.read_text()) == []


def test_a_drifted_assignment_page_is_named():
    text = ASSIGNMENT_PAGE.read_text()
    core = PARTS[0]
    drifted = text.replace(f"| {core.auto_points} auto |", f"| {core.auto_points - 4} auto |", 1)
    assert page_drift(drifted) == [f"{core.file} is listed as '{core.auto_points - 4} auto', "
                                     f"not '{core.auto_points} auto'"]
    assert page_drift(text.replace(f"({ASSIGNMENT_POINTS} points)", f"({ASSIGNMENT_POINTS + 1} points)", 1))


def test_the_checks_page_counts_the_cheat_catalogue():
    from cheats import CHEATS

    assert f"`tests/cheats/`, {len(CHEATS)} attempts" in CHECKS_PAGE.read_text()


def test_the_demo_states_no_point_total_of_its_own():
    """The demo's totals are computed from the catalogue, never typed."""
    source = Path(demo.__file__).read_text()
    assert not re.search(r"\b\d+ points?\b", source)
    assert f"{sum(p.ta_points for p in PARTS)} points in all" in demo.written_answers_note()
    table = demo.grade_table({"ada": {}})
    assert f"0/{PARTS[0].auto_points}" in table


TA_GUIDE = COURSE_ROOT / "docs" / "tas" / "guide.md"


def ta_guide_totals(text: str) -> list[int]:
    """The totals the TA guide's example report summary states ("median 46 of 55")."""
    return [int(n) for n in re.findall(r"median [\d.]+ of (\d+)", text)]


def test_the_ta_guide_states_the_assignment_total():
    totals = ta_guide_totals(TA_GUIDE.read_text())
    assert totals and set(totals) == {ASSIGNMENT_POINTS}, totals


def test_a_drifted_ta_guide_total_is_caught():
    assert ta_guide_totals("scores       mean 14.5, median 16 of 18") == [18] != [ASSIGNMENT_POINTS]
