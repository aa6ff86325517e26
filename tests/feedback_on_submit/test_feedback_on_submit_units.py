"""Feedback on submit, the parts that need no hub: the instructor's policy and its rule, the fair
queue, taking a submission out of an inbound folder, the student's status file and the refusal
their submit gives (the Assignments tab's and a terminal's), when pages are made and what happens
when their process dies."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import nbformat
import pytest

from attention_platform.attempts import status as status_file
from attention_platform.feedback_on_submit.fairqueue import FairQueue
from attention_platform.feedback_on_submit.intake import IntakeError, collector, take
from attention_platform.attempts.policy import FeedbackOnSubmit, Policy, PolicyError, iso, parse
from attention_platform.feedback_on_submit.service import FINISH_WAIT_SECONDS, may_finish
from attention_platform.attempts.refusal import refused_submit, submit_refusal
from attention_platform.lab.feedback_on_submit import attempt_page
from grader_helpers import refused_saying

UTC = dt.timezone.utc
T0 = dt.datetime(2030, 5, 6, 12, 0, tzinfo=UTC)


def minutes(n: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=n)


# --------------------------------------------------------------------------- the policy

def test_an_assignment_not_listed_gets_no_feedback_on_submit():
    policy = FeedbackOnSubmit(config=None).policy_for("self_attention")
    assert not policy.on and policy.counts == "collected"
    assert "No feedback on submit" in policy.describe()


@pytest.mark.parametrize("raw, says", [
    ({"feedback": "everything"}, "'feedback' must be one of off, checks, full, not 'everything'"),
    ({"feedback": "full", "counts": "first"}, "'counts' must be one of last, best, collected"),
    ({"feedback": "full", "attempts": "three"}, "'attempts' must be a whole number or null, not 'three'"),
    ({"feedback": "full", "attempts": 0}, "'attempts' must be at least 1"),
    ({"feedback": "full", "attempts": 2.5}, "'attempts' must be a whole number"),
    ({"feedback": "full", "cooldown_minutes": -5}, "'cooldown_minutes' must be at least 0"),
    ({"feedback": "full", "window_hours": float("inf")}, "'window_hours' must be at least"),
    ({"feedback": "full", "attempt": 3}, "unknown setting 'attempt'"),
    ("full", "must be a dict"),
])
def test_a_broken_policy_says_what_to_change(raw, says):
    refused_saying(parse, PolicyError, raw, says)


def test_policies_come_from_the_environment_and_broken_json_is_refused_naming_it(monkeypatch):
    from attention_platform.settings import SettingsError

    monkeypatch.setenv("ATTENTION_FEEDBACK_ON_SUBMIT", json.dumps({"self_attention": {"feedback": "checks"}}))
    assert FeedbackOnSubmit().policy_for("self_attention").feedback == "checks"
    monkeypatch.setenv("ATTENTION_FEEDBACK_ON_SUBMIT", "{not json")
    with pytest.raises(SettingsError, match="ATTENTION_FEEDBACK_ON_SUBMIT='{not json': expected a JSON object"):
        FeedbackOnSubmit().policy_for("self_attention")


# --------------------------------------------------------------------------- the policy saved in the formgrader's form

def course_with_config(tmp_path, policies: dict):
    (tmp_path / "nbgrader_config.py").write_text(f"c = get_config()\nc.FeedbackOnSubmit.policies = {policies!r}\n")
    return tmp_path


def policy_in_force(course, assignment: str) -> Policy:
    from attention_platform.attempts.policy import load_config

    return FeedbackOnSubmit(config=load_config(course)).policy_for(assignment)


def test_a_policy_saved_in_the_form_wins_over_nbgrader_config_for_its_assignment_only(tmp_path):
    from attention_platform.attempts import policy_store
    from attention_platform.formgrader.policy_form import from_form

    course = course_with_config(tmp_path, {"self_attention": {"feedback": "checks", "attempts": 3},
                                           "multi_head_attention": {"feedback": "full"}})
    form = {"feedback": "full", "attempts": "2", "window_hours": "12", "cooldown_minutes": "0.5", "counts": "best"}
    saved = policy_store.save(course, "self_attention", from_form(form))
    assert saved == Policy("self_attention", feedback="full", attempts=2, window_hours=12, cooldown_minutes=0.5,
                           counts="best")
    assert policy_in_force(course, "self_attention") == saved  # what the grader and the formgrader read
    assert policy_in_force(course, "multi_head_attention").feedback == "full"  # the configuration's, untouched
    assert stat.S_IMODE(os.stat(policy_store.path(course)).st_mode) == 0o640
    # "no limit" in the form is an empty field
    policy_store.save(course, "self_attention", from_form({**form, "attempts": ""}))
    assert policy_in_force(course, "self_attention").attempts is None
    # the TA's collect leaves the counting attempt alone under the saved "best" (the configuration says
    # nothing of what counts, which would let collect pick)
    from nbgrader.coursedir import CourseDirectory

    from attention_platform.attempts.ledger import Ledger
    from attention_platform.exchange.exchange import counted_attempts

    coursedir = CourseDirectory(root=str(course), db_url=f"sqlite:///{course / 'gradebook.db'}")
    ledger = Ledger(coursedir.db_url)
    counted = ledger.add(assignment="self_attention", student="student1", submission="s1", received_at=T0,
                         state="graded", feedback="full")
    ledger.set_counted("self_attention", "student1", counted)
    ledger.close()
    assert counted_attempts(load_course_config(course), coursedir, "self_attention") == {"student1": ("best", T0)}
    policy_store.forget(course, "self_attention")
    assert policy_in_force(course, "self_attention") == Policy("self_attention", feedback="checks", attempts=3)
    assert counted_attempts(load_course_config(course), coursedir, "self_attention") == {}


def load_course_config(course):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


@pytest.mark.parametrize("field, value, says", [
    ("attempts", "0", "'attempts' must be at least 1, not 0"),
    ("attempts", "three", "'attempts' must be a whole number or null, not 'three'"),
    ("window_hours", "", "'window_hours' must be a number, not ''"),
    ("cooldown_minutes", "nan", "'cooldown_minutes' must be at least 0, not nan"),
    ("counts", "first", "'counts' must be one of last, best, collected, not 'first'"),
])
def test_a_form_the_grader_could_not_use_says_what_to_change_and_saves_nothing(tmp_path, field, value, says):
    from attention_platform.attempts import policy_store
    from attention_platform.formgrader.policy_form import from_form

    course = course_with_config(tmp_path, {"self_attention": {"feedback": "checks"}})
    form = {"feedback": "full", "attempts": "2", "window_hours": "24", "cooldown_minutes": "0", "counts": "best"}
    policy_store.save(course, "self_attention", from_form(form))
    before = policy_store.path(course).read_bytes()
    with pytest.raises(PolicyError) as caught:
        policy_store.save(course, "self_attention", from_form({**form, field: value}))
    assert says in str(caught.value), str(caught.value)
    assert policy_store.path(course).read_bytes() == before
    assert [p.name for p in course.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_the_saved_policies_are_not_read_through_a_link_nor_when_oversized(tmp_path):
    from attention_platform.attempts import policy_store

    (tmp_path / "course").mkdir()
    course = course_with_config(tmp_path / "course", {})
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"self_attention": {"feedback": "full"}}))
    policy_store.path(course).symlink_to(elsewhere)
    with pytest.raises(PolicyError, match="cannot be read"):
        policy_in_force(course, "self_attention")
    policy_store.path(course).unlink()
    policy_store.path(course).write_text(" " * (policy_store.MAX_BYTES + 1))
    with pytest.raises(PolicyError, match="larger than 64 kB"):
        policy_in_force(course, "self_attention")
    policy_store.path(course).write_text("[1, 2]")
    with pytest.raises(PolicyError, match="one policy per assignment id, not a list"):
        policy_in_force(course, "self_attention")
    # an entry edited by hand into something unusable is reported as a configuration's mistake is
    policy_store.path(course).write_text(json.dumps({"self_attention": {"feedback": "all"}}))
    with pytest.raises(PolicyError, match="'feedback' must be one of off, checks, full, not 'all'"):
        policy_in_force(course, "self_attention")


def test_n_attempts_per_window_and_when_the_next_is_possible():
    policy = Policy("a", feedback="checks", attempts=3, window_hours=24)
    graded = [minutes(0), minutes(10), minutes(20)]
    assert policy.next_allowed(graded[:2], minutes(21)) is None
    assert policy.next_allowed(graded, minutes(30)) == minutes(0) + dt.timedelta(hours=24)
    # the window rolls: once the oldest has left it, one more is possible
    assert policy.next_allowed(graded, minutes(24 * 60 + 1)) is None
    message = policy.refusal(graded, minutes(30), policy.next_allowed(graded, minutes(30)))
    assert "3 graded attempts in the last 24 hours" in message and "2030-05-07 12:00 UTC" in message
    assert "23 h 30 min" in message


def test_cooldown_between_graded_attempts():
    policy = Policy("a", feedback="full", cooldown_minutes=15)
    assert policy.next_allowed([minutes(0)], minutes(14)) == minutes(15)
    assert policy.next_allowed([minutes(0)], minutes(15)) is None
    assert "at least 15 minutes apart" in policy.refusal([minutes(0)], minutes(5), minutes(15))
    assert "10 minutes" in policy.refusal([minutes(0)], minutes(5), minutes(15))


def test_both_limits_the_later_time_wins():
    policy = Policy("a", feedback="full", attempts=2, window_hours=1, cooldown_minutes=45)
    assert policy.next_allowed([minutes(0), minutes(50)], minutes(55)) == minutes(95)  # cool-down after 50
    assert policy.next_allowed([minutes(0), minutes(10)], minutes(20)) == minutes(60)  # window: 0 + 60 > 10 + 45


def test_policy_round_trips_through_the_status_file():
    policy = parse("self_attention", {"feedback": "checks", "attempts": 4, "window_hours": 12, "counts": "best"})
    assert Policy.from_json(json.loads(json.dumps(policy.to_json()))) == policy


# --------------------------------------------------------------------------- the queue

def test_a_burst_drains_in_order_and_a_flood_gets_one_turn_per_round():
    queue = FairQueue()
    for i in range(50):
        queue.put("flood", f"flood-{i}")
    for student in ("ann", "bob", "cy"):
        queue.put(student, f"{student}-1")
    order = []
    while len(queue):
        student, item = queue.take()
        order.append(item)
        queue.done(student)
    assert order[:4] == ["flood-0", "ann-1", "bob-1", "cy-1"]  # the others waited one attempt, not fifty
    assert order[4:] == [f"flood-{i}" for i in range(1, 50)]  # and nothing was lost or reordered


def test_one_attempt_per_student_in_grading():
    queue = FairQueue()
    queue.put("ann", 1)
    queue.put("ann", 2)
    queue.put("bob", 1)
    assert queue.take() == ("ann", 1)
    assert queue.take() == ("bob", 1)
    assert queue.take() is None  # ann's second waits for her first
    assert queue.position("ann") == 0
    queue.done("ann")
    assert queue.take() == ("ann", 2)


def test_an_attempt_that_could_not_reach_the_grader_goes_first_again():
    queue = FairQueue()
    queue.put("ann", 1)
    queue.put("ann", 2)
    student, item = queue.take()
    queue.done(student)
    queue.retry(student, item)
    assert queue.take() == ("ann", 1)


# --------------------------------------------------------------------------- intake

def _submission(inbound, name="ann+a+2030-05-06 12:00:00.000000 UTC+xyz"):
    folder = inbound / "ann" / name
    (folder / "data").mkdir(parents=True)
    (folder / "a.ipynb").write_text("{}")
    (folder / "data" / "x.txt").write_text("x")
    (folder / "timestamp.txt").write_text("2030-05-06 12:00:00.000000 UTC")
    (folder / "submission_secret.txt").write_text("s" * 128)
    return folder


def _take(tmp_path, folder, **limits):
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.course_id = "course"
    for key, value in limits.items():
        setattr(config.ExchangeLimits, key, value)
    fd = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return take(collector(config), fd, "ann", folder.name, tmp_path / "copy")
    finally:
        os.close(fd)


def test_intake_is_the_tas_collect_regular_files_only_nothing_followed(tmp_path):
    folder = _submission(tmp_path / "inbound")
    secret = tmp_path / "grader-secret.txt"
    secret.write_text("hidden")
    os.symlink(secret, folder / "link.txt")
    os.mkfifo(folder / "pipe")
    os.symlink(tmp_path, folder / "escape")
    got = _take(tmp_path, folder)
    files = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*"))
    assert files == ["a.ipynb", "data", "data/x.txt", "submission_secret.txt"]  # collect writes timestamp.txt
    assert any("link.txt" in note and "symbolic link" in note for note in got.notes), got.notes
    assert any("pipe" in note and "named pipe" in note for note in got.notes), got.notes
    assert got.secret == "s" * 128 and got.claim.startswith("2030-05-06")


def test_intake_takes_the_kernels_time_not_the_students(tmp_path):
    folder = _submission(tmp_path / "inbound")
    os.utime(folder / "a.ipynb", (0, 0))  # mtime can be set by anyone; ctime cannot
    got = _take(tmp_path, folder)
    assert abs((got.received - dt.datetime.now(UTC)).total_seconds()) < 30
    assert got.timestamp == got.received  # a claim years away is replaced by the kernel's time
    shutil.rmtree(tmp_path / "copy")
    claimed = (got.received - dt.timedelta(seconds=2)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    (folder / "timestamp.txt").write_text(claimed)  # what an honest submit wrote a moment before
    got = _take(tmp_path, folder)
    assert got.timestamp.strftime("%Y-%m-%d %H:%M:%S.%f UTC") == claimed


def test_intake_keeps_within_the_courses_limits_and_says_what_it_left(tmp_path):
    folder = _submission(tmp_path / "inbound")
    (folder / "big.bin").write_bytes(b"0" * 2000)
    got = _take(tmp_path, folder, max_file_bytes=1000)
    assert not (tmp_path / "copy" / "big.bin").exists() and (tmp_path / "copy" / "a.ipynb").exists()
    assert any("big.bin" in note and "larger than" in note for note in got.notes), got.notes
    os.symlink(tmp_path, folder.parent / "ann+a+x+link")
    with pytest.raises(IntakeError, match="no longer a folder"):
        _take(tmp_path, folder.parent / "ann+a+x+link")


# --------------------------------------------------------------------------- status and the student's submit

def _status(policy: Policy, attempts: list[dict], since=None) -> dict:
    since = since or dt.datetime.now(UTC) - dt.timedelta(days=1)
    return {"assignment": policy.assignment, "policy": policy.to_json(), "enabled_since": iso(since),
            "attempts": attempts}


def _write(folder, assignment, status):
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        status_file.write(fd, assignment, status)
    finally:
        os.close(fd)


def test_status_is_replaced_whole_and_readable_by_the_students_group(tmp_path):
    _write(tmp_path / "fb", "a", _status(Policy("a", feedback="checks"), []))
    path = tmp_path / "fb" / status_file.filename("a")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert status_file.read(str(tmp_path / "fb"), "a")["policy"]["feedback"] == "checks"
    assert [p.name for p in (tmp_path / "fb").iterdir()] == [path.name]  # no temporary file left
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="unknown format"):
        status_file.read(str(tmp_path / "fb"), "a")


def _refusal(tmp_path, policy, attempts, student="ann"):
    root = tmp_path / "view"
    _write(root / "course" / "feedback", "a", _status(policy, attempts))
    inbound = root / "course" / "inbound"
    inbound.mkdir(parents=True, exist_ok=True)
    return submit_refusal(str(root), "course", "a", str(inbound), student)


def _graded(when: dt.datetime, name: str) -> dict:
    return {"submission": name, "state": "graded", "received": iso(when)}


def test_the_submit_is_refused_when_only_graded_attempts_count_and_none_is_left(tmp_path):
    recent = dt.datetime.now(UTC) - dt.timedelta(minutes=5)
    policy = Policy("a", feedback="checks", attempts=2, counts="best")
    said = _refusal(tmp_path, policy, [_graded(recent - dt.timedelta(minutes=1), "s1"), _graded(recent, "s2")])
    assert said.startswith("Not submitted: you have had 2 graded attempts in the last 24 hours")
    assert "Your next graded attempt is possible at" in said and "nothing was handed in" in said


def test_the_refusal_gives_its_reason_and_next_time_apart_for_the_labs_dialog(tmp_path):
    recent = dt.datetime.now(UTC) - dt.timedelta(minutes=5)
    policy = Policy("a", feedback="checks", attempts=1, cooldown_minutes=0, counts="last")
    _write(tmp_path / "view" / "course" / "feedback", "a", _status(policy, [_graded(recent, "s1")]))
    (tmp_path / "view" / "course" / "inbound").mkdir(parents=True, exist_ok=True)
    refused = refused_submit(str(tmp_path / "view"), "course", "a", str(tmp_path / "view" / "course" / "inbound"), "ann")
    said = refused.to_json()
    assert said["reason"] == "You have had 1 graded attempt in the last 24 hours, the most this assignment allows."
    assert said["next_graded_attempt"] == iso(recent + dt.timedelta(hours=24)) and said["handed_in"] is False
    assert refused.sentence == _refusal(tmp_path, policy, [_graded(recent, "s1")])  # the terminal's, in UTC


def test_the_students_own_submissions_the_grader_has_not_seen_yet_count(tmp_path):
    policy = Policy("a", feedback="checks", attempts=1, counts="last")
    assert _refusal(tmp_path, policy, []) is None
    (tmp_path / "view" / "course" / "inbound" / "ann+a+2030+xyz").mkdir()
    assert "1 graded attempt in the last 24 hours" in _refusal(tmp_path, policy, [])


def test_under_collected_a_submission_past_the_limit_is_still_handed_in(tmp_path):
    recent = dt.datetime.now(UTC) - dt.timedelta(minutes=5)
    policy = Policy("a", feedback="checks", attempts=1, counts="collected")
    assert _refusal(tmp_path, policy, [_graded(recent, "s1")]) is None  # the grader records it as not graded


def test_no_status_or_a_broken_one_never_blocks_a_submit(tmp_path):
    assert submit_refusal(str(tmp_path), "course", "a", str(tmp_path), "ann") is None
    (tmp_path / "course" / "feedback").mkdir(parents=True)
    (tmp_path / "course" / "feedback" / status_file.filename("a")).write_text("garbage")
    assert submit_refusal(str(tmp_path), "course", "a", str(tmp_path), "ann") is None


# --------------------------------------------------------------------------- the attempts export

def test_the_attempts_export_lists_every_attempt_with_its_times_and_the_one_that_counts(tmp_path, capsys):
    import csv
    import io

    from attention_platform.cli import main
    from attention_platform.attempts.ledger import Ledger

    (tmp_path / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\n")  # a course: attempts reads its gradebook
    ledger = Ledger(f"sqlite:///{tmp_path / 'gradebook.db'}")
    t0 = dt.datetime(2030, 5, 6, 12, 0, 0, tzinfo=UTC)
    first = ledger.add(assignment="a", student="ann", submission="ann+a+1", claimed="", received_at=t0,
                       timestamp=t0, state="graded", feedback="full", message="")
    ledger.set(first, score=3.0, max_score=5.0, graded_at=t0 + dt.timedelta(seconds=2), seconds=1.5)
    ledger.add(assignment="a", student="ann", submission="ann+a+2", claimed="", received_at=t0 + dt.timedelta(minutes=1),
               state="refused", feedback="full", message="Not graded: too soon.")
    ledger.add(assignment="b", student="bob", submission="bob+b+1", claimed="", received_at=t0, state="queued",
               feedback="checks", message="")
    ledger.set_counted("a", "ann", first)
    ledger.close()
    assert main(["attempts", "--course", str(tmp_path), "--assignment", "a"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["student"], r["attempt"], r["state"], r["counted"]) for r in rows] == \
        [("ann", "1", "graded", "1"), ("ann", "2", "refused", "0")]
    assert rows[0]["received_at"] == "2030-05-06 12:00:00.000000" and rows[0]["score"] == "3.0"
    assert rows[0]["graded_at"] == "2030-05-06 12:00:02.000000" and rows[1]["message"] == "Not graded: too soon."


@pytest.mark.parametrize("grading, finishing, waited, expected", [
    (0, 0, 0.0, True),  # nothing graded now: pages and archive go ahead
    (0, 2, 0.0, True),
    (1, 0, 0.0, False),  # a student waits for a result: their grading keeps the cores
    (2, 0, FINISH_WAIT_SECONDS - 1, False),
    (2, 0, FINISH_WAIT_SECONDS, True),  # a steady stream cannot hold pages back for ever ...
    (2, 1, FINISH_WAIT_SECONDS * 10, False),  # ... one at a time
])
def test_feedback_pages_wait_while_a_result_is_being_graded(grading, finishing, waited, expected):
    assert may_finish(grading=grading, finishing=finishing, oldest_waited=waited) is expected


@pytest.mark.slow
def test_a_pages_process_that_dies_costs_one_page_and_a_new_process_makes_the_next(tmp_path):
    """The pages' worker process dies (as nbconvert crashing on a hostile notebook would take it):
    the attempt whose page it was making gets a note instead of a page, and the next attempt's page
    comes from a fresh worker, started with the same engine."""
    import logging
    from types import SimpleNamespace

    from attention_platform.course.directory import copy_course
    from attention_platform.feedback_on_submit.pages import PageMaker, _ready

    course = copy_course(tmp_path / "course")
    maker = PageMaker(SimpleNamespace(course=course, work=tmp_path / "work", exchange_feedback=None),
                      logging.getLogger("test-pages"))
    try:
        assert maker.pool.submit(_ready).result(timeout=120) is True
        first = maker.pool
        first.submit(os._exit, 3)  # the worker goes
        result = SimpleNamespace(pages={}, notes=[])
        maker.make(SimpleNamespace(id="attempt-1"), result)
        assert result.pages == {}
        assert result.notes == ["the feedback page could not be made; your results above are complete"]
        assert maker.pool is not first
        assert maker.pool.submit(_ready).result(timeout=120) is True  # the new worker started its engine
    finally:
        maker.close()


@pytest.mark.slow
def test_pages_that_fail_in_the_worker_cost_that_attempt_its_page_only(tmp_path):
    """Making an attempt's pages raises in the worker (a bug, a file it cannot read): the attempt gets
    a note instead of its page, so that it is still archived and counted, and the same worker makes
    the next attempt's page."""
    import logging
    from types import SimpleNamespace

    from attention_platform.course.directory import copy_course
    from attention_platform.feedback_on_submit.pages import PageMaker, _ready

    course = copy_course(tmp_path / "course")
    maker = PageMaker(SimpleNamespace(course=course, work=tmp_path / "work", exchange_feedback=None),
                      logging.getLogger("test-pages"))
    try:
        worker = maker.pool
        result = SimpleNamespace(pages={}, notes=[])
        maker.make(SimpleNamespace(id="attempt-1"), result)  # no student, no assignment: the engine raises
        assert result.pages == {}
        assert result.notes == ["the feedback page could not be made; your results above are complete"]
        assert maker.pool is worker and maker.pool.submit(_ready).result(timeout=120) is True
    finally:
        maker.close()


