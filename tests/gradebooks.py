"""Gradebooks built directly with nbgrader's Gradebook API (fast; no kernels).

``build(path, cells, submissions, students=())``: one assignment
``self_attention`` with one notebook whose grade cells are ``cells``
(``{grade_id: max_score}``); ``submissions`` maps a student to
``{grade_id: auto_score or None}`` (missing ids stay unscored);
``students`` adds students without a submission."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import functools

import nbgrader.api
from nbgrader.api import Gradebook

from grader_tests.self_attention.answers import ASSIGNMENT, BUGGY, CORRECT, NOTEBOOK
from grader_tests.registry import GRADE_ID_PREFIX, assignment

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

NB = NOTEBOOK.removesuffix(".ipynb")
# nbgrader asks the `alembic` command for the schema head of every new gradebook (a
# second each): ask once per test session
nbgrader.api.get_alembic_version = functools.lru_cache(maxsize=1)(nbgrader.api.get_alembic_version)
ANSWERS = {a.name: a for a in BUGGY + CORRECT}
CELLS = {GRADE_ID_PREFIX + c.id: float(c.points) for c in NOTEBOOK_CHECKS["self_attention"]}


def scores_for(answer_name: str | None, cells=CELLS) -> dict[str, float]:
    """Per-cell scores of a catalogue answer (None: nothing implemented, fails all)."""
    fails = set(ANSWERS[answer_name].fails) if answer_name else {g.removeprefix(GRADE_ID_PREFIX) for g in cells}
    return {g: 0.0 if g.removeprefix(GRADE_ID_PREFIX) in fails else m for g, m in cells.items()}


def build(path: Path, cells: dict[str, float], submissions: dict[str, dict[str, float | None]],
          students=(), assignment: str = ASSIGNMENT, names: dict[str, tuple[str, str, str]] | None = None) -> str:
    url = "sqlite:///" + str(path)
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")  # alembic
    names = names or {}
    with Gradebook(url) as gb:
        gb.add_assignment(assignment)
        gb.add_notebook(NB, assignment)
        for grade_id, max_score in cells.items():
            gb.add_grade_cell(grade_id, NB, assignment, max_score=max_score, cell_type="code")
        for student in list(submissions) + list(students):
            first, last, email = names.get(student, (None, None, None))
            gb.add_student(student, first_name=first, last_name=last, email=email)
        for student, grades in submissions.items():
            gb.add_submission(assignment, student)
            for grade_id, score in grades.items():
                grade = gb.find_grade(grade_id, NB, assignment, student)
                grade.auto_score = score
            gb.db.commit()
    return url


def empty(path: Path) -> str:
    """A gradebook with its tables and nothing in them."""
    url = "sqlite:///" + str(path)
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")  # alembic
    Gradebook(url).close()
    return url


def build_assignment(path: Path, name: str, submissions: dict[str, set[str]]) -> str:
    """A gradebook of the registry's assignment ``name``: a notebook per part holding its checks (the
    parts added last first, so no order comes from the gradebook); ``submissions`` maps a student
    to the check ids they failed (every other check passed)."""
    from grader_tests.registry import assignment

    url = "sqlite:///" + str(path)
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")  # alembic
    parts = assignment(name).notebook_checks
    with Gradebook(url) as gb:
        gb.add_assignment(name)
        for notebook in reversed(list(parts)):
            gb.add_notebook(notebook, name)
            for check in parts[notebook]:
                gb.add_grade_cell(GRADE_ID_PREFIX + check.id, notebook, name, max_score=float(check.points),
                                  cell_type="code")
        for student, failed in submissions.items():
            gb.add_student(student)
            gb.add_submission(name, student)
            for notebook, checks in parts.items():
                for check in checks:
                    grade = gb.find_grade(GRADE_ID_PREFIX + check.id, notebook, name, student)
                    grade.auto_score = 0.0 if check.id in failed else float(check.points)
            gb.db.commit()
    return url
