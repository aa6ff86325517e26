"""Everything that states a check, its points or a total agrees with the assignment's catalogue: every
assignment's source notebooks' graded cells (and so the release and the feedback), the instructors' page on
the self-attention assignment (docs/instructors/assignment.md), the TA guide and the demo. Each test is
shown able to fail on a drifted copy."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from attention_platform.course import demo, graded_cells
from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests import registry
from grader_tests.self_attention.answers import ASSIGNMENT
from grader_tests.catalogue import Part

ASSIGNMENTS = sorted(registry.ASSIGNMENTS)
# The pages below describe the self-attention assignment.
PARTS = registry.assignment(ASSIGNMENT).parts
ASSIGNMENT_POINTS = registry.assignment(ASSIGNMENT).points
ASSIGNMENT_PAGE = COURSE_ROOT / "docs" / "instructors" / "assignment.md"
CHECKS_PAGE = COURSE_ROOT / "docs" / "instructors" / "hidden-checks.md"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_source_notebooks_say_what_the_catalogue_defines(name):
    assert graded_cells.drifted(name) == [], "run `python -m attention_platform.course.graded_cells`, then `make release`"


def test_the_check_names_every_assignment_that_drifted(tmp_path, capsys):
    """``--check`` (the command the docs give) reads every assignment's notebooks, not one."""
    for name in ASSIGNMENTS:
        shutil.copytree(COURSE_ROOT / "source" / name, tmp_path / "source" / name)
    assert graded_cells.main(["--check"], tmp_path) == 0
    for name in ASSIGNMENTS:
        part = _first_graded_part(name)
        _edit_cell(tmp_path, name, part, part.checks[0].grade_id, lambda cell: cell.metadata.nbgrader.update(points=9))
    assert graded_cells.main(["--check"], tmp_path) == 1
    named = capsys.readouterr().err
    assert all(f"source/{name}/{_first_graded_part(name).file}" in named for name in ASSIGNMENTS), named


@pytest.fixture(params=ASSIGNMENTS)
def course_copy(request, tmp_path) -> tuple[Path, str]:
    shutil.copytree(COURSE_ROOT / "source" / request.param, tmp_path / "source" / request.param)
    return tmp_path, request.param


def _first_graded_part(name: str) -> Part:
    return next(part for part in registry.assignment(name).parts if part.checks)


def _edit_cell(course: Path, name: str, part: Part, grade_id: str, edit) -> None:
    path = graded_cells.notebook_path(name, part, course)
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    edit(cell)
    path.write_text(nbformat.writes(nb) + "\n")


def _retitled(cell):
    cell.source = cell.source.replace(": ", ": not ", 1)


def _total_raised(points: int):
    return lambda cell: setattr(cell, "source", cell.source.replace(f"{points} points", f"{points + 1} points"))


@pytest.mark.parametrize("what", ["a check's title in its cell", "a check's points", "the overview's total"])
def test_a_drifted_notebook_is_named(course_copy, what):
    course, name = course_copy
    part = _first_graded_part(name)
    grade_id, edit = {
        "a check's title in its cell": (part.checks[0].grade_id, _retitled),
        "a check's points": (part.checks[-1].grade_id,
                             lambda cell: cell.metadata.nbgrader.update(points=part.checks[-1].points + 2)),
        "the overview's total": (graded_cells.OVERVIEW_ID, _total_raised(part.points)),
    }[what]
    _edit_cell(course, name, part, grade_id, edit)
    assert graded_cells.drifted(name, course) == [part.file], what
    assert graded_cells.sync(name, course) == [part.file]
    assert graded_cells.drifted(name, course) == []


def test_written_answer_points_come_from_the_catalogue(course_copy):
    course, name = course_copy
    part = next(p for p in registry.assignment(name).parts if p.written)
    _edit_cell(course, name, part, part.written[0].grade_id, lambda cell: cell.metadata.nbgrader.update(points=9))
    assert graded_cells.drifted(name, course) == [part.file]


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


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_demo_states_no_point_total_of_its_own(name):
    """The demo's totals are computed from the catalogue, never typed."""
    source = Path(demo.__file__).read_text()
    assert not re.search(r"\b\d+ points?\b", source)
    found = registry.assignment(name)
    if found.ta_points:
        assert f"{found.ta_points} points in all" in demo.written_answers_note(found)
    table = demo.grade_table(found, {"ada": {}})
    assert f"0/{found.auto_points}" in table


TA_GUIDE = COURSE_ROOT / "docs" / "tas" / "guide.md"


def ta_guide_totals(text: str) -> list[int]:
    """The totals the TA guide's example report summary states ("median 46 of 55")."""
    return [int(n) for n in re.findall(r"median [\d.]+ of (\d+)", text)]


def test_the_ta_guide_states_the_assignment_total():
    totals = ta_guide_totals(TA_GUIDE.read_text())
    assert totals and set(totals) == {ASSIGNMENT_POINTS}, totals


def test_a_drifted_ta_guide_total_is_caught():
    assert ta_guide_totals("scores       mean 14.5, median 16 of 18") == [18] != [ASSIGNMENT_POINTS]
