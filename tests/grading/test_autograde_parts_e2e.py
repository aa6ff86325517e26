"""A real grading round over the further parts (notebooks 02–06): nbgrader
autograde + generate_feedback with real execution, then exact per-cell scores
(hidden checks and manually graded answers), rubrics where TAs see them and
nowhere else, and plots in the feedback."""

from __future__ import annotations

import time

import nbformat
import pytest

from attention_platform.course.directory import check_scores, nbgrader, write_submission
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOKS, PART_NOTEBOOKS
from grader_tests.self_attention.answers_parts import BUGGY
from grader_tests.self_attention.catalogue import ASSIGNMENT_POINTS, PART_BY_NOTEBOOK, PARTS
from grader_tests.proofs import solved, with_edits
from grader_tests.registry import GRADE_ID_PREFIX, assignment

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

pytestmark = [pytest.mark.slow, pytest.mark.root]  # nbgrader autograde grades in real sandboxes

BUGS = {answer.name: answer for answer in BUGGY}
# student -> {notebook id: bug names typed into that notebook (empty: the instructor's solution)}
BUGGY_STUDENTS = {
    "softmaxcols_noshift": {"02_by_hand": ["softmax_over_columns"], "05_experiments": ["targets_not_shifted"]},
    "sqrtc_nobias": {"03_head_and_bias": ["head_scaled_by_sqrt_c", "projection_bias_dropped"],
                     "04_shapes_and_cost": ["biases_counted"]},
}


def _stem(name: str) -> str:
    return name.removesuffix(".ipynb")


def _written_ids(stem: str) -> set[str]:
    """The written answers a TA grades in notebook ``stem``, from the catalogue."""
    return {answer.grade_id for answer in PART_BY_NOTEBOOK[stem].written}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    course = released_course(tmp_path_factory.mktemp("course") / "course", ASSIGNMENT)
    release = {n: nbformat.read(course / "release" / ASSIGNMENT / n, as_version=4) for n in NOTEBOOKS}
    source = {n: nbformat.read(course / "source" / ASSIGNMENT / n, as_version=4) for n in NOTEBOOKS}
    for name in NOTEBOOKS:
        write_submission(course, "ref", solved(release[name], source[name]), name=name, assignment=ASSIGNMENT)
    for name in PART_NOTEBOOKS:
        write_submission(course, "empty", release[name], name=name, assignment=ASSIGNMENT)
    for student, notebooks in BUGGY_STUDENTS.items():
        for stem, bugs in notebooks.items():
            edits = [edit for bug in bugs for edit in BUGS[bug].edits]
            name = stem + ".ipynb"
            write_submission(course, student, solved(release[name], with_edits(source[name], edits)), name=name,
                             assignment=ASSIGNMENT)
    started = time.monotonic()
    autograde = nbgrader(course, "autograde", ASSIGNMENT, "--force")
    seconds = time.monotonic() - started
    feedback = nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    scores = {name: check_scores(course, notebook=name, assignment=ASSIGNMENT) for name in NOTEBOOKS}
    return course, autograde, feedback, scores, source, seconds


def _needs_ta(course, name: str, student: str) -> dict[str, bool]:
    """``{grade_id: needs_manual_grade}`` of one submitted notebook."""
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        found = gb.find_submission_notebook(name.removesuffix(".ipynb"), ASSIGNMENT, student)
        return {grade.name: bool(grade.needs_manual_grade) for grade in found.grades}


def _expected(stem: str, failing: set[str], manual: float = 0.0) -> dict[str, float | None]:
    table: dict[str, float | None] = {GRADE_ID_PREFIX + c.id: 0.0 if c.id in failing else float(c.points)
                                      for c in NOTEBOOK_CHECKS.get(stem, [])}
    table.update({gid: manual for gid in _written_ids(stem)})
    return table