@pytest.mark.slow
def test_nbgrader_submit_in_a_terminal_is_refused_as_the_assignments_tab_is(tmp_path):
    """The Assignments tab asks for the refusal before it submits; a student typing ``nbgrader submit``
    in a terminal reaches the exchange directly, and the exchange's submit gives the same answer:
    nothing handed in, the reason and the next possible time said."""
    import subprocess

    from fault_helpers import ASSIGNMENT, COURSE, make_exchange

    exchange = make_exchange(tmp_path, ["ann"])
    recent = dt.datetime.now(UTC) - dt.timedelta(minutes=5)
    policy = Policy(ASSIGNMENT, feedback="checks", attempts=1, counts="last")
    _write(exchange.course / "feedback" / "ann", ASSIGNMENT, _status(policy, [_graded(recent, "s1")]))
    done = subprocess.run(["nbgrader", "submit", ASSIGNMENT, "--course", COURSE], cwd=exchange.home("ann"),
                          env=exchange.student_env("ann"), capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "Not submitted: you have had 1 graded attempt in the last 24 hours" in done.stderr, done.stderr[-2000:]
    assert "nothing was handed in" in done.stderr
    assert exchange.submissions("ann") == []


# --------------------------------------------------------------------------- the grader's start-up

SERVICE_WATCHED = """
import gc, json, os, signal, sys, threading
from pathlib import Path
from attention_platform.feedback_on_submit import engine, service

collector_on = {{}}
warm = engine.Engine.warm


def watched(self, assignments):
    collector_on["warming"] = gc.isenabled()
    try:
        warm(self, assignments)
    finally:
        threading.Timer(0.1, lambda: (collector_on.setdefault("serving", gc.isenabled()),
                                      os.kill(os.getpid(), signal.SIGTERM))).start()


engine.Engine.warm = watched
status = service.main(Path({course!r}), Path({exchange!r}))
print(json.dumps({{"status": status, **collector_on, "frozen": gc.get_freeze_count()}}))
"""


@pytest.mark.slow  # the grader's whole warm-up (torch, the checks, a first picture) in a process of its own
def test_the_grader_warms_up_without_collections_and_serves_with_its_start_up_frozen(tmp_path):
    """The feedback-on-submit grader pauses the cyclic collector until it is warm (torch, the
    checks, the first picture), then freezes what that made (attention_platform/start_up_gc.py):
    a full collection walking it would otherwise cost some attempt ~0.1 s every few dozen."""
    from attention_platform.course.directory import copy_course

    course, exchange = copy_course(tmp_path / "course"), tmp_path / "exchange"
    exchange.mkdir()
    code = SERVICE_WATCHED.format(course=str(course), exchange=str(exchange))
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}  # nbgrader runs alembic
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (seen["status"], seen["warming"], seen["serving"]) == (0, False, True), done.stderr[-2000:]
    assert seen["frozen"] > 100_000


