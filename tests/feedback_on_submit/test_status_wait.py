"""The student's server holds a status request until the grader writes something new
(``attention_platform.lab.feedback_on_submit.changed_answer``): the Assignments tab learns of a
result when it is written, with one request per change. Each behaviour is shown twice: with the
folder watched (inotify, ``attention_platform.lab.folder_changes``) and looked at on a timer (where it
cannot be watched)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
import time

import pytest

from attention_platform.attempts import status as status_file
from attention_platform.lab import feedback_on_submit as lab_status
from attention_platform.lab import folder_changes

ASSIGNMENT = "self_attention"


def write_status(folder, attempts: list[dict]) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        status_file.write(fd, ASSIGNMENT, {"attempts": attempts})
    finally:
        os.close(fd)


def held(folder, since, wait, meanwhile=(), **kwargs) -> tuple[dict, float]:
    """The answer to a request held on ``folder`` and how long it took; ``meanwhile``: (seconds, action)
    pairs, each action run in a thread of its own that many seconds after the request was made."""
    timers = [threading.Timer(after, action) for after, action in meanwhile]
    started = time.monotonic()
    for timer in timers:
        timer.start()
    try:
        current = asyncio.run(lab_status.changed_answer(str(folder), "course", since, wait, **kwargs))
    finally:
        for timer in timers:
            timer.join()
    return current, time.monotonic() - started


@pytest.fixture(params=["watched", "on a timer"])
def watching(request, monkeypatch):
    if request.param == "on a timer":
        monkeypatch.setattr(folder_changes, "_open", lambda folder: None)
    yield request.param
    assert folder_changes.watched_folders() == 0  # every watch closed with its last request


@pytest.fixture
def folder(tmp_path, watching):
    """A student's feedback folder with one status, watched or looked at on a timer."""
    write_status(tmp_path, [{"state": "queued"}])
    return tmp_path


@pytest.fixture
def watched_folder(tmp_path):
    write_status(tmp_path, [{"state": "queued"}])
    yield tmp_path
    assert folder_changes.watched_folders() == 0


def counted(monkeypatch, name: str) -> list:
    """Calls of ``lab_status.<name>`` from now on, one item each."""
    calls, real = [], getattr(lab_status, name)
    monkeypatch.setattr(lab_status, name, lambda *args: calls.append(args) or real(*args))
    return calls


def rename_in(folder, name: str, data: bytes = b"{}") -> None:
    """Write ``name`` into ``folder`` as the grader does: a hidden file, then a rename."""
    (folder / f".{name}.tmp").write_bytes(data)
    os.rename(folder / f".{name}.tmp", folder / name)


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
    answer, seconds = held(folder, current, 25,
                           meanwhile=[(0.3, lambda: write_status(folder, [{"state": "graded", "score": 3}]))])
    assert answer["assignments"][ASSIGNMENT]["attempts"] == [{"state": "graded", "score": 3}]
    assert answer["version"] != current
    assert seconds < 20


def test_a_replacement_the_folders_entries_do_not_show_is_read_in_full_soon_after(folder, monkeypatch):
    # a file replaced within one tick of the file system's clock, same size, inode reused: the
    # entries look the same; the full read every READ_EVERY seconds still finds it
    monkeypatch.setattr(lab_status, "entries", lambda _folder: ("unchanged",))
    monkeypatch.setattr(lab_status, "READ_EVERY", 0.5)
    current = lab_status.answer(str(folder), "course")["version"]
    answer, _ = held(folder, current, 25, meanwhile=[(0.3, lambda: write_status(folder, [{"state": "grading"}]))])
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


def test_a_missing_folder_is_an_empty_answer_and_waits_like_any_other(tmp_path, watching):
    missing = tmp_path / "not-yet"
    current = lab_status.answer(str(missing), "course")
    assert current["assignments"] == {} and current["deadlines"] == {}
    answer, seconds = held(missing, current["version"], 0.3)
    assert answer["version"] == current["version"] and seconds >= 0.3


def test_while_nothing_changes_a_watched_folder_is_neither_looked_at_nor_read_again(watched_folder, monkeypatch):
    folder = watched_folder
    looks, reads = counted(monkeypatch, "entries"), counted(monkeypatch, "answer")
    current = lab_status.answer(str(folder), "course")["version"]
    answer, seconds = held(folder, current, 1.2)
    assert answer["version"] == current and seconds >= 1.2
    assert (len(looks), len(reads)) == (0, 2)  # the read above and the request's first


def test_a_feedback_page_written_into_the_folder_does_not_wake_a_watched_request(watched_folder, monkeypatch):
    folder = watched_folder
    reads = counted(monkeypatch, "answer")
    current = lab_status.answer(str(folder), "course")["version"]
    answer, _ = held(folder, current, 25, meanwhile=[
        (0.2, lambda: rename_in(folder, "0" * 32 + ".html", b"<p>page</p>")),
        (0.6, lambda: write_status(folder, [{"state": "graded", "score": 1}]))])
    assert answer["assignments"][ASSIGNMENT]["attempts"] == [{"state": "graded", "score": 1}]
    assert len(reads) == 3  # the read above, the request's first, and the one the status woke


