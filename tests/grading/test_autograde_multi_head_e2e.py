"""A real grading round of the second assignment, multi_head_attention: nbgrader generate_assignment,
autograde in real sandboxes and generate_feedback over a small class, then exact per-cell scores (every
hidden check passes the instructor's solution typed into the release, none passes the release as it is,
each chaff loses exactly its checks) and feedback pages that teach without showing check code."""

from __future__ import annotations

import html
import shutil
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.directory import nbgrader
from grader_tests.catalogue import GRADE_ID_PREFIX
from grader_tests.proofs import solved
from grader_tests.registry import assignment

pytestmark = [pytest.mark.slow, pytest.mark.root]  # nbgrader autograde grades in real sandboxes

ASSIGNMENT = "multi_head_attention"
MULTI_HEAD = assignment(ASSIGNMENT)
CHAFFS = {proof.name: proof for proof in MULTI_HEAD.chaffs}
# student -> the chaff typed into the layer notebook (None: the instructor's solution)
STUDENTS = {"ref": None, "sqrtd": "scaled_by_sqrt_d_model", "onemask": "mask_on_first_head_only",
            "reshaped": "split_by_bare_reshape"}


def _submit(course: Path, student: str, notebooks: dict[str, nbformat.NotebookNode]) -> None:
    """File a submission as ``nbgrader collect`` would."""
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    for notebook, nb in notebooks.items():
        nbformat.write(nb, folder / f"{notebook}.ipynb")
    (folder / "timestamp.txt").write_text(datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z"))


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    course = released_course(tmp_path_factory.mktemp("course") / "course", ASSIGNMENT)
    read = lambda folder, notebook: nbformat.read(course / folder / ASSIGNMENT / f"{notebook}.ipynb",  # noqa: E731
                                                  as_version=4)
    release = {notebook: read("release", notebook) for notebook in MULTI_HEAD.notebooks}
    source = {notebook: read("source", notebook) for notebook in MULTI_HEAD.notebooks}
    for student, chaff in STUDENTS.items():
        typed = {notebook: CHAFFS[chaff].apply(nb) if chaff and CHAFFS[chaff].notebook == notebook else nb
                 for notebook, nb in source.items()}
        _submit(course, student, {notebook: solved(release[notebook], typed[notebook]) for notebook in typed})
    _submit(course, "empty", release)
    autograde = nbgrader(course, "autograde", ASSIGNMENT, "--force")
    feedback = nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    return course, autograde, feedback


def _scores(course: Path, student: str) -> dict[str, float | None]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        submission = gb.find_submission(ASSIGNMENT, student)
        return {grade.name: grade.score for nb in submission.notebooks for grade in nb.grades}


def _expected(failing: set[str]) -> dict[str, float]:
    table = {GRADE_ID_PREFIX + c.id: 0.0 if c.id in failing else float(c.points) for c in MULTI_HEAD.checks}
    table.update({answer.grade_id: 0.0 for answer in MULTI_HEAD.written})  # waiting for a TA
    return table


def test_autograde_and_feedback_run_clean(graded):
    _, autograde, feedback = graded
    assert autograde.returncode == 0, autograde.stderr[-3000:]
    assert feedback.returncode == 0, feedback.stderr[-3000:]
    # what every submission as released does (rubrics and hidden checks restored) raises no alarm
    assert "has changed!" not in autograde.stderr and "edited in this submission" not in autograde.stderr


@pytest.mark.parametrize("student", sorted(STUDENTS))
def test_each_submission_loses_exactly_its_checks(graded, student):
    course, _, _ = graded
    chaff = STUDENTS[student]
    assert _scores(course, student) == _expected(set(CHAFFS[chaff].fails) if chaff else set())


def test_the_release_as_it_is_passes_no_check(graded):
    course, _, _ = graded
    assert _scores(course, "empty") == _expected({check.id for check in MULTI_HEAD.checks})


def test_feedback_names_the_misconception_without_check_code(graded):
    course, _, _ = graded
    # read as a browser shows it: the page escapes quotes in text as nbconvert writes them
    page = html.unescape((course / "feedback" / "sqrtd" / ASSIGNMENT / "multi_head_attention.html").read_text())
    assert "you divided by" in page and "the model's dimension" in page
    for student in STUDENTS:
        for page in (course / "feedback" / student / ASSIGNMENT).glob("*.html"):
            text = page.read_text()
            for leak in ("grader_tests", "BEGIN HIDDEN TESTS", "MARK SCHEME", "JudgeFailure"):
                assert leak not in text, f"{page} shows {leak!r}"


def test_the_batch_grader_grades_the_class_as_nbgrader_did(graded, tmp_path, released_course):
    """``attention-course autograde-batch`` (the batch grader, in its own sandboxes) gives every student
    of the class the grades nbgrader's autograde gave."""
    from attention_platform.grading.batch import autograde_batch

    course, _, _ = graded
    again = released_course(tmp_path / "course", ASSIGNMENT)
    shutil.copytree(course / "submitted", again / "submitted")
    students = [*STUDENTS, "empty"]
    outcomes = {o.student: o.status for o in autograde_batch(again, ASSIGNMENT, progress=False, log=None)}
    assert outcomes == {student: "ok" for student in students}
    assert {s: _scores(again, s) for s in students} == {s: _scores(course, s) for s in students}
