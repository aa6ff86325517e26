"""Deadlines where collect decides what counts: each student's own effective deadline, in one real
``nbgrader collect`` over a real per-student exchange (tests/fault_helpers.py: the hub's layout, students
submitting through nbgrader's own Assignments-tab code), judged on the exchange's time; and the
deadline file a release writes for each student."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.directory import copy_course
from attention_platform.deadlines import late_policy
from attention_platform.deadlines.extensions import ExtensionStore
from tests.fault_helpers import ASSIGNMENT, REPO, make_exchange

NOTEBOOK = f"{ASSIGNMENT}.ipynb"
STUDENTS = ("ann", "bo", "cy")


def marker(course: Path, student: str) -> str:
    nb = nbformat.read(course / "submitted" / student / ASSIGNMENT / NOTEBOOK, as_version=4)
    return nb.metadata["load_marker"]


@pytest.fixture(scope="module")
def three_rounds(tmp_path_factory):
    """ann, bo and cy submit v1; the deadline passes (T1); all submit v2; T2; ann and bo submit v3."""
    base = tmp_path_factory.mktemp("deadlines-collect")
    ex = make_exchange(base, STUDENTS)
    for student in STUDENTS:
        ex.submit(student, marker="v1")
    time.sleep(1.2)  # the kernel's change times are coarse (a tick): keep each round apart
    t1 = dt.datetime.now(dt.timezone.utc)
    time.sleep(1.2)
    for student in STUDENTS:
        ex.submit(student, marker="v2")
    time.sleep(1.2)
    t2 = dt.datetime.now(dt.timezone.utc)
    time.sleep(1.2)
    for student in ("ann", "bo"):
        ex.submit(student, marker="v3")
    return ex, copy_course(base / "course-template"), t1, t2


def course_for(three_rounds, name: str) -> Path:
    """A copy of the course with the deadline T1, ann's extension to T1 + 1 h and bo's to T2."""
    ex, template, t1, t2 = three_rounds
    course = template.parent / name
    shutil.copytree(template, course, symlinks=True)
    added = ex.nbgrader(course, "db", "assignment", "add", ASSIGNMENT, "--duedate", t1.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    assert added.returncode == 0, added.stderr[-2000:]
    extensions = ExtensionStore(course)
    extensions.grant(ASSIGNMENT, "ann", t1 + dt.timedelta(hours=1), "accommodation", "prof", now=t2)
    extensions.grant(ASSIGNMENT, "bo", t2, "illness", "prof", now=t2)
    return course


def test_before_duedate_keeps_each_students_last_submission_before_their_own_deadline(three_rounds):
    ex = three_rounds[0]
    course = course_for(three_rounds, "before-duedate")
    done = ex.nbgrader(course, "collect", "--before-duedate", ASSIGNMENT)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert {s: marker(course, s) for s in STUDENTS} == {"ann": "v3-0", "bo": "v2-0", "cy": "v1-0"}


def test_under_closed_nothing_after_a_students_own_deadline_is_collected(three_rounds):
    ex = three_rounds[0]
    course = course_for(three_rounds, "closed")
    late_policy.save(course, ASSIGNMENT, {"kind": "closed"})
    done = ex.nbgrader(course, "collect", ASSIGNMENT)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert {s: marker(course, s) for s in STUDENTS} == {"ann": "v3-0", "bo": "v2-0", "cy": "v1-0"}
    assert "bo: not counted: 1 submission received after the assignment closed" in log, log
    assert "cy: not counted: 1 submission received after the assignment closed" in log, log
    assert len(ex.submissions("cy")) == 2  # kept in the exchange for the record


def test_without_a_policy_collect_takes_the_newest_and_says_it_is_late_for_that_student(three_rounds):
    ex = three_rounds[0]
    course = course_for(three_rounds, "no-policy")
    done = ex.nbgrader(course, "collect", ASSIGNMENT)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert {s: marker(course, s) for s in STUDENTS} == {"ann": "v3-0", "bo": "v3-0", "cy": "v2-0"}
    assert "ann: late" not in log and "bo: late" in log and "cy: late" in log, log


def test_a_release_writes_each_students_own_deadline_file(three_rounds):
    ex, _template, t1, _t2 = three_rounds
    course = course_for(three_rounds, "release")
    shutil.copytree(REPO / "release" / ASSIGNMENT, course / "release" / ASSIGNMENT)  # as generate_assignment leaves it
    done = ex.nbgrader(course, "release_assignment", ASSIGNMENT, "--force")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    files = {s: json.loads((ex.course / "feedback" / s / f"deadline-{ASSIGNMENT}.json").read_text()) for s in STUDENTS}
    assert files["ann"]["now"]["extension"] and files["cy"]["now"]["extension"] is None
    assert files["cy"]["now"]["effective_due"] == t1.strftime("%Y-%m-%dT%H:%M:%SZ")
