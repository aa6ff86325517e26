"""Feedback on submit under a late policy, judged at the time the exchange received each attempt: an
attempt received after the assignment closed to its student is not graded and says why (kept in
the exchange), a late one is graded and counts with its penalty in the gradebook; each student's
own deadline (an extension) decides, and each gets their deadline file.

A real run, as tests/feedback_on_submit/test_best_keeps_written_work.py: the feedback-on-submit grader
(``Service``: scan, queue, engine, install) on a copy of the course, in a process of its own with a
private sandbox worker."""

from __future__ import annotations

import os

import pytest

from grader_helpers import run_grader_script

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a private sandbox worker needs root")]

LATE_AND_CLOSED = """
import datetime as dt
import json
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from attention_platform.deadlines import late_policy
from attention_platform.deadlines.extensions import ExtensionStore
from attention_platform.feedback_on_submit.service import Service
from grader_helpers import drain
from grader_tests.self_attention.answers import ASSIGNMENT, CORRECT, release_notebook, with_answer

course, exchange = Path({course!r}), Path({exchange!r})
now = dt.datetime.now(dt.timezone.utc)
service = Service(course, exchange)
with Gradebook(service.engine.main.db_url, service.course_id) as gb:  # due three hours ago
    gb.update_or_create_assignment(ASSIGNMENT, duedate=(now - dt.timedelta(hours=3)).replace(tzinfo=None))
late_policy.save(course, ASSIGNMENT, {{"kind": "penalty", "penalty_percent": 10, "per": "hour",
                                      "max_penalty_percent": 50, "cutoff_hours": 2}})
ExtensionStore(course).grant(ASSIGNMENT, "ann", now - dt.timedelta(minutes=30), "accommodation", "prof", now=now)
for student in ("ann", "bo"):
    for folder in ("inbound", "feedback"):
        (service.exchange / folder / student).mkdir(parents=True)
service.engine.start()
service.scan()  # feedback on submit is on from now
service.late_work.publish_if_changed()


def hand_in(student: str) -> None:
    stamp = (now - dt.timedelta(hours=4)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")  # a claim: never what counts
    folder = service.exchange / "inbound" / student / f"{{student}}+{{ASSIGNMENT}}+{{stamp}}+x"
    folder.mkdir()
    nbformat.write(with_answer(release_notebook(), CORRECT[0].code), folder / f"{{ASSIGNMENT}}.ipynb")
    (folder / "timestamp.txt").write_text(stamp)


hand_in("ann")
hand_in("bo")
drain(service, ASSIGNMENT, students=("ann", "bo"), attempts=2)
seen = {{}}
for student in ("ann", "bo"):
    feedback = service.exchange / "feedback" / student
    status = json.loads((feedback / f"feedback-on-submit-{{ASSIGNMENT}}.json").read_text())
    deadline = json.loads((feedback / f"deadline-{{ASSIGNMENT}}.json").read_text())
    seen[student] = {{"attempts": [[a["state"], a["message"], a.get("late")] for a in status["attempts"]],
                     "deadline": deadline, "kept": len(list((service.exchange / "inbound" / student).iterdir()))}}
with Gradebook(service.engine.main.db_url, service.course_id) as gb:
    seen["gradebook"] = {{s.student.id: [s.score, s.late_submission_penalty] for s in gb.assignment_submissions(ASSIGNMENT)}}
print(json.dumps(seen))
service.ledger.close()
service.engine.close()
"""


def test_a_closed_attempt_is_not_graded_and_a_late_one_counts_with_its_penalty(tmp_path, released_course):
    from grader_tests.self_attention.answers import ASSIGNMENT

    course, exchange = released_course(tmp_path / "course", ASSIGNMENT), tmp_path / "exchange"
    code = LATE_AND_CLOSED.format(course=str(course), exchange=str(exchange))
    seen = run_grader_script(code, {ASSIGNMENT: {"feedback": "checks", "counts": "last"}})

    [(state, message, late)] = seen["bo"]["attempts"]  # 3 h after the deadline, past the 2 h cut-off
    assert state == "refused" and message.startswith("Not counted: received ") and "accepted until" in message
    assert late is None and seen["bo"]["kept"] == 1 and "bo" not in seen["gradebook"]
    assert seen["bo"]["deadline"]["now"]["state"] == "closed"

    [(state, message, late)] = seen["ann"]["attempts"]  # 30 min after her own deadline
    assert state == "graded" and late["penalty_percent"] == 10 and 1700 < late["late_by_seconds"] < 2000, late
    score, penalty = seen["gradebook"]["ann"]
    assert score > 0 and penalty == pytest.approx(0.1 * score)
    assert seen["ann"]["deadline"]["now"]["state"] == "late" and seen["ann"]["deadline"]["now"]["extension"]
    assert seen["ann"]["deadline"]["submission"]["penalty_percent"] == 10
