"""What the grader's side reads of an assignment's hidden checks, by the assignment's name.

Every feature asks here, with the assignment it serves (from the request, the path or the
gradebook), and this module asks ``grader_tests.registry``. An nbgrader assignment the registry has
no checks for is served like any other, with none: its notebooks in name order, its graded cells
shown under their grade ids."""

from __future__ import annotations

from typing import Callable


def _registered(assignment: str):
    from grader_tests.registry import UnknownAssignment, assignment as registered

    try:
        return registered(assignment)
    except UnknownAssignment:
        return None


def notebook_order(assignment: str) -> tuple[str, ...]:
    """The assignment's notebook ids in the order students work through them (its main one first)."""
    found = _registered(assignment)
    return found.notebooks if found is not None else ()


def by_notebook_order(assignment: str) -> Callable[[str], tuple[int, str]]:
    """A sort key for notebook ids (no ``.ipynb``): the assignment's order, then any others by name."""
    order = {name: i for i, name in enumerate(notebook_order(assignment))}
    return lambda notebook_id: (order.get(notebook_id, len(order)), notebook_id)


def checks_by_grade_id(assignment: str) -> dict:
    """The assignment's hidden checks by the grade id of the test cell that runs each."""
    from grader_tests.registry import GRADE_ID_PREFIX

    found = _registered(assignment)
    return {GRADE_ID_PREFIX + check.id: check for check in found.checks} if found is not None else {}


def as_students_see(assignment: str, scores: dict) -> tuple[float, dict[tuple[str, str], bool]]:
    """One student's gradebook scores of the assignment (``{"<notebook>/<grade id>": score}``, as
    ``course.directory.check_scores`` reads every notebook's) as feedback on submit shows them: the
    hidden checks' points together, and whether each check (by notebook and title) got all of its
    points. Written answers, which the course staff grade, are left out."""
    checks = checks_by_grade_id(assignment)
    total, passed = 0.0, {}
    for key, score in scores.items():
        notebook, _, grade_id = key.partition("/")
        check = checks.get(grade_id)
        if check is None:
            continue
        total += score or 0
        passed[(notebook, check.title)] = score == check.points
    return total, passed