def grader_log(course, exchange, stop_after: str) -> list[tuple[dt.datetime, str]]:
    """The feedback-on-submit grader's log lines (their times, their text) from its start until it
    exits, told to stop (SIGTERM, as the launchers stop it) as soon as it logged ``stop_after``."""
    import signal
    import threading

    code = (f"from pathlib import Path\nfrom attention_platform.feedback_on_submit import service\n"
            f"raise SystemExit(service.main(Path({str(course)!r}), Path({str(exchange)!r})))")
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}  # nbgrader runs alembic
    grader = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(300, grader.kill)
    watchdog.start()
    logged = []
    try:
        for line in grader.stderr:
            logged.append(line)
            if stop_after in line:
                grader.send_signal(signal.SIGTERM)
        assert grader.wait() == 0, "".join(logged)
    finally:
        watchdog.cancel()
        grader.kill()
    return [(dt.datetime.strptime(line[3:26], "%Y-%m-%d %H:%M:%S,%f"), line) for line in logged
            if line.startswith("[I ")]


@pytest.mark.slow  # two starts of the grader, one with its whole warm-up
def test_the_grader_told_to_stop_while_it_warms_up_stops_without_finishing_the_warm_up(tmp_path):
    """SIGTERM right after the grader starts: it gives up its warm-up (torch, the checks' pictures,
    a sandbox worker, its feedback pages' process) rather than finish it first, and stops cleanly,
    in less time than the warm-up it skipped takes."""
    from attention_platform.course.directory import copy_course

    course, exchange = copy_course(tmp_path / "course"), tmp_path / "exchange"
    exchange.mkdir()

    def seconds_between(log, first: str, then: str) -> float:
        times = {text: next(at for at, line in log if text in line) for text in (first, then)}
        return (times[then] - times[first]).total_seconds()

    whole = grader_log(course, exchange, stop_after="watching")
    warm_up = seconds_between(whole, "warming up", "warmed up")
    stopped = grader_log(course, exchange, stop_after="warming up")
    said = "".join(line for _, line in stopped)
    assert "stopped while warming up" in said and "warmed up" not in said and "watching" not in said, said
    assert "Traceback" not in said, said
    assert seconds_between(stopped, "warming up", "stopped while warming up") < warm_up, said


