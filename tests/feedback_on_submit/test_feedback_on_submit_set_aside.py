"""A graded attempt is set aside until its feedback pages are made, so its student's next attempt is
graded without waiting for them (attention_platform/feedback_on_submit/engine.py ``set_aside``).

The grader's real loop (scan, fair queue, grading in sandboxes, the pages' process, what counts) with
one student, ann, whose first attempt's pages are held back until her second attempt is graded:

* the second attempt is graded while the first one's pages wait;
* each attempt's page reads its own grades (a correct answer, then the bug "no √D"), although the
  scratch gradebook holds the second attempt's grades when the first one's page is made;
* her attempts are finished in the order they were graded: under ``last`` the second one counts;
* a student with ``SET_ASIDE_PER_STUDENT`` attempts set aside waits in the queue until one is finished;
* a grader stopped while an attempt is set aside grades it again when it starts, and leaves nothing
  set aside behind.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import shutil
import sys
import threading
import time

import nbformat
import pytest

from grader_tests.self_attention.answers import ASSIGNMENT, BUGGY, CORRECT, NOTEBOOK, with_answer

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a private sandbox worker needs root")]

NO_SCALE = next(a for a in BUGGY if a.name == "no_scale")
NO_SCALE_MESSAGE = "scores must be divided by √D"
CORE = NOTEBOOK.removesuffix(".ipynb")  # the core notebook's id
FAILED = "✗ failed"  # a check's mark on the page
WAIT = 600  # s: a bound for a grader on a shared 2-core machine (never asserted as a speed)


def hand_in(service, course, k: int, answer: str) -> None:
    """What ann's submit leaves in her inbound folder, with ``answer`` in the core notebook's class cell."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    inbound = service.exchange / "inbound" / "ann"
    made = inbound / f".making-{k}"
    shutil.copytree(course / "release" / ASSIGNMENT, made)
    core = made / NOTEBOOK
    nbformat.write(with_answer(nbformat.read(core, as_version=4), answer), core)
    (made / "timestamp.txt").write_text(stamp)
    (made / "submission_secret.txt").write_text(f"secret-of-ann-{k}")  # nbgrader makes one per submit
    os.rename(made, inbound / f"ann+{ASSIGNMENT}+{stamp}+{k}")


def shown(service) -> list[dict]:
    path = service.exchange / "feedback" / "ann" / f"feedback-on-submit-{ASSIGNMENT}.json"
    return json.loads(path.read_text())["attempts"] if path.exists() else []


def wait_until(done, what: str, loop: threading.Thread, within: float = WAIT) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert loop.is_alive(), f"the grader's loop ended before {what}"
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.05)


def page_text(service, attempt: dict) -> str:
    """The words of the attempt's page of the core notebook (tags, styles and spacing left out)."""
    page = (service.exchange / "feedback" / "ann" / attempt["pages"][CORE]).read_text()
    words = re.sub(r"<[^>]+>", " ", re.sub(r"<style.*?</style>", "", page, flags=re.S))
    return " ".join(html.unescape(words).split())


@pytest.fixture
def grader(tmp_path, monkeypatch, released_course):
    """``start()``: a Service of ann's course on its real loop in a thread, as ``(service, loop, stop)``;
    every one started is stopped at the end."""
    from attention_platform.feedback_on_submit.service import Service

    monkeypatch.setenv("ATTENTION_FEEDBACK_ON_SUBMIT",
                       json.dumps({ASSIGNMENT: {"feedback": "full", "attempts": None, "counts": "last"}}))
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")  # nbgrader runs alembic
    monkeypatch.delenv("ATTENTION_SANDBOX_SOCKET", raising=False)  # a private sandbox worker
    course = released_course(tmp_path / "course", ASSIGNMENT)
    started = []

    def start(prepare=lambda service: None):
        service = Service(course, tmp_path / "exchange")
        for folder in ("inbound", "feedback"):
            (service.exchange / folder / "ann").mkdir(parents=True, exist_ok=True)
        prepare(service)
        stop = threading.Event()
        loop = threading.Thread(target=service.run, args=(stop,), name="grader-loop")
        loop.start()
        started.append((loop, stop))
        wait_until(lambda: ASSIGNMENT in service.since, "the grader's first scan", loop)
        return service, loop, stop

    start.course = course
    yield start
    for loop, stop in started:
        stop.set()
        loop.join(timeout=120)


