"""The batch grader's gradebook writes (attention_platform/grading/batch.py): steps grouped into
few transactions, each step taking back its own writes when it fails."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from attention_platform.course.directory import check_scores, nbgrader, write_submission
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK, with_answer
from attention_platform.grading.batch import Pipeline, autograde_batch, nesting_savepoints
from gradebooks import ANSWERS, scores_for

CLASS = {"ada": "reference_style", "bob": "reference_style", "cyd": "mask_after_softmax", "dan": "reference_style"}


@pytest.mark.parametrize("nesting, kept_after_outer_rollback", [(False, 1), (True, 0)])
def test_a_released_savepoint_is_undone_with_its_transaction_only_once_savepoints_nest(
        tmp_path, nesting, kept_after_outer_rollback):
    engine = create_engine(f"sqlite:///{tmp_path / 'gradebook.db'}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE grade (score INTEGER)")
    if nesting:
        nesting_savepoints(engine)
    with Session(engine) as session:
        session.execute(text("SELECT 1"))  # as the batch reads the gradebook before it writes
        step = session.begin_nested()
        session.execute(text("INSERT INTO grade VALUES (1)"))
        step.commit()
        session.rollback()
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM grade").scalar() == kept_after_outer_rollback
    engine.dispose()


def _auto_scores(course, student: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submitted = gb.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student)
        return {grade.name: grade.auto_score for grade in submitted.grades}


def _course_with(tmp_path_factory, released_course, name: str, notebooks: dict) -> Path:
    """A course of the core notebook alone, released, with ``notebooks`` ({student: release -> notebook}) submitted."""
    if os.geteuid() != 0:
        pytest.skip("the batch's own sandbox zygote needs root (CI is root)")
    course = released_course(tmp_path_factory.mktemp(name) / "course", ASSIGNMENT, notebooks=[NOTEBOOK])
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    for student, make in notebooks.items():
        write_submission(course, student, make(release), assignment=ASSIGNMENT, name=NOTEBOOK)
    return course


@pytest.fixture(scope="module")
def small_class(tmp_path_factory, released_course):
    return _course_with(tmp_path_factory, released_course, "batch", {
        student: (lambda release, code=ANSWERS[answer].code: with_answer(release, code))
        for student, answer in CLASS.items()})


@pytest.mark.slow
@pytest.mark.root
def test_a_step_that_fails_after_saving_grades_takes_back_those_grades_and_no_one_elses(small_class, monkeypatch):
    """bob's notebook fails after SaveAutoGrades wrote his scores, inside the transaction that also
    holds ada's, cyd's and dan's steps: his scores are taken back, theirs are all committed."""
    original = Pipeline.finish

    def finish_then_fail_for_bob(self, nb, resources, dest, notebook_id, after_save=None):
        graded = original(self, nb, resources, dest, notebook_id, after_save=after_save)
        if resources["nbgrader"]["student"] == "bob":
            raise OSError("the disk filled up after bob's grades were saved")
        return graded

    monkeypatch.setattr(Pipeline, "finish", finish_then_fail_for_bob)
    outcomes = {o.student: o for o in autograde_batch(small_class, ASSIGNMENT, jobs=1, progress=False, log=None)}
    assert outcomes["bob"].status.startswith("error: OSError")
    assert [s for s, o in outcomes.items() if o.status != "ok"] == ["bob"]
    assert set(_auto_scores(small_class, "bob").values()) == {None}, "bob's half-finished grading stayed"
    scores = check_scores(small_class, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    for student in ("ada", "cyd", "dan"):
        assert scores[student] == scores_for(CLASS[student]), student


START_UP_WATCHED = """
import gc, json
from attention_platform.cli import main
from attention_platform.grading import batch

collector_on_at_finish = []
finish = batch._BatchRun._finish


def watched(self, *args):
    collector_on_at_finish.append(gc.isenabled())
    finish(self, *args)


batch._BatchRun._finish = watched
status = main(["autograde-batch", {assignment!r}, "--course", {course!r}, "--no-progress", "--jobs", "1"])
print(json.dumps({{"status": status, "collector_on_at_finish": collector_on_at_finish,
                  "collector_on": gc.isenabled(), "frozen": gc.get_freeze_count()}}))
"""


@pytest.mark.slow
@pytest.mark.root
def test_the_batch_command_collects_no_garbage_until_its_first_notebook_is_finished(small_class):
    """``autograde-batch`` pauses the cyclic collector for its start-up (imports, configuration, the
    first notebook and its picture) and resumes it, start-up's objects frozen, once the first
    notebook is finished (attention_platform/start_up_gc.py)."""
    code = START_UP_WATCHED.format(assignment=ASSIGNMENT, course=str(small_class))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == 0
    assert seen["collector_on_at_finish"] == [False] + [True] * (len(CLASS) - 1)
    assert seen["collector_on"]
    assert seen["frozen"] > 100_000, "start-up's objects (torch, nbgrader, SQLAlchemy) were not frozen"


@pytest.fixture(scope="module")
def slow_class(tmp_path_factory, released_course):
    def sleeping(release):
        nb = with_answer(release, ANSWERS["reference_style"].code)
        nb.cells.append(nbformat.v4.new_code_cell(f"import time\ntime.sleep({SLEEP})"))
        return nb

    return _course_with(tmp_path_factory, released_course, "slow-batch", {
        "ada": lambda release: with_answer(release, ANSWERS["reference_style"].code), "zed": sleeping})


SLEEP = 8  # seconds zed's notebook sleeps in its sandbox


@pytest.mark.slow
@pytest.mark.root
def test_the_gradebook_is_not_held_while_the_batch_waits_for_a_sandbox(slow_class, monkeypatch):
    """Grades are committed a few steps at a time; while the batch waits for a sandbox (zed's notebook
    sleeps 8 s) nothing it wrote may stay uncommitted, or a TA saving a manual grade in the formgrader
    meanwhile would find the database locked. Here the step thresholds are out of reach, so only the
    wait itself can commit ada's grades."""
    from attention_platform.grading import batch

    monkeypatch.setattr(batch, "COMMIT_SECONDS", 3600.0)
    monkeypatch.setattr(batch, "COMMIT_EVERY", 10_000)
    grading = threading.Thread(target=autograde_batch, args=(slow_class, ASSIGNMENT),
                               kwargs=dict(jobs=1, progress=False, log=None))
    grading.start()
    try:
        ada = slow_class / "autograded" / "ada" / ASSIGNMENT / NOTEBOOK
        deadline = time.monotonic() + 120
        while not ada.exists():
            assert time.monotonic() < deadline, "ada was never graded"
            time.sleep(0.1)
        time.sleep(1)  # ada's grades saved, zed still asleep in the sandbox
        writer = sqlite3.connect(slow_class / "gradebook.db", timeout=1)
        try:
            writer.execute("BEGIN IMMEDIATE")  # what a formgrader's save needs
            writer.rollback()
        finally:
            writer.close()
        assert grading.is_alive(), "zed's notebook was meant to be still running"
    finally:
        grading.join(timeout=300)
    assert scores_for("reference_style") == check_scores(slow_class, assignment=ASSIGNMENT, notebook=NOTEBOOK)["ada"]


def test_one_metadata_validator_serves_every_cell_while_patched_and_the_real_class_comes_back():
    from nbgrader.nbgraderformat import MetadataValidator
    from nbgrader.preprocessors import checkcellmetadata, overwritecells

    from attention_platform.grading.batch import gradebook_patched

    with gradebook_patched(object()):
        shared = overwritecells.MetadataValidator()
        assert shared is overwritecells.MetadataValidator() is checkcellmetadata.MetadataValidator()
        assert isinstance(shared, MetadataValidator)
    assert overwritecells.MetadataValidator is checkcellmetadata.MetadataValidator is MetadataValidator


def _gradebook_rows(course) -> dict:
    """Every submission's grade scores and automatic comments, as the formgrader shows them."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        rows = {}
        for student in gb.students:
            submitted = gb.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student.id)
            rows[student.id] = ({grade.name: (grade.auto_score, grade.needs_manual_grade) for grade in submitted.grades},
                                {comment.name: comment.auto_comment for comment in submitted.comments})
        return rows


@pytest.mark.slow
@pytest.mark.root
def test_the_batch_writes_the_rows_nbgrader_autograde_writes(tmp_path_factory, released_course):
    """Scores and automatic comments ("No response." for an answer cell left as released) are the
    gradebook rows the batch writes through nbgrader's own steps, from rows it loads once per student."""
    course = _course_with(tmp_path_factory, released_course, "rows", {
        "ann": lambda release: with_answer(release, ANSWERS["mask_after_softmax"].code),
        "una": lambda release: release})  # handed in untouched
    twin = course.parent / "twin"
    shutil.copytree(course, twin)
    nbgrader(course, "autograde", ASSIGNMENT, "--force", check=True)
    outcomes = autograde_batch(twin, ASSIGNMENT, progress=False, log=None)
    expected = _gradebook_rows(course)
    assert "No response." in expected["una"][1].values() and "No response." not in expected["ann"][1].values()
    assert _gradebook_rows(twin) == expected
    # The summary's score per student is the gradebook's
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{twin / 'gradebook.db'}") as gb:
        saved = {o.student: (sub.score, sub.max_score)
                 for o in outcomes for sub in [gb.find_submission(ASSIGNMENT, o.student)]}
    assert {o.student: (o.score, o.max_score) for o in outcomes} == saved
    assert saved["ann"][0] < saved["ann"][1] and saved["una"][0] == 0


def _late_penalties(course) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {student: (notebook.score, notebook.late_submission_penalty)
                for student in ("ann", "bo", "cy")
                for notebook in [gb.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student)]}


