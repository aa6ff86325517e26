"""Deadlines where the gradebook's grade is made: the same answers, submitted late, graded by a real
``nbgrader autograde`` (sandboxed) without a late policy and with one: the penalty is applied only
with it, by the student's own deadline, and the feedback page, the per-check export and the
misconception report say how late and what it cost."""

from __future__ import annotations

import csv
import datetime as dt
import os
import re
import shutil
from html import unescape

import nbformat
import pytest
from nbgrader.api import Gradebook

from attention_platform.course.directory import nbgrader, write_submission
from attention_platform.deadlines import late_policy
from attention_platform.deadlines.extensions import ExtensionStore
from attention_platform.grading.batch import autograde_batch
from attention_platform.reporting.exports import CheckBreakdownExportPlugin, run_export
from attention_platform.reporting.report import collect
from gradebooks import ANSWERS
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK, with_answer

pytestmark = [pytest.mark.slow, pytest.mark.root]  # real nbgrader autograde, in the sandbox
DUE = dt.datetime(2030, 5, 6, 12, 0, tzinfo=dt.timezone.utc)
# ann: 2 h 30 min late; bo: as late, with an extension that covers it; cy: on time
SUBMITTED = {"ann": DUE + dt.timedelta(hours=2.5), "bo": DUE + dt.timedelta(hours=2.5), "cy": DUE}


def penalties(course) -> dict[str, tuple[float, float | None]]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {student: (notebook.score, notebook.late_submission_penalty) for student in SUBMITTED
                for notebook in [gb.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student)]}


def test_the_same_late_answers_lose_points_only_under_the_late_policy_and_the_page_says_so(tmp_path, released_course):
    if os.geteuid() != 0:
        pytest.skip("the sandbox needs root (CI is root)")
    course = released_course(tmp_path / "course", ASSIGNMENT, notebooks=[NOTEBOOK])
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    for student, when in SUBMITTED.items():
        write_submission(course, student, with_answer(release, ANSWERS["reference_style"].code),
                         assignment=ASSIGNMENT, name=NOTEBOOK, timestamp=when)
    nbgrader(course, "db", "assignment", "add", ASSIGNMENT, "--duedate", DUE.strftime("%Y-%m-%d %H:%M:%S UTC"),
             check=True)
    ExtensionStore(course).grant(ASSIGNMENT, "bo", DUE + dt.timedelta(hours=3), "accommodation", "prof", now=DUE)

    nbgrader(course, "autograde", ASSIGNMENT, "--force", check=True)
    without = penalties(course)
    assert all(score > 0 and not penalty for score, penalty in without.values()), without

    late_policy.save(course, ASSIGNMENT, {"kind": "penalty", "penalty_percent": 10, "per": "hour",
                                          "max_penalty_percent": 50})
    nbgrader(course, "autograde", ASSIGNMENT, "--force", check=True)
    policed = penalties(course)
    assert {s: score for s, (score, _) in policed.items()} == {s: score for s, (score, _) in without.items()}
    assert policed["ann"][1] == pytest.approx(0.3 * policed["ann"][0])  # three hours begun
    assert not policed["bo"][1] and not policed["cy"][1]

    nbgrader(course, "generate_feedback", ASSIGNMENT, "--force", check=True)
    pages = {s: (course / "feedback" / s / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text() for s in SUBMITTED}
    ann = " ".join(unescape(re.search(r'id="late-note">(.*?)</p>', pages["ann"], re.S).group(1)).split())
    assert ann.startswith("Submitted 2 h 30 min after your deadline, 2030-05-06 12:00 UTC: 30% of the score is taken "
                          "under this assignment's late policy"), ann
    assert f"your total after it is {policed['ann'][0] - policed['ann'][1]:g} of " in ann, ann
    assert 'id="late-note"' not in pages["bo"] and 'id="late-note"' not in pages["cy"]

    db_url = f"sqlite:///{course / 'gradebook.db'}"
    run_export(CheckBreakdownExportPlugin, db_url, to=str(tmp_path / "checks.csv"), course_root=str(course))
    with open(tmp_path / "checks.csv", newline="") as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    assert (rows["ann"]["late_by_minutes"], float(rows["ann"]["late_penalty"])) == ("150", policed["ann"][1])
    assert rows["bo"]["deadline"] == "2030-05-06 15:00:00 UTC" and rows["bo"]["late_by_minutes"] == ""
    assert rows["cy"]["deadline"] == "2030-05-06 12:00:00 UTC"
    report = {row.student_id: row for row in collect(db_url, ASSIGNMENT, course=course).students}
    assert report["ann"].late == "2 h 30 min late (by the deadline 2030-05-06 12:00 UTC): 30% penalty"
    assert report["bo"].late == report["cy"].late == ""

    # the formgrader's batch grader (one shared gradebook session) applies the same penalties
    batch = tmp_path / "batch-course"
    shutil.copytree(course, batch, symlinks=True)
    with Gradebook(f"sqlite:///{batch / 'gradebook.db'}") as gb:
        for student in SUBMITTED:
            gb.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student).late_submission_penalty = None
        gb.db.commit()
    autograde_batch(batch, ASSIGNMENT, jobs=1, progress=False, log=None)
    assert {s: (score, pytest.approx(penalty or 0)) for s, (score, penalty) in penalties(batch).items()} == \
        {s: (score, penalty or 0) for s, (score, penalty) in policed.items()}