ENGINE_WARMED = """
import json

import nbformat
from pathlib import Path
from attention_platform.feedback_on_submit.engine import Engine
from attention_platform.grading.sandbox.client import get_zygote

engine = Engine(Path({course!r})).start()
engine.warm({assignments!r})
with get_zygote().spawn() as sandbox:
    _, reply = sandbox.call({{"op": "cell", "source": {source!r}}})
print(json.dumps({{"loaded": reply["outputs"][0]["text"].split()}}))
"""


@pytest.mark.parametrize("notebooks, loaded", [
    ("plain", ["torch"]),  # neither trains nor draws: sandboxes forked from the smaller worker
    ("course's", ["matplotlib.pyplot", "torch._dynamo", "torch"]),  # the experiments notebook does both
])
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a private sandbox worker needs root")
def test_the_grader_warms_its_worker_for_the_assignments_with_feedback_on(tmp_path, notebooks, loaded):
    """Its sandboxes' worker pays the first uses those assignments' source notebooks need, no more."""
    from nbformat.v4 import new_code_cell, new_notebook

    from attention_platform.course.directory import copy_course
    from grader_tests.self_attention.answers import ASSIGNMENT
    from broker_helpers import LOADED

    course = copy_course(tmp_path / "course")
    if notebooks == "plain":
        for path in (course / "source" / ASSIGNMENT).glob("*.ipynb"):
            path.unlink()
        nbformat.write(new_notebook(cells=[new_code_cell("import torch\nx = torch.ones(3) * 2")]),
                       course / "source" / ASSIGNMENT / "plain.ipynb")
    code = ENGINE_WARMED.format(course=str(course), assignments=[ASSIGNMENT], source=LOADED)
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    env.pop("ATTENTION_SANDBOX_SOCKET", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"loaded": loaded}