def test_requests_held_at_once_share_one_watch_and_each_learns_of_the_result(folder, watching):
    current = lab_status.answer(str(folder), "course")["version"]
    during: list[int] = []

    async def both():
        async def write_later():
            await asyncio.sleep(0.3)
            during.append(folder_changes.watched_folders())
            write_status(folder, [{"state": "graded", "score": 2}])

        return await asyncio.gather(*(lab_status.changed_answer(str(folder), "course", current, 25) for _ in range(3)),
                                    write_later())

    *answers, _ = asyncio.run(both())
    assert during == [1 if watching == "watched" else 0]
    assert all(a["assignments"][ASSIGNMENT]["attempts"] == [{"state": "graded", "score": 2}] for a in answers)


def test_a_watched_folder_that_is_removed_while_a_request_waits_answers_with_what_is_left(folder, watching):
    current = lab_status.answer(str(folder), "course")["version"]

    def remove():
        for entry in folder.iterdir():
            entry.unlink()
        folder.rmdir()

    answer, seconds = held(folder, current, 25, meanwhile=[(0.3, remove)])
    assert answer["assignments"] == {} and answer["version"] != current
    assert seconds < 20


@pytest.mark.parametrize("case, watched", [
    ("a local folder", True),
    ("a local folder reached through the view's link", True),
    ("a folder on NFS", False),
    ("a missing folder", False),
    ("a file, not a folder", False),
    ("more folders than a server watches at once", False),
])
def test_where_a_folder_cannot_be_watched_the_request_falls_back_to_the_timer(tmp_path, monkeypatch, case, watched):
    target = tmp_path / "feedback"
    if case != "a missing folder":
        target.mkdir()
    if case == "a file, not a folder":
        target.rmdir()
        target.write_text("not a folder")
    if case == "a local folder reached through the view's link":
        (tmp_path / "view").symlink_to(target)
        target = tmp_path / "view"
    if case == "a folder on NFS":
        monkeypatch.setattr(folder_changes, "file_system_type", lambda path: 0x6969)
    if case == "more folders than a server watches at once":
        monkeypatch.setattr(folder_changes, "MOST_FOLDERS", 0)

    async def look():
        async with folder_changes.watch(str(target)) as changes:
            return changes

    assert (asyncio.run(look()) is not None) == watched


@pytest.mark.parametrize("case, events, expected", [
    ("a status renamed in", [(folder_changes.IN_MOVED_TO, "feedback-on-submit-a.json")], (True, False)),
    ("a deadline removed", [(folder_changes.IN_DELETE, "deadline-a.json")], (True, False)),
    ("a feedback page renamed in", [(folder_changes.IN_MOVED_TO, "ab" * 16 + ".html")], (False, False)),
    ("a status's hidden draft written", [(folder_changes.IN_CLOSE_WRITE, ".feedback-on-submit-a.json.1f")],
     (False, False)),
    ("a page, then a status", [(folder_changes.IN_MOVED_TO, "x.html"),
                               (folder_changes.IN_MOVED_TO, "feedback-on-submit-a.json")], (True, False)),
    ("the folder removed", [(folder_changes.IN_DELETE_SELF, ""), (folder_changes.IN_IGNORED, "")], (True, True)),
    ("events lost", [(folder_changes.IN_Q_OVERFLOW, "")], (True, False)),
    ("nothing", [], (False, False)),
])
def test_what_a_read_of_inotify_events_means(case, events, expected):
    data = b"".join(event(mask, name) for mask, name in events)
    assert folder_changes.what_happened(data) == expected


@pytest.mark.parametrize("case, data", [
    ("half a header", b"\x01\x00\x00\x00\x80"),
    ("a name longer than what was read", folder_changes.EVENT_HEADER.pack(1, folder_changes.IN_MOVED_TO, 0, 4096) + b"x"),
])
def test_a_malformed_read_of_inotify_events_is_news_and_allocates_nothing_it_did_not_read(case, data):
    assert folder_changes.what_happened(data) == (True, False)


def event(mask: int, name: str) -> bytes:
    encoded = name.encode()
    padded = encoded + b"\0" * (16 - len(encoded) % 16) if encoded else b""
    return folder_changes.EVENT_HEADER.pack(1, mask, 0, len(padded)) + padded


def test_a_folder_replaced_by_an_identical_one_while_watched_is_looked_at_on_the_timer_not_in_a_loop(
        watched_folder, monkeypatch):
    folder = watched_folder
    reads = counted(monkeypatch, "answer")
    current = lab_status.answer(str(folder), "course")["version"]

    twin = folder.with_name("twin")
    twin.mkdir()
    write_status(twin, [{"state": "queued"}])

    def replace():  # swapped in one step for a folder with the same status: the watched one is moved away
        libc = ctypes.CDLL(None, use_errno=True)
        at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
        assert libc.renameat2(at_cwd, bytes(twin), at_cwd, bytes(folder), exchange) == 0, ctypes.get_errno()

    answer, seconds = held(folder, current, 1.5, meanwhile=[(0.2, replace)])
    assert answer["version"] == current and seconds >= 1.5
    assert len(reads) < 10  # a few reads on the timer, not one after another for the rest of the wait
