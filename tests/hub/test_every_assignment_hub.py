"""Every assignment of the course goes round the live hub, not only the first.

On the walk-through's hub (tests/conftest.py ``native_hub``), for each assignment the browser walk and
tests/hub/test_hub_api.py do not play (they play the first): the instructor releases it from the
formgrader, a student fetches it, types the instructor's answers into every notebook, submits; the TA
collects and autogrades it from the formgrader (in the sandboxes), and the submission scores every
point of the hidden checks, the written answers left to the TA.
"""

from __future__ import annotations

import os

import nbformat
import pytest

from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests.proofs import solved
from grader_tests.registry import ASSIGNMENTS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.hub,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)"),
]

PLAYED_ELSEWHERE = "self_attention"  # by the browser walk and the hub API test
STUDENT = "student2"


@pytest.mark.parametrize("name", sorted(set(ASSIGNMENTS) - {PLAYED_ELSEWHERE}))
def test_an_assignment_goes_round_the_hub(native_hub, name):
    found = ASSIGNMENTS[name]
    released = native_hub.session("instructor").formgrader("POST", f"assignment/{name}/release").json()
    assert released["success"], released

    student = native_hub.session(STUDENT)
    student.spawn()
    offered = {a["assignment_id"]: a["status"] for a in student.assignments()}
    assert offered.get(name) == "released", offered
    assert student.assignment_action("fetch", name)["success"]
    for notebook in found.notebooks:
        release = nbformat.read(COURSE_ROOT / "release" / name / f"{notebook}.ipynb", as_version=4)
        source = nbformat.read(COURSE_ROOT / "source" / name / f"{notebook}.ipynb", as_version=4)
        student.save_notebook(f"{name}/{notebook}.ipynb", nbformat.from_dict(solved(release, source)))
    submitted = student.assignment_action("submit", name)
    assert submitted["success"], submitted

    ta = native_hub.session("ta")
    assert ta.formgrader("POST", f"assignment/{name}/collect").json()["success"]
    graded = ta.formgrader("POST", f"submission/{name}/{STUDENT}/autograde").json()
    assert graded["success"], graded
    rows = {row["student"]: row for row in ta.formgrader("GET", f"submissions/{name}").json()}
    assert rows[STUDENT]["autograded"], rows[STUDENT]
    assert rows[STUDENT]["score"] == found.auto_points and rows[STUDENT]["max_score"] == found.points, rows[STUDENT]
    assert rows[STUDENT]["needs_manual_grade"] == bool(found.written)
