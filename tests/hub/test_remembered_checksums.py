"""The Assignments tab's listing hashes each feedback page once per version of the file
(``attention_platform.lab.remembered_checksums``), through nbgrader's own ``ExchangeList``."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange.default.list import ExchangeList
from nbgrader.utils import notebook_hash
from traitlets.config import Config

from attention_platform import third_party_patches
from attention_platform.lab.remembered_checksums import RememberedChecksums

COURSE, STUDENT, ASSIGNMENT = "course-a", "ada", "self_attention"
NOTEBOOKS = ("self_attention", "02_by_hand")
PAGE_BYTES = 200_000  # about a real page with its pictures


class Student:
    """One student's listing as their server makes it: submissions in their nbgrader cache, each
    with its secret and notebooks, feedback pages in their view of the exchange, fetched copies of
    some in their assignment's folder."""

    def __init__(self, tmp_path):
        self.home, self.cache, self.root = tmp_path / "home", tmp_path / "cache", tmp_path / "exchange"
        self.feedback = self.root / COURSE / "feedback"
        for folder in (self.home, self.cache / COURSE, self.feedback):
            folder.mkdir(parents=True)
        self.submitted: list[str] = []

    def submit(self, pages: bool = True) -> str:
        """A submission in the cache; with ``pages``, its feedback pages in the exchange."""
        timestamp = f"2026-11-29 10:00:{len(self.submitted):02d}.000000 UTC"
        folder = self.cache / COURSE / f"{STUDENT}+{ASSIGNMENT}+{timestamp}"
        folder.mkdir()
        secret = f"secret-{len(self.submitted)}"
        (folder / "submission_secret.txt").write_text(secret)
        for notebook in NOTEBOOKS:
            (folder / f"{notebook}.ipynb").write_text("{}")
            if pages:
                self.page(timestamp, notebook).write_bytes(os.urandom(PAGE_BYTES))
        self.submitted.append(timestamp)
        return timestamp

    def page(self, timestamp: str, notebook: str):
        secret = (self.cache / COURSE / f"{STUDENT}+{ASSIGNMENT}+{timestamp}" / "submission_secret.txt").read_text()
        return self.feedback / f"{notebook_hash(secret=secret, notebook_id=notebook)}.html"

    def fetched(self, timestamp: str, notebook: str):
        return self.home / ASSIGNMENT / "feedback" / timestamp / f"{notebook}.html"

    def listing(self) -> dict:
        """nbgrader's listing of this student's submissions, by timestamp and notebook."""
        config = Config()
        config.CourseDirectory.course_id = COURSE
        config.CourseDirectory.student_id = STUDENT
        config.CourseDirectory.assignment_id = ASSIGNMENT
        config.Exchange.root, config.Exchange.cache = str(self.root), str(self.cache)
        config.Exchange.path_includes_course = False
        config.Exchange.assignment_dir = str(self.home)
        lister = ExchangeList(coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config),
                              config=config)
        lister.cached = True
        return {(submission["timestamp"], notebook["notebook_id"]):
                {key: notebook[key] for key in ("has_local_feedback", "has_exchange_feedback", "feedback_updated")}
                for assignment in lister.start() for submission in assignment["submissions"]
                for notebook in submission["notebooks"]}


@pytest.fixture
def student(tmp_path):
    return Student(tmp_path)


@pytest.fixture
def remembered(monkeypatch):
    """The student's server's patch, applied to nbgrader's listing for this test only."""
    import nbgrader.exchange.default.list as listing

    monkeypatch.setattr(listing, "_checksum", listing._checksum)  # restored after the test
    checksums = RememberedChecksums()
    third_party_patches.checksum_listed_feedback_with(checksums)
    return checksums


@pytest.fixture
def hashed_bytes(monkeypatch):
    """Counts the bytes every MD5 made from now on is fed, whoever makes it."""
    counted = {"bytes": 0}
    real_md5 = hashlib.md5

    class Counting:
        def __init__(self, data=b"", **kwargs):
            self._md5 = real_md5(**kwargs)
            self.update(data)

        def update(self, data):
            counted["bytes"] += len(data)
            self._md5.update(data)

        def hexdigest(self):
            return self._md5.hexdigest()

    monkeypatch.setattr(hashlib, "md5", Counting)
    return counted


def test_a_listing_again_hashes_no_feedback_page_again(student, remembered, hashed_bytes):
    for _ in range(5):
        student.submit()
    first = student.listing()
    assert hashed_bytes["bytes"] >= 5 * len(NOTEBOOKS) * PAGE_BYTES
    hashed_bytes["bytes"] = 0
    assert student.listing() == first
    assert hashed_bytes["bytes"] < PAGE_BYTES  # the secrets' notebook hashes only
    assert remembered.hashed == 5 * len(NOTEBOOKS)


def test_one_more_attempt_hashes_only_its_own_pages(student, remembered, hashed_bytes):
    for _ in range(5):
        student.submit()
    student.listing()
    hashed_bytes["bytes"] = 0
    student.submit()
    student.listing()
    assert len(NOTEBOOKS) * PAGE_BYTES <= hashed_bytes["bytes"] < (len(NOTEBOOKS) + 1) * PAGE_BYTES


def fetch(student, timestamp, notebook):
    copy = student.fetched(timestamp, notebook)
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(student.page(timestamp, notebook).read_bytes())


def replace_page(student, timestamp, notebook):
    """The grader's way: a new file renamed over the old one."""
    page = student.page(timestamp, notebook)
    fresh = page.with_suffix(".new")
    fresh.write_bytes(os.urandom(PAGE_BYTES))
    os.rename(fresh, page)


