"""What feedback on submit showed a student, compared with what the TA's autograde wrote into the
course's gradebook: ``assignment_checks.as_students_see`` (a gradebook row as the student sees it)
and the benchmark's comparison of a whole class (``benchmarks.feedback_on_submit.as_the_ta_graded``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from attention_platform.benchmarks.feedback_on_submit import as_the_ta_graded
from attention_platform.course.assignment_checks import as_students_see, checks_by_grade_id
from gradebooks import CELLS, NB, build, scores_for

CHECKS = checks_by_grade_id("self_attention")
SHAPES, SCALE = CHECKS["check_shapes"], CHECKS["check_sqrt_d_scale"]  # 1 point, 2 points


@pytest.mark.parametrize("scores, points, passed", [
    ({f"{NB}/check_shapes": 1.0, f"{NB}/check_sqrt_d_scale": 2.0}, 3.0,
     {(NB, SHAPES.title): True, (NB, SCALE.title): True}),
    ({f"{NB}/check_shapes": 1.0, f"{NB}/check_sqrt_d_scale": 1.0}, 2.0,  # half of a check is not passed
     {(NB, SHAPES.title): True, (NB, SCALE.title): False}),
    ({f"{NB}/check_shapes": None, f"{NB}/check_sqrt_d_scale": 0.0}, 0.0,  # not scored: nothing, not passed
     {(NB, SHAPES.title): False, (NB, SCALE.title): False}),
    ({f"{NB}/check_shapes": 1.0, "06_explain/sqrt_answer": 2.0}, 1.0,  # a written answer is the staff's
     {(NB, SHAPES.title): True}),
])
def test_a_gradebook_row_as_the_student_sees_it(scores, points, passed):
    assert as_students_see("self_attention", scores) == (points, passed)


def shown(score: float, passed: dict, round_no: int = 1, state: str = "graded") -> dict:
    """A benchmark sample: what a student's tab showed of their attempt in a round."""
    return {"round": round_no, "state": state, "score": score,
            "checks": [[NB, CHECKS[grade_id].title, ok] for grade_id, ok in passed.items()]}


def test_the_class_is_compared_on_each_students_last_round(tmp_path):
    correct, wrong = dict(CELLS), scores_for("softmax_over_queries", CELLS)
    build(tmp_path / "gradebook.db", CELLS, {"ada": correct, "ben": wrong, "cy": correct, "dee": correct})
    full = {g: True for g in CELLS}
    as_ben_got = {g: wrong[g] == CELLS[g] for g in CELLS}
    students = [
        SimpleNamespace(name="ada", samples=[shown(0.0, {g: False for g in CELLS}, 0),
                                             shown(sum(CELLS.values()), full)]),
        SimpleNamespace(name="ben", samples=[shown(sum(wrong.values()), as_ben_got)]),
        # shown a pass the TA's autograde did not give
        SimpleNamespace(name="cy", samples=[shown(sum(CELLS.values()), {**full, "check_shapes": False})]),
        # the last round not graded: not compared
        SimpleNamespace(name="dee", samples=[shown(sum(CELLS.values()), full, 0),
                                             {"round": 1, "state": "no result"}]),
    ]
    assert as_the_ta_graded(tmp_path, "self_attention", students) == {"compared": 3, "differ": ["cy"]}


def test_a_student_the_ta_never_graded_differs(tmp_path):
    build(tmp_path / "gradebook.db", CELLS, {}, students=("eve",))
    student = SimpleNamespace(name="eve", samples=[shown(1.0, {"check_shapes": True})])
    assert as_the_ta_graded(tmp_path, "self_attention", [student]) == {"compared": 1, "differ": ["eve"]}