def _flooded_service(tmp_path, monkeypatch, watching: bool = True):
    """The grader (its scan only: nothing graded) for a copy of the course with feedback on submit on,
    and the inbound folders of ann and bob; ``watching``: after its first scan."""
    from attention_platform.course.directory import copy_course
    from grader_tests.self_attention.answers import ASSIGNMENT
    from attention_platform.feedback_on_submit.service import Service

    monkeypatch.setenv("ATTENTION_FEEDBACK_ON_SUBMIT", json.dumps({ASSIGNMENT: {"feedback": "checks"}}))
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")  # nbgrader runs alembic
    service = Service(copy_course(tmp_path / "course"), tmp_path / "exchange")
    for student in ("ann", "bob"):
        (service.exchange / "inbound" / student).mkdir(parents=True)
        (service.exchange / "feedback" / student).mkdir(parents=True)
    if watching:
        service.scan()  # feedback on submit is on from now
    return service, ASSIGNMENT


def _hand_in(service, student: str, assignment: str, tag: str, notebook: bool = True):
    stamp = dt.datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    folder = service.exchange / "inbound" / student / f"{student}+{assignment}+{stamp}+{tag}"
    folder.mkdir()
    if notebook:
        (folder / f"{assignment}.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
        (folder / "timestamp.txt").write_text(stamp)
    return folder


def test_a_flood_of_folders_that_are_no_submissions_makes_no_rows_and_its_student_is_told(tmp_path, monkeypatch):
    """~1,500 empty folders in a student's own inbound folder became 1,500 gradebook rows, each rewriting
    their status, on the grader's one scan thread. A folder without a notebook is no submission: skipped
    without a row, looked at again only if it changes, and the student's status says how many."""
    service, assignment = _flooded_service(tmp_path, monkeypatch)
    for k in range(1500):
        _hand_in(service, "ann", assignment, f"flood{k}", notebook=False)
    honest = _hand_in(service, "bob", assignment, "honest")
    service.scan()
    rows = service.ledger.attempts(assignment)
    assert [(r["student"], r["submission"]) for r in rows] == [("bob", honest.name)]
    shown = status_file.read(str(service.exchange / "feedback" / "ann"), assignment)
    assert shown["attempts"] == []
    assert shown["notice"].startswith("1,500 folders in your inbound folder are not submissions (no notebook in "
                                      "them): they were not graded."), shown["notice"]
    service.ledger.close()


def test_hand_made_submissions_are_taken_a_few_at_a_time_per_student_and_bounded(tmp_path, monkeypatch):
    """Submissions made by hand, each with a notebook: each scan takes at most two of one student's, so a
    student's pile never delays another student's submission; at most ExchangeLimits.max_kept_submissions
    of theirs wait in the queue at once, the rest staying where they are until it drains."""
    service, assignment = _flooded_service(tmp_path, monkeypatch)
    for k in range(30):
        _hand_in(service, "ann", assignment, f"pile{k:02d}")
    honest = _hand_in(service, "bob", assignment, "honest")
    service.scan()
    taken = [(r["student"], r["submission"]) for r in service.ledger.attempts(assignment)]
    assert ("bob", honest.name) in taken and len([s for s, _ in taken if s == "ann"]) == 2, taken
    for _ in range(20):
        service.folder_mtimes.clear()  # as if each scan came after the folder changed
        service.scan()
    ann = [r for r in service.ledger.attempts(assignment, "ann")]
    assert len(ann) == 10 and {r["state"] for r in ann} == {"queued"}, [(r["submission"], r["state"]) for r in ann]
    shown = status_file.read(str(service.exchange / "feedback" / "ann"), assignment)
    assert "20 of your submissions wait until your queued attempts are graded" in shown["notice"], shown["notice"]
    service.ledger.close()


def test_submissions_past_the_attempt_limit_make_a_bounded_number_of_rows(tmp_path, monkeypatch):
    """Under a limit of graded attempts each hand-made submission past it was a 'refused' row, without
    end. Past ExchangeLimits.max_kept_submissions such rows in 24 hours, further ones are not looked
    at: no row, no copy, and the student's status counts them."""
    service, assignment = _flooded_service(tmp_path, monkeypatch)
    service.policies[assignment] = parse(assignment, {"feedback": "checks", "attempts": 1})
    for k in range(30):
        _hand_in(service, "ann", assignment, f"pile{k:02d}")
    for _ in range(20):
        service.folder_mtimes.clear()
        service.scan()
    states = [r["state"] for r in service.ledger.attempts(assignment, "ann")]
    assert states == ["queued"] + ["refused"] * 10, states
    shown = status_file.read(str(service.exchange / "feedback" / "ann"), assignment)
    assert "19 of your submissions were not looked at: 10 of yours could not be graded in the last 24 hours" \
        in shown["notice"], shown["notice"]
    service.ledger.close()


def test_a_submission_handed_in_before_the_grader_first_watches_its_assignment_is_graded(tmp_path, monkeypatch):
    """An assignment released while the grader was down (or a student who submits while it warms up):
    the submission is in inbound before the grader's first scan of that assignment, and was never
    taken, the student's panel saying "No attempt yet" for good. The scan that starts the watch takes
    every submission already in inbound, with the same bounds per student as any scan."""
    from attention_platform.feedback_on_submit.service import TAKEN_PER_SCAN

    service, assignment = _flooded_service(tmp_path, monkeypatch, watching=False)
    early = _hand_in(service, "bob", assignment, "early")
    for k in range(5):
        _hand_in(service, "ann", assignment, f"pile{k}")
    service.scan()  # the grader's first look at the assignment
    rows = service.ledger.attempts(assignment)
    assert ("bob", early.name, "queued") in [(r["student"], r["submission"], r["state"]) for r in rows], rows
    assert len([r for r in rows if r["student"] == "ann"]) == TAKEN_PER_SCAN  # a pile is taken a few at a time
    for _ in range(3):
        service.scan()
    assert len(service.ledger.attempts(assignment, "ann")) == 5
    shown = status_file.read(str(service.exchange / "feedback" / "bob"), assignment)
    assert [a["state"] for a in shown["attempts"]] == ["queued"], shown
    service.ledger.close()


def test_an_assignment_switched_on_while_the_grader_runs_takes_what_was_handed_in_before(tmp_path, monkeypatch):
    """The grader already watches one assignment when another gets its first policy: the students' inbound
    folders have not changed since the grader last listed them, and their submissions of the newly
    watched assignment were never looked at. Starting to watch an assignment lists every folder again."""
    service, _watched = _flooded_service(tmp_path, monkeypatch)
    other = "multi_head_attention"
    handed_in = _hand_in(service, "ann", other, "before")
    service.scan()
    assert service.ledger.attempts(other) == []  # no policy for it yet
    an_hour_ago = time.time() - 3600
    os.utime(service.exchange / "inbound" / "ann", (an_hour_ago, an_hour_ago))
    service.scan()  # the folder is listed now, and not again while it stays the same
    service.policies[other] = parse(other, {"feedback": "checks"})
    service.scan()
    rows = service.ledger.attempts(other, "ann")
    assert [(r["submission"], r["state"]) for r in rows] == [(handed_in.name, "queued")], rows
    service.ledger.close()


def test_an_attempt_whose_grading_ended_the_grader_twice_is_failed_not_graded_for_ever(tmp_path, monkeypatch):
    """What each start of the grader finds after its process died while grading the attempt (killed at
    its memory cap, say): an attempt left in "grading". Graded again once; found so a second time, it
    is failed, the student is told why, and nothing of it is queued again."""
    from attention_platform.course.directory import copy_course
    from grader_tests.self_attention.answers import ASSIGNMENT
    from attention_platform.feedback_on_submit.service import Service

    monkeypatch.setenv("ATTENTION_FEEDBACK_ON_SUBMIT", json.dumps({ASSIGNMENT: {"feedback": "checks"}}))
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")  # nbgrader runs alembic
    course, exchange = copy_course(tmp_path / "course"), tmp_path / "exchange"
    first = Service(course, exchange)
    (first.exchange / "feedback" / "ann").mkdir(parents=True)
    since = first.enabled_since(ASSIGNMENT)
    attempt = first.ledger.add(assignment=ASSIGNMENT, student="ann", submission=f"ann+{ASSIGNMENT}+1", claimed="",
                               received_at=since + dt.timedelta(seconds=1), state="grading", feedback="checks")
    (first.incoming / str(attempt) / ASSIGNMENT).mkdir(parents=True)
    first.ledger.close()

    def restarted():
        service = Service(course, exchange)
        service.recover()
        row = next(r for r in service.ledger.attempts(ASSIGNMENT, "ann") if r["id"] == attempt)
        return service, row

    again, row = restarted()  # the grader died while grading it: graded again
    assert row["state"] == "queued" and again.queue.take()[0] == "ann"
    again.ledger.set(attempt, state="grading")  # what dispatch() does when a worker takes it
    again.ledger.close()
    last, row = restarted()  # ... and died again
    assert row["state"] == "failed" and "stopped while grading this attempt, twice" in row["message"], row
    assert last.queue.take() is None and not (last.incoming / str(attempt)).exists()
    shown = json.loads((last.exchange / "feedback" / "ann" / status_file.filename(ASSIGNMENT)).read_text())
    assert shown["attempts"][0]["state"] == "failed" and shown["attempts"][0]["message"] == row["message"]
    last.ledger.close()


def test_a_feedback_page_is_found_by_attempt_and_notebook_only_where_the_grader_listed_it():
    page = "0123456789abcdef0123456789abcdef.html"
    status = {"attempts": [{"pages": {"self_attention": page, "part2": "../../etc/passwd"}}, {"state": "queued"}]}
    assert attempt_page(status, 1, "self_attention") == page
    assert attempt_page(status, 1, "part2") is None  # not a page name the grader writes
    assert attempt_page(status, 2, "self_attention") is None  # no pages yet
    assert attempt_page(status, 0, "self_attention") is None and attempt_page(status, 3, "self_attention") is None


def test_the_policy_page_switches_variants_and_makes_a_new_key_only_when_told(tmp_path):
    """The policy page's variants buttons (formgrader/policy_form.py; in a browser:
    tests/feedback_on_submit/test_formgrader_pages_browser.py)."""
    from attention_platform.course import variants
    from attention_platform.course.directory import copy_course
    from attention_platform.formgrader.policy_form import variants_action, variants_state

    course = str(copy_course(tmp_path / "course"))
    assert variants_state(course, "multi_head_attention").startswith("Not offered")
    assert variants_state(course, "self_attention").startswith("Off:")
    said = variants_action(course, "self_attention", "variants-on", False)
    assert said.startswith("Variants on") and variants_state(course, "self_attention").startswith("On:")
    key = variants.course_key(course)
    (tmp_path / "course" / "submitted" / "ann" / "self_attention").mkdir(parents=True)
    with pytest.raises(variants.VariantsError, match="tick the box"):
        variants_action(course, "self_attention", "variants-regenerate", False)
    assert variants.course_key(course) == key
    variants_action(course, "self_attention", "variants-regenerate", True)
    assert variants.course_key(course) != key
    with pytest.raises(variants.VariantsError, match="no part whose numbers vary"):
        variants_action(course, "multi_head_attention", "variants-on", False)
    variants_action(course, "self_attention", "variants-off", False)
    assert variants_state(course, "self_attention").startswith("Off:")


def test_the_grader_writes_the_own_copy_of_a_student_whose_folder_appeared_after_the_release(tmp_path, monkeypatch):
    """A student whose server first starts after a release with variants had no copy of their own, and
    their fetch was refused until an instructor wrote the copies again. The grader's service writes it
    at its next look, and a look that finds nothing missing derives no variant."""
    from attention_platform.course import variants
    from attention_platform.course.directory import COURSE_ROOT
    from attention_platform.exchange.submit import PERSONAL_FOLDER, VARIANT_MARKS

    service, _ = _flooded_service(tmp_path, monkeypatch, watching=False)
    assignment = "self_attention"
    notebook = variants.notebook(assignment)
    shutil.copytree(COURSE_ROOT / "release" / assignment, service.course / "release" / assignment)
    variants.switch(service.course, assignment, True)
    (service.exchange / "outbound" / VARIANT_MARKS).mkdir(parents=True)
    (service.exchange / "outbound" / VARIANT_MARKS / assignment).write_bytes(b"")  # as a release marks it
    (service.exchange / "outbound" / assignment).mkdir()
    assert service.own_copies.write_missing() == 2  # ann and bob: no release wrote theirs here
    assert service.own_copies.write_missing() == 0

    (service.exchange / "inbound" / "cy").mkdir()  # cy's server starts after the release
    (service.exchange / "feedback" / "cy").mkdir()
    assert service.own_copies.write_missing() == 1
    mine = nbformat.read(service.exchange / "feedback" / "cy" / PERSONAL_FOLDER / assignment / f"{notebook}.ipynb",
                         as_version=4)
    _, sources, _ = variants.cells(service.course, assignment, "cy")
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in mine.cells}
    assert sources and all(by_id[grade_id] == source for grade_id, source in sources.items())

    # A copy that cannot be written leaves no folder behind: an empty one would let their fetch hand out
    # the release's numbers.
    shutil.rmtree(service.course / "release" / assignment)
    (service.exchange / "inbound" / "di").mkdir()
    (service.exchange / "feedback" / "di").mkdir()
    assert service.own_copies.write_missing() == 0
    assert not (service.exchange / "feedback" / "di" / PERSONAL_FOLDER / assignment).exists()

    def no_key(course_dir):
        raise AssertionError("a look that finds every copy written derives no variant")

    monkeypatch.setattr(variants, "course_key", no_key)
    assert service.own_copies.write_missing() == 0