@pytest.mark.slow
@pytest.mark.root
def test_late_penalties_are_nbgraders_computed_from_the_scores_just_saved(tmp_path_factory, released_course):
    """A course whose late work scores zero (nbgrader's ``penalty_method = "zero"``: the penalty is the
    notebook's score), graded, then graded again after two students swapped answers: the batch's late
    penalties are stock ``nbgrader autograde``'s both times, each computed from the score just saved.
    (nbgrader loads a notebook's score when first read, after its grades are written; ``_fresh`` only
    matters to a penalty plugin that reads a score twice in one batch.)"""
    answers = {"ann": "reference_style", "bo": "mask_after_softmax", "cy": "reference_style"}
    course = _course_with(tmp_path_factory, released_course, "late", {
        student: (lambda release, code=ANSWERS[answer].code: with_answer(release, code))
        for student, answer in answers.items()})
    with (course / "nbgrader_config.py").open("a") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    due = datetime.now(timezone.utc) - timedelta(days=1)
    nbgrader(course, "db", "assignment", "add", ASSIGNMENT, "--duedate", due.strftime("%Y-%m-%d %H:%M:%S UTC"),
             check=True)
    twin = course.parent / "twin"
    shutil.copytree(course, twin)
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    for round_ in (1, 2):
        if round_ == 2:  # ann and bo swap answers: both scores change
            answers.update(ann="mask_after_softmax", bo="reference_style")
            for where in (course, twin):
                for student in ("ann", "bo"):
                    write_submission(where, student, with_answer(release, ANSWERS[answers[student]].code),
                                     assignment=ASSIGNMENT, name=NOTEBOOK)
        nbgrader(course, "autograde", ASSIGNMENT, "--force", check=True)
        autograde_batch(twin, ASSIGNMENT, jobs=1, progress=False, log=None)
        expected = _late_penalties(course)
        assert all(score > 0 and penalty == score for score, penalty in expected.values()), (round_, expected)
        assert _late_penalties(twin) == expected, round_
    assert expected["ann"][0] < expected["bo"][0], expected  # the answers did swap


