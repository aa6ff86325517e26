"""Under "best attempt counts", a later attempt that scores lower on the hidden checks but adds written
answers does not lose them: the best attempt's checks count, and the TA's graded copy carries the
written answers of the latest graded attempt.

A real run: the feedback-on-submit grader (``feedback_on_submit.service.Service``, its scan, queue,
engine and install) on a copy of the course, in a process of its own with a private sandbox worker,
two submissions handed into the student's inbound folder one after the other."""

from __future__ import annotations

import os

import pytest

from grader_helpers import run_grader_script

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a private sandbox worker needs root")]

ESSAY = "The weight token 5 gives token 10 when it mixes the values: 30 % of its output comes from token 10."

GRADER = """
import datetime as dt
import json
import shutil
from pathlib import Path

import nbformat

from attention_platform.feedback_on_submit.service import Service
from grader_helpers import drain
from grader_tests.self_attention.answers import ASSIGNMENT, BUGGY, CORRECT, release_notebook, with_answer

course, exchange = Path({course!r}), Path({exchange!r})
service = Service(course, exchange)
for folder in ("inbound", "feedback"):
    (service.exchange / folder / "ann").mkdir(parents=True)
service.engine.start()
service.scan()  # feedback on submit is on from now


def hand_in(answer: str, essay: str | None, tag: str) -> None:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    folder = service.exchange / "inbound" / "ann" / f"ann+{{ASSIGNMENT}}+{{stamp}}+{{tag}}"
    folder.mkdir()
    nbformat.write(with_answer(release_notebook(), answer), folder / f"{{ASSIGNMENT}}.ipynb")
    written = release_notebook(notebook="04_shapes_and_cost.ipynb")
    if essay is not None:
        for cell in written.cells:
            if cell.metadata.get("nbgrader", {{}}).get("grade_id") == "meaning_answer":
                cell.source = essay
    nbformat.write(written, folder / "04_shapes_and_cost.ipynb")
    (folder / "timestamp.txt").write_text(stamp)
"""

TWO_ATTEMPTS = GRADER + """
hand_in(CORRECT[0].code, None, "first")  # every check of the layer, no essay
drain(service, ASSIGNMENT)
hand_in(next(a for a in BUGGY if a.name == "no_scale").code, {essay!r}, "second")  # one check fails, an essay
drain(service, ASSIGNMENT)
rows = service.ledger.attempts(ASSIGNMENT, "ann")
autograded = course / "autograded" / "ann" / ASSIGNMENT
submitted = course / "submitted" / "ann" / ASSIGNMENT


def answer_in(path: Path, grade_id: str) -> str:
    nb = nbformat.read(path, as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {{}}).get("grade_id") == grade_id)


def outputs_of(path: Path, grade_id: str) -> str:
    nb = nbformat.read(path, as_version=4)
    outputs = next(c.outputs for c in nb.cells if c.metadata.get("nbgrader", {{}}).get("grade_id") == grade_id)
    return json.dumps(outputs, ensure_ascii=False)


status = json.loads((service.exchange / "feedback" / "ann" / f"feedback-on-submit-{{ASSIGNMENT}}.json").read_text())
print(json.dumps({{
    "attempts": [[r["state"], r["score"], r["counted"]] for r in rows],
    "graded_essay": answer_in(autograded / "04_shapes_and_cost.ipynb", "meaning_answer"),
    "submitted_essay": answer_in(submitted / "04_shapes_and_cost.ipynb", "meaning_answer"),
    "graded_scale_check": outputs_of(autograded / f"{{ASSIGNMENT}}.ipynb", "check_sqrt_d_scale"),
    "policy": status["policy"]["text"],
}}))
service.ledger.close()
service.engine.close()
"""


def _run_under_best(code: str, assignment: str) -> dict:
    """What the grader script ``code`` printed last, run with "best attempt counts" on ``assignment``."""
    return run_grader_script(code, {assignment: {"feedback": "checks", "counts": "best"}})