def rewrite_copy(student, timestamp, notebook):
    """The student's way: the fetched copy written over in place, as long as before."""
    copy = student.fetched(timestamp, notebook)
    before = copy.stat()
    with open(copy, "r+b") as file:
        file.write(os.urandom(PAGE_BYTES))
    later = before.st_mtime_ns + 1_000_000_000  # a new time even on a coarse file-system clock
    os.utime(copy, ns=(later, later))


def nothing(student, timestamp, notebook):
    pass


@pytest.mark.parametrize("change, updated", [
    (nothing, False),
    (replace_page, True),
    (rewrite_copy, True),
])
def test_the_listing_says_what_nbgraders_own_says(student, remembered, monkeypatch, change, updated):
    """Fetched, ready and updated feedback as nbgrader's own listing says, on the same files, with
    every change made after a first listing had remembered the digests."""
    first, second = student.submit(), student.submit()
    fetch(student, first, NOTEBOOKS[0])
    student.listing()
    change(student, first, NOTEBOOKS[0])
    listed = student.listing()
    assert listed[(first, NOTEBOOKS[0])] == {"has_local_feedback": True, "has_exchange_feedback": True,
                                             "feedback_updated": updated}
    assert listed[(second, NOTEBOOKS[0])] == {"has_local_feedback": False, "has_exchange_feedback": True,
                                              "feedback_updated": False}
    import nbgrader.exchange.default.list as listing

    monkeypatch.setattr(listing, "_checksum", listing._checksum.__wrapped__)  # nbgrader's own, on the same files
    assert student.listing() == listed
    assert remembered.hashed >= 1


# --------------------------------------------------------------------------- the digests themselves

def test_a_digest_is_the_md5_of_the_bytes_as_nbgrader_computes_it(tmp_path):
    import nbgrader.exchange.default.list as listing

    path = tmp_path / "page.html"
    path.write_bytes(os.urandom(3 * (1 << 20) + 5))  # more than one read
    assert RememberedChecksums()(str(path)) == listing._checksum(str(path)) == \
        hashlib.md5(path.read_bytes()).hexdigest()


def replaced(path):
    fresh = path.with_suffix(".new")
    fresh.write_bytes(b"b" * 100)
    os.rename(fresh, path)


def removed_and_written_again(path):
    path.unlink()
    path.write_bytes(b"b" * 100)


def rewritten_in_place(path):
    before = path.stat().st_mtime_ns
    path.write_bytes(b"b" * 100)
    os.utime(path, ns=(before + 1_000_000_000,) * 2)


def touched(path):
    os.utime(path, ns=(path.stat().st_mtime_ns + 1_000_000_000,) * 2)


def left_alone(path):
    pass


@pytest.mark.parametrize("change, hashed_again", [
    (left_alone, False),
    (touched, True),
    (replaced, True),
    (removed_and_written_again, True),
    (rewritten_in_place, True),
])
def test_a_file_is_hashed_again_when_its_identity_changed(tmp_path, change, hashed_again):
    path = tmp_path / "page.html"
    path.write_bytes(b"a" * 100)
    checksums = RememberedChecksums()
    checksums(str(path))
    change(path)
    assert checksums(str(path)) == hashlib.md5(path.read_bytes()).hexdigest()
    assert checksums.hashed == (2 if hashed_again else 1)


def test_a_file_written_while_it_is_read_is_not_remembered(tmp_path, monkeypatch):
    path = tmp_path / "page.html"
    path.write_bytes(b"a" * 100)
    real_fstat, calls = os.fstat, []

    def fstat(fd):
        calls.append(fd)
        info = real_fstat(fd)
        if len(calls) == 2:  # after the read: as if written meanwhile
            fields = list(info)
            fields[8] += 1  # st_mtime
            return os.stat_result(fields, {"st_mtime_ns": info.st_mtime_ns + 1, "st_ctime_ns": info.st_ctime_ns})
        return info

    checksums = RememberedChecksums()
    monkeypatch.setattr(os, "fstat", fstat)
    checksums(str(path))
    monkeypatch.setattr(os, "fstat", real_fstat)
    checksums(str(path))
    assert checksums.hashed == 2


def test_the_memory_is_bounded(tmp_path):
    checksums = RememberedChecksums(most=2)
    paths = []
    for name in "abc":
        paths.append(tmp_path / name)
        paths[-1].write_bytes(name.encode())
        checksums(str(paths[-1]))
    checksums(str(paths[2]))
    assert checksums.hashed == 3
    checksums(str(paths[0]))  # the least recently used, forgotten
    assert checksums.hashed == 4


def test_a_missing_file_is_an_error_as_in_nbgrader(tmp_path):
    with pytest.raises(FileNotFoundError):
        RememberedChecksums()(str(tmp_path / "gone.html"))


def test_the_patch_applied_twice_wraps_once(remembered):
    import nbgrader.exchange.default.list as listing

    patched = listing._checksum
    third_party_patches.checksum_listed_feedback_with(RememberedChecksums())
    assert listing._checksum is patched
    assert listing._checksum.__wrapped__.__module__ == "nbgrader.exchange.default.list"


def test_what_is_not_a_regular_file_is_an_error_at_once_not_a_wait(tmp_path):
    """A student's own fetched copy swapped for a pipe after nbgrader looked at it: reading it would
    wait for a writer for ever, holding the student's server; it is refused at once."""
    pipe = tmp_path / "page.html"
    os.mkfifo(pipe)
    outcome = {}

    def hash_it():
        try:
            RememberedChecksums()(str(pipe))
        except OSError as exc:
            outcome["error"] = exc

    reader = threading.Thread(target=hash_it, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # let the stuck open go, then fail
        with open(pipe, "wb"):
            pass
        reader.join(timeout=10)
        pytest.fail("hashing a pipe waited for a writer")
    assert "not a regular file" in str(outcome["error"])