def _with_lone_surrogate(release: dict) -> str:
    """The released notebook with an unpaired UTF-16 surrogate in a cell: valid JSON (escaped), no valid text."""
    cell = next(c for c in release["cells"] if c["cell_type"] == "code")
    cell["source"] = "".join(cell["source"]) + "\n# \ud800"
    return json.dumps(release)


@pytest.mark.parametrize("content, status", [
    (lambda release: '{"cells": [', "not JSON at line 1, column 12"),
    (lambda release: "", "not JSON at line 1, column 1"),
    (_with_lone_surrogate, "text that is not valid Unicode"),
    (lambda release: "[1, 2]", "not a notebook: AttributeError"),
    # an amplification bomb: 3 bytes per object, each a dict once parsed, refused before it is parsed
    (lambda release: '{"cells": [], "metadata": {"x": [' + "{}," * 99_999 + '{}]}, "nbformat": 4, "nbformat_minor": 5}',
     "too large or complex to grade (the notebook holds 100,004 objects and lists, more than the 50,000 allowed)"),
])
@pytest.mark.root
def test_a_submission_that_is_no_notebook_is_rejected_saying_why(small_class, tmp_path, content, status):
    """The grade table and the feedback on submit say what is wrong with the file (the batch goes on; the
    file is kept)."""
    from attention_platform.grading.batch import unreadable

    pipeline = Pipeline(small_class)
    path = tmp_path / "submitted.ipynb"
    path.write_text(content(json.loads((small_class / "release" / ASSIGNMENT / NOTEBOOK).read_text())))
    with pytest.raises(Exception) as raised:
        pipeline.read(path, pipeline.resources("ann", ASSIGNMENT, NOTEBOOK.removesuffix(".ipynb"), tmp_path))
    assert unreadable(raised.value) == status