def test_a_later_lower_attempt_with_an_essay_keeps_the_best_score_and_gives_the_ta_the_essay(tmp_path, released_course):
    from grader_tests.self_attention.answers import ASSIGNMENT

    course, exchange = released_course(tmp_path / "course", ASSIGNMENT), tmp_path / "exchange"
    code = TWO_ATTEMPTS.format(course=str(course), exchange=str(exchange), essay=ESSAY)
    seen = _run_under_best(code, ASSIGNMENT)
    (first, first_score, first_counts), (second, second_score, second_counts) = seen["attempts"]
    assert first == second == "graded" and second_score < first_score, seen["attempts"]
    assert first_counts and not second_counts  # the best attempt counts for the checks' points ...
    assert "✓ Passed" in seen["graded_scale_check"]  # ... and its graded notebook is the one the TA sees
    assert seen["graded_essay"] == seen["submitted_essay"] == ESSAY  # with the essay the student last wrote
    assert "the course staff grade the written answers of your latest graded attempt" in seen["policy"]


REGRADE = GRADER + """
from nbgrader.api import Gradebook

NO_SCALE = next(a for a in BUGGY if a.name == "no_scale").code


def written_grade() -> dict:
    with Gradebook(service.engine.main.db_url) as gb:
        grade = gb.find_grade("meaning_answer", "04_shapes_and_cost", ASSIGNMENT, "ann")
        comment = gb.find_comment("meaning_answer", "04_shapes_and_cost", ASSIGNMENT, "ann")
        return {{"score": grade.manual_score, "flagged": grade.needs_manual_grade, "comment": comment.manual_comment}}


hand_in(CORRECT[0].code, {essay!r}, "first")
drain(service, ASSIGNMENT)
with Gradebook(service.engine.main.db_url) as gb:  # the TA grades the essay, as the formgrader saves it
    grade = gb.find_grade("meaning_answer", "04_shapes_and_cost", ASSIGNMENT, "ann")
    grade.manual_score, grade.needs_manual_grade = 0.5, False
    gb.find_comment("meaning_answer", "04_shapes_and_cost", ASSIGNMENT, "ann").manual_comment = {comment!r}
    gb.db.commit()
hand_in(NO_SCALE, {essay!r}, "same essay")  # scores lower: attempt 1 counts, with this same essay
drain(service, ASSIGNMENT)
unchanged = written_grade()
hand_in(NO_SCALE, {changed!r}, "new essay")  # scores lower: attempt 1 counts, with this new essay
drain(service, ASSIGNMENT)
print(json.dumps({{"counted": [r["counted"] for r in service.ledger.attempts(ASSIGNMENT, "ann")],
                   "unchanged": unchanged, "changed": written_grade()}}))
service.ledger.close()
service.engine.close()
"""


def test_a_grade_given_to_an_essay_the_swap_replaces_is_flagged_for_the_ta(tmp_path, released_course):
    from grader_tests.self_attention.answers import ASSIGNMENT

    course, exchange = released_course(tmp_path / "course", ASSIGNMENT), tmp_path / "exchange"
    comment = "Right direction: say which row sums to 1."
    code = REGRADE.format(course=str(course), exchange=str(exchange), essay=ESSAY, comment=comment,
                          changed=ESSAY + " Token 10 is later, so there is no causal mask.")
    seen = _run_under_best(code, ASSIGNMENT)
    assert seen["counted"] == [True, False, False], seen
    # the same essay came back: the TA's grade stands, nothing to do
    assert seen["unchanged"] == {"score": 0.5, "flagged": False, "comment": comment}, seen
    # a new essay: no grade for text the student no longer submitted, the formgrader lists the answer as
    # needing a grade, and the earlier grade and comment stay in its comment box for the TA
    changed = seen["changed"]
    assert changed["score"] is None and changed["flagged"], seen
    assert "0.5 of 1" in changed["comment"] and comment in changed["comment"], seen