def test_autograde_runs_clean(graded):
    course, autograde, _, _, _, seconds = graded
    assert autograde.returncode == 0, autograde.stderr[-3000:]
    print(f"autograde of {sum(1 for _ in (course / 'submitted').glob('*/*/*.ipynb'))} notebooks: {seconds:.1f} s")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_reference_submission_gets_every_automatic_point(graded, name):
    course, _, _, scores, source, _ = graded
    assert scores[name]["ref"] == _expected(_stem(name), set())
    # A written answer waits for a TA (score 0 until graded); checks never do.
    assert {gid for gid, pending in _needs_ta(course, name, "ref").items() if pending} == _written_ids(_stem(name))


@pytest.mark.parametrize("name", PART_NOTEBOOKS)
def test_empty_submission_scores_zero_everywhere(graded, name):
    course, _, _, scores, source, _ = graded
    stem = _stem(name)
    assert scores[name]["empty"] == _expected(stem, {c.id for c in NOTEBOOK_CHECKS.get(stem, [])})
    assert not any(_needs_ta(course, name, "empty").values()), "an unanswered question is 0 without a TA"


@pytest.mark.parametrize("student", sorted(BUGGY_STUDENTS))
def test_buggy_submissions_lose_exactly_their_checks(graded, student):
    _, _, _, scores, source, _ = graded
    for stem, bugs in BUGGY_STUDENTS[student].items():
        failing = set().union(*(BUGS[bug].fails for bug in bugs))
        assert scores[stem + ".ipynb"][student] == _expected(stem, failing), stem


def test_nbgrader_counts_the_catalogue_points(graded):
    """The gradebook nbgrader built from the notebooks holds exactly the catalogue's graded cells and points."""
    course, _, _, _, _, _ = graded
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        for part in PARTS:
            cells = {cell.name: cell.max_score for cell in gb.find_notebook(part.notebook, ASSIGNMENT).grade_cells}
            assert cells == {**{c.grade_id: float(c.points) for c in part.checks},
                             **{a.grade_id: float(a.points) for a in part.written}}, part.notebook
        assert sum(a.max_score for a in gb.find_assignment(ASSIGNMENT).notebooks) == ASSIGNMENT_POINTS


def test_rubrics_reach_the_formgrader_but_not_students(graded):
    course, _, feedback, _, _, _ = graded
    assert feedback.returncode == 0, feedback.stderr[-2000:]
    graded_nb = (course / "autograded" / "ref" / ASSIGNMENT / "04_shapes_and_cost.ipynb").read_text()
    assert "1 point — the growth rate" in graded_nb  # the TA sees the rubric next to the answer
    released = (course / "release" / ASSIGNMENT / "04_shapes_and_cost.ipynb").read_text()
    assert "the growth rate" not in released
    pages = list((course / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    assert len(pages) >= 5 + 5
    for page in pages:
        text = page.read_text()
        for leak in ("MARK SCHEME", "the growth rate", "grader_tests", "BEGIN HIDDEN TESTS"):
            assert leak not in text, f"{page} shows {leak!r}"


def test_feedback_shows_teaching_messages(graded):
    course, _, _, _, _, _ = graded
    buggy = (course / "feedback" / "softmaxcols_noshift" / ASSIGNMENT / "05_experiments.html").read_text()
    assert "Both models reach a loss near 0" in buggy
    by_hand = (course / "feedback" / "softmaxcols_noshift" / ASSIGNMENT / "02_by_hand.html").read_text()
    assert "your columns sum to 1, not your rows" in by_hand
    head = (course / "feedback" / "sqrtc_nobias" / ASSIGNMENT / "03_head_and_bias.html").read_text()
    assert "√C = √128" in head or "&#8730;C = &#8730;128" in head
    assert "lost their bias" in head


def test_feedback_shows_the_plots(graded):
    course, _, _, _, _, _ = graded
    ref = (course / "feedback" / "ref" / ASSIGNMENT / "05_experiments.html").read_text()
    assert ref.count("data:image/png;base64") >= 3, "heatmaps, loss curves and timing plot"