def held_finish(service, first_id: int, release: threading.Event, *, skipped_when=None):
    """``service.finish`` that holds the attempt ``first_id`` back until ``release``; with ``skipped_when``
    set by then, that attempt is left unfinished, as by a grader stopped before its pages."""
    finish = service.finish

    def finish_later(attempt, result):
        if attempt.id == first_id:
            release.wait(WAIT)
            if skipped_when is not None and skipped_when.is_set():
                return "graded"
        return finish(attempt, result)

    service.finish = finish_later


def test_the_next_attempt_is_graded_while_the_last_ones_pages_wait_and_each_page_reads_its_own_grades(grader):
    release = threading.Event()
    service, loop, _ = grader(lambda service: held_finish(service, 1, release))
    try:
        hand_in(service, grader.course, 1, CORRECT[0].code)
        wait_until(lambda: [a["state"] for a in shown(service)] == ["graded"], "the first attempt graded", loop)
        hand_in(service, grader.course, 2, NO_SCALE.code)
        wait_until(lambda: [a["state"] for a in shown(service)] == ["graded", "graded"], "the second attempt graded "
                   "while the first one's pages wait", loop, within=120)  # one attempt's grading, many times over
        first, second = shown(service)
        assert not first.get("pages") and not second.get("pages")
        assert any(not check["passed"] for check in second["checks"])  # the bug, not the first attempt's grades
        assert all(check["passed"] for check in first["checks"] if check["notebook"] == CORE)
    finally:
        release.set()
    wait_until(lambda: all(a.get("pages") for a in shown(service)) and not service.running and not service.finishing,
               "both attempts' pages made", loop)
    first, second = shown(service)
    # the first page was made after the scratch gradebook held the second attempt's grades: it reads its own
    # (each check's mark and points from the grades, its message from the graded notebook)
    assert FAILED not in page_text(service, first) and NO_SCALE_MESSAGE not in page_text(service, first)
    assert FAILED in page_text(service, second) and NO_SCALE_MESSAGE in page_text(service, second)
    assert second["counted"] and not first["counted"]  # finished in the order graded: the last one counts
    assert not any((service.engine.work / "graded").iterdir())


def test_a_student_with_as_many_attempts_set_aside_as_allowed_waits_until_one_is_finished(grader, monkeypatch):
    from attention_platform.feedback_on_submit import service as service_module

    monkeypatch.setattr(service_module, "SET_ASIDE_PER_STUDENT", 2)
    release = threading.Event()
    service, loop, _ = grader(lambda service: held_finish(service, 1, release))
    try:
        for k in (1, 2):
            hand_in(service, grader.course, k, CORRECT[0].code)
            wait_until(lambda: [a["state"] for a in shown(service)] == ["graded"] * k, f"attempt {k} graded", loop)
        hand_in(service, grader.course, 3, NO_SCALE.code)
        wait_until(lambda: len(shown(service)) == 3, "the third attempt queued", loop)
        looked_until = time.monotonic() + 3  # a graded attempt here takes about a second
        while time.monotonic() < looked_until:
            assert shown(service)[2]["state"] == "queued", shown(service)[2]
            assert len(list((service.engine.work / "graded").iterdir())) <= 2
            time.sleep(0.1)
    finally:
        release.set()
    wait_until(lambda: len(shown(service)) == 3 and all(a.get("pages") for a in shown(service))
               and not service.running and not service.finishing, "every attempt finished", loop)
    assert [a["state"] for a in shown(service)] == ["graded"] * 3 and shown(service)[2]["counted"]
    assert not service.set_aside and not service.held


def test_a_grader_stopped_while_an_attempt_is_set_aside_grades_it_again(grader):
    release, stopped = threading.Event(), threading.Event()
    service, loop, stop = grader(lambda service: held_finish(service, 1, release, skipped_when=stopped))
    hand_in(service, grader.course, 1, NO_SCALE.code)
    wait_until(lambda: [a["state"] for a in shown(service)] == ["graded"], "the attempt graded", loop)
    assert (service.engine.work / "graded" / "1").is_dir()  # set aside, its pages not made
    stopped.set()
    release.set()
    stop.set()
    loop.join(timeout=120)
    assert not loop.is_alive() and not shown(service)[0].get("pages")

    service, loop, _ = grader()
    wait_until(lambda: shown(service) and shown(service)[0].get("pages") and not service.running
               and not service.finishing, "the attempt graded again, with its pages", loop)
    again = shown(service)
    assert len(again) == 1 and again[0]["state"] == "graded" and again[0]["counted"]
    assert NO_SCALE_MESSAGE in page_text(service, again[0])
    assert not any((service.engine.work / "graded").iterdir())
