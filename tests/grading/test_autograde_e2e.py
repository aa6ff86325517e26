"""A real grading round: nbgrader autograde + generate_feedback over a small
class with real kernels, then exact per-check scores and leak-free feedback."""

from __future__ import annotations

import html
import re

import nbformat
import pytest

from attention_platform.course.directory import check_scores, nbgrader
from e2e_class import ANSWERS, CHEATER_FAILS, CORE_CHECKS as ALL_CHECKS, HONEST, TAMPERED_FAILS, graded_copy
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK
from grader_tests.registry import GRADE_ID_PREFIX

pytestmark = [pytest.mark.slow, pytest.mark.root]  # nbgrader autograde grades in real sandboxes


@pytest.fixture(scope="module")
def graded(autograded_e2e_class, tmp_path_factory):
    course, autograde = graded_copy(autograded_e2e_class, tmp_path_factory.mktemp("graded") / "course")
    feedback = nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    return course, autograde, feedback, check_scores(course, assignment=ASSIGNMENT, notebook=NOTEBOOK)


def _expected(failing: set[str]) -> dict[str, float]:
    return {GRADE_ID_PREFIX + c.id: 0.0 if c.id in failing else float(c.points) for c in ALL_CHECKS}


@pytest.mark.parametrize("student", sorted(HONEST))
def test_exact_scores_per_check(graded, student):
    _, _, _, scores = graded
    assert scores[student] == _expected(set(ANSWERS[HONEST[student]].fails))


@pytest.mark.parametrize(
    "student, failing",
    [
        ("empty", {c.id for c in ALL_CHECKS}),
        ("tampered", TAMPERED_FAILS),  # graded from the instructor's cells: edits and deletions change nothing
        ("cheater", CHEATER_FAILS),  # replaced checks are restored, so the bug is still caught
        ("nocells", {c.id for c in ALL_CHECKS}),  # every cell restored from the gradebook, no answer in it
    ],
)
def test_bad_or_tampered_submissions_are_graded_from_the_instructor_cells(graded, student, failing):
    _, _, _, scores = graded
    assert scores[student] == _expected(failing)


def test_unreadable_submission_is_rejected_and_the_batch_goes_on(graded):
    course, autograde, _, scores = graded
    assert "notjson" in autograde.stderr and "error" in autograde.stderr.lower()
    assert not (course / "autograded" / "notjson" / ASSIGNMENT / NOTEBOOK).exists()
    assert all(score in (0, None) for score in scores.get("notjson", {}).values())
    assert (course / "submitted" / "notjson" / ASSIGNMENT / NOTEBOOK).exists(), "the submission itself is kept"
    assert scores["ref"] == _expected(set())


def test_feedback_shows_teaching_messages_and_no_hidden_code(graded):
    course, _, feedback, _ = graded
    assert feedback.returncode == 0, feedback.stderr[-2000:]
    pages = {p.parts[-3]: p.read_text() for p in (course / "feedback").glob(f"*/{ASSIGNMENT}/*.html")}
    assert {"ref", "noscale", "empty", "tampered"} <= set(pages)
    for student, page in pages.items():
        for leak in ("grader_tests", "BEGIN HIDDEN TESTS", "from grader_tests", "JudgeFailure"):
            assert leak not in page, f"{student}'s feedback shows {leak!r}"
    assert "you did not scale the scores at all" in pages["noscale"]
    # each check in the feedback: its title and points, as the catalogue defines them
    shown = " ".join(html.unescape(re.sub(r"<[^>]+>", "", pages["ref"])).split())
    for check in ALL_CHECKS:
        unit = "point" if check.points == 1 else "points"
        assert f"{check.title} {check.points:g} of {check.points:g} {unit}" in shown, check.id
    assert "inverted" in pages["inverted"]
    assert "Not answered: this cell still holds the stub you were given." in pages["empty"]
    assert 'data-state="not answered"' in pages["empty"]


def test_autograded_notebooks_keep_only_one_line_errors_in_check_cells(graded):
    course, _, _, _ = graded
    nb = nbformat.read(course / "autograded" / "noscale" / ASSIGNMENT / NOTEBOOK, as_version=4)
    errors = [o for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith(GRADE_ID_PREFIX)
              for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors and all(len(o.traceback) == 1 for o in errors)
    assert not any("grader_tests" in line for o in errors for line in o.traceback)
