"""What autograde's RestoreCheckCells (attention_platform/grading/preprocessors.py) logs about locked
cells: nothing above debug for a submission as released (its hidden checks and TA rubrics come back
from the instructor's copy on every autograde), a warning that says what to do for a locked cell a
student edited. A real ``nbgrader generate_assignment`` of each assignment (the run's ``released_course``)
fills the gradebook's source cells; no sandbox runs here."""

from __future__ import annotations

import io
import logging

import nbformat
import pytest

from attention_platform.grading.preprocessors import RestoreCheckCells
from grader_tests.registry import ASSIGNMENTS, assignment

pytestmark = pytest.mark.slow  # real nbgrader commands


@pytest.fixture(scope="module")
def courses(tmp_path_factory, released_course):
    """Each assignment's released course, by name."""
    folder = tmp_path_factory.mktemp("restore")
    return {name: released_course(folder / name, name) for name in sorted(ASSIGNMENTS)}


def _restored(course, name: str, notebook: str, nb) -> tuple[object, list[str]]:
    """``nb`` after RestoreCheckCells, and the lines it logged at INFO and above."""
    stream = io.StringIO()
    log = logging.getLogger(f"test-restore-{name}-{notebook}")
    log.handlers[:] = [logging.StreamHandler(stream)]
    log.handlers[0].setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log.setLevel(logging.INFO)
    log.propagate = False
    restore = RestoreCheckCells(log=log)
    resources = {"nbgrader": {"notebook": notebook, "assignment": name,
                              "db_url": "sqlite:///" + str(course / "gradebook.db")}}
    nb, _ = restore.preprocess(nb, resources)
    return nb, stream.getvalue().splitlines()


def _rubrics(nb) -> dict[str, str]:
    return {cell.metadata.nbgrader["grade_id"]: cell.source for cell in nb.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id", "").startswith("rubric_")}


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_a_submission_as_released_is_restored_without_a_warning(courses, name):
    course = courses[name]
    with_rubric = 0
    for notebook in assignment(name).notebooks:
        release = nbformat.read(course / "release" / name / f"{notebook}.ipynb", as_version=4)
        source = nbformat.read(course / "source" / name / f"{notebook}.ipynb", as_version=4)
        graded, logged = _restored(course, name, notebook, release)
        assert logged == [], f"{notebook}: {logged}"
        assert _rubrics(graded) == _rubrics(source)  # the TA's rubric is back, mark scheme and all
        with_rubric += bool(_rubrics(source))
    assert with_rubric, f"{name} has written answers with rubrics"


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_an_edited_locked_cell_is_restored_and_the_warning_says_what_to_do(courses, name):
    course = courses[name]
    notebook = next(n for n in assignment(name).notebooks
                    if _rubrics(nbformat.read(course / "source" / name / f"{n}.ipynb", as_version=4)))
    release = nbformat.read(course / "release" / name / f"{notebook}.ipynb", as_version=4)
    rubric = next(cell for cell in release.cells if cell.metadata.get("nbgrader", {}).get("grade_id", "").startswith("rubric_"))
    rubric.source += "\n\nmy answer is here instead"
    graded, logged = _restored(course, name, notebook, release)
    grade_id = rubric.metadata.nbgrader["grade_id"]
    assert len(logged) == 1 and logged[0].startswith("WARNING") and grade_id in logged[0]
    assert "instructor's copy" in logged[0] and "submitted" in logged[0]  # what happened and where to look
    assert "my answer is here instead" not in _rubrics(graded)[grade_id]