FEEDBACK_ON_SUBMIT_WRITING = """
import datetime as dt, sys, time
from pathlib import Path
from nbgrader.api import Gradebook
from attention_platform.attempts.ledger import Ledger

course, assignment = Path(sys.argv[1]), sys.argv[2]
url = f"sqlite:///{course / 'gradebook.db'}"
ledger, written, failures = Ledger(url, remember=False), 0, []
print("writing", flush=True)
while not (course / "stop-writing").exists():
    try:
        at = dt.datetime.now(dt.timezone.utc)
        attempt = ledger.add(assignment=assignment, student="eve", submission=f"eve+{assignment}+{written}",
                             received_at=at, state="queued", feedback="full")
        ledger.set(attempt, state="grading")
        with Gradebook(url) as gb:  # the definition looked at, as ensure_definition does
            gb.find_assignment(assignment).notebooks
        ledger.set(attempt, state="graded", graded_at=at, score=1.0)
        ledger.attempts(assignment)
        written += 1
    except Exception as exc:
        failures.append(f"{type(exc).__name__}: {exc}"[:200])
print(written, len(failures), failures[:3], flush=True)
"""


@pytest.mark.slow
@pytest.mark.root
def test_the_batch_grades_everyone_while_feedback_on_submit_writes_the_gradebook(small_class):
    """Feedback on submit writes its attempts into the course's gradebook (a real Ledger and
    Gradebook in another process, in a loop) while a TA's batch grades the class: every student is
    graded and saved, and the other writer's writes all go through."""
    writer = subprocess.Popen([sys.executable, "-c", FEEDBACK_ON_SUBMIT_WRITING, str(small_class), ASSIGNMENT],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing", writer.stderr.read()[-2000:]
        outcomes = {o.student: o for o in autograde_batch(small_class, ASSIGNMENT, jobs=2, progress=False, log=None)}
    finally:
        (small_class / "stop-writing").touch()
        out, err = writer.communicate(timeout=120)
        (small_class / "stop-writing").unlink()
    written, failed, failures = out.strip().splitlines()[-1].split(" ", 2)
    assert {s: o.status for s, o in outcomes.items()} == dict.fromkeys(CLASS, "ok")
    scores = check_scores(small_class, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    for student, answer in CLASS.items():
        assert scores[student] == scores_for(answer), student
    assert int(written) > 0 and failed == "0", failures


@pytest.mark.slow
@pytest.mark.root
def test_a_transaction_the_database_refuses_fails_its_students_with_the_reason_and_the_batch_goes_on(
        small_class, monkeypatch):
    """Just after bob's grades are saved, a reader holds the gradebook for longer than the batch waits,
    so committing bob's step is refused ("database is locked"): bob, and whoever else's step the
    database refuses meanwhile, is reported not saved, saying why; everyone else's grades are kept, the
    batch finishes, and the next batch grades the ones not saved."""
    from attention_platform.grading import batch

    monkeypatch.setattr(batch, "BUSY_SECONDS", 1, raising=False)
    monkeypatch.setattr(batch, "COMMIT_EVERY", 1)
    original = Pipeline.finish
    releases = []

    def finish_then_hold_the_database(self, nb, resources, dest, notebook_id, after_save=None):
        graded = original(self, nb, resources, dest, notebook_id, after_save=after_save)
        if resources["nbgrader"]["student"] == "bob":
            reader = sqlite3.connect(small_class / "gradebook.db", check_same_thread=False)
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM grade").fetchall()  # a shared lock until it rolls back
            release = threading.Timer(7, lambda: (reader.rollback(), reader.close()))
            release.start()
            releases.append(release)
        return graded

    monkeypatch.setattr(Pipeline, "finish", finish_then_hold_the_database)
    outcomes = {o.student: o for o in autograde_batch(small_class, ASSIGNMENT, jobs=1, progress=False, log=None)}
    not_saved = {s for s, o in outcomes.items() if o.status != "ok"}
    assert "bob" in not_saved
    assert {outcomes[s].status for s in not_saved} == {"error: not saved: database is locked"}
    scores = check_scores(small_class, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    for student in set(CLASS) - not_saved:
        assert scores[student] == scores_for(CLASS[student]), student
    assert releases
    for release in releases:  # the reader lets the gradebook go
        release.join()
    monkeypatch.setattr(Pipeline, "finish", original)
    again = {o.student: o.status for o in autograde_batch(small_class, ASSIGNMENT, jobs=1, progress=False, log=None)}
    assert again == dict.fromkeys(CLASS, "ok")
    scores = check_scores(small_class, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    for student, answer in CLASS.items():
        assert scores[student] == scores_for(answer), student
