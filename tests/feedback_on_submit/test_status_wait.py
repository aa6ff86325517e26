"""The student's server holds a status request until the grader writes something new
(``attention_platform.lab.feedback_on_submit.changed_answer``): the Assignments tab learns of a
result when it is written, with one request per change."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from attention_platform.attempts import status as status_file
from attention_platform.lab import feedback_on_submit as lab_status

ASSIGNMENT = "self_attention"


def write_status(folder, attempts: list[dict]) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        status_file.write(fd, ASSIGNMENT, {"attempts": attempts})
    finally:
        os.close(fd)


def held(folder, since, wait, **kwargs) -> tuple[dict, float]:
    started = time.monotonic()
    current = asyncio.run(lab_status.changed_answer(str(folder), "course", since, wait, **kwargs))
    return current, time.monotonic() - started


@pytest.fixture
def folder(tmp_path):
    write_status(tmp_path, [{"state": "queued"}])
    return tmp_path


def test_equal_answers_have_equal_versions_and_a_new_status_a_new_one(folder):
    first = lab_status.answer(str(folder), "course")
    assert lab_status.answer(str(folder), "course")["version"] == first["version"]
    assert lab_status.VERSION.match(first["version"])
    write_status(folder, [{"state": "grading"}])
    assert lab_status.answer(str(folder), "course")["version"] != first["version"]


@pytest.mark.parametrize("case", ["no version given", "an older version given", "no wait asked"])
def test_a_request_that_has_nothing_to_wait_for_is_answered_at_once(folder, case):
    current = lab_status.answer(str(folder), "course")["version"]
    since, wait = {"no version given": (None, 20), "an older version given": ("0" * 32, 20),
                   "no wait asked": (current, 0)}[case]
    answer, seconds = held(folder, since, wait)
    assert answer["assignments"][ASSIGNMENT]["attempts"] == [{"state": "queued"}]
    assert seconds < 10  # far below the wait asked: it did not wait


def test_an_unchanged_status_is_answered_when_the_wait_is_over(folder):
    current = lab_status.answer(str(folder), "course")["version"]
    answer, seconds = held(folder, current, 0.6)
    assert answer["version"] == current
    assert seconds >= 0.6


def test_a_result_written_while_the_request_waits_is_answered_at_once(folder):
    current = lab_status.answer(str(folder), "course")["version"]
    writer = threading.Timer(0.3, write_status, (folder, [{"state": "graded", "score": 3}]))
    writer.start()
    try:
        answer, seconds = held(folder, current, 25)
    finally:
        writer.join()
    assert answer["assignments"][ASSIGNMENT]["attempts"] == [{"state": "graded", "score": 3}]
    assert answer["version"] != current
    assert seconds < 20


def test_a_replacement_the_folders_entries_do_not_show_is_read_in_full_soon_after(folder, monkeypatch):
    # a file replaced within one tick of the file system's clock, same size, inode reused: the
    # entries look the same; the full read every READ_EVERY seconds still finds it
    monkeypatch.setattr(lab_status, "entries", lambda _folder: ("unchanged",))
    monkeypatch.setattr(lab_status, "READ_EVERY", 0.5)
    current = lab_status.answer(str(folder), "course")["version"]
    writer = threading.Timer(0.3, write_status, (folder, [{"state": "grading"}]))
    writer.start()
    try:
        answer, _ = held(folder, current, 25)
    finally:
        writer.join()
    assert answer["assignments"][ASSIGNMENT]["attempts"] == [{"state": "grading"}]


def test_a_request_whose_tab_went_away_stops_waiting(folder):
    current = lab_status.answer(str(folder), "course")["version"]
    gone_at = time.monotonic() + 0.3
    answer, seconds = held(folder, current, 25, gone=lambda: time.monotonic() > gone_at)
    assert answer["version"] == current
    assert seconds < 20


def test_a_wait_is_never_longer_than_the_most_a_request_is_held(folder, monkeypatch):
    monkeypatch.setattr(lab_status, "WAIT_MOST", 0.4)
    current = lab_status.answer(str(folder), "course")["version"]
    answer, seconds = held(folder, current, 600)
    assert answer["version"] == current
    assert seconds < 10


def test_a_missing_folder_is_an_empty_answer_and_waits_like_any_other(tmp_path):
    missing = tmp_path / "not-yet"
    current = lab_status.answer(str(missing), "course")
    assert current["assignments"] == {} and current["deadlines"] == {}
    answer, seconds = held(missing, current["version"], 0.3)
    assert answer["version"] == current["version"] and seconds >= 0.3
