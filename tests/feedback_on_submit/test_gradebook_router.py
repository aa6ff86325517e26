"""The feedback-on-submit grader's gradebooks (engine.GradebookRouter): the scratch course's and the
course's stay open from one attempt to the next in a thread, yet every attempt reads the database as
it is, and a replaced file is opened anew."""

from __future__ import annotations

import os
import threading

import pytest
from nbgrader.api import Gradebook

from attention_platform.feedback_on_submit.engine import GradebookRouter

COURSE = "course101"


class CountingGradebook:
    """nbgrader's Gradebook, counting the ones made and closed."""

    def __init__(self):
        self.made, self.closed = 0, 0

    def __call__(self, db_url, course_id="default_course"):
        self.made += 1
        gb = Gradebook(db_url, course_id)
        close = gb.close

        def counted_close():
            self.closed += 1
            close()
        gb.close = counted_close
        return gb


@pytest.fixture
def kept_url(tmp_path):
    return f"sqlite:///{tmp_path / 'scratch.db'}"


def _students(router, url) -> list[str]:
    with router.opened(url, COURSE) as (gb, session):
        names = sorted(student.id for student in gb.students)
        session.rollback()
    return names


def test_a_kept_gradebook_is_made_once_per_thread_and_closed_with_the_router(kept_url, tmp_path):
    real = CountingGradebook()
    router = GradebookRouter(real, kept=(kept_url,))
    for _ in range(5):
        _students(router, kept_url)
    assert (real.made, real.closed) == (1, 0)
    other = threading.Thread(target=_students, args=(router, kept_url))
    other.start()
    other.join()
    assert real.made == 2  # a thread's own: sessions and connections are not shared across threads
    router.close()
    assert real.closed == 2


def test_a_new_gradebook_elsewhere_is_nbgraders_own_and_closed_after_its_block(kept_url, tmp_path):
    real = CountingGradebook()
    router = GradebookRouter(real, kept=(kept_url,))
    elsewhere = f"sqlite:///{tmp_path / 'new.db'}"
    _students(router, elsewhere)
    assert (real.made, real.closed) == (1, 1) and (tmp_path / "new.db").exists()  # nbgrader made its tables


def test_set_aside_gradebooks_share_one_engine_and_each_block_reads_its_own_file(kept_url, tmp_path):
    from sqlalchemy import event

    from attention_platform import sqlite_files

    real = CountingGradebook()
    router = GradebookRouter(real, kept=(kept_url,))
    files = []
    for student in ("ann", "bob", "cleo"):  # three attempts' gradebooks, set aside
        path = tmp_path / f"aside-{student}.db"
        with Gradebook(f"sqlite:///{path}", COURSE) as gb:
            gb.add_student(student)
        files.append(f"sqlite:///{path}")
    compiled = []
    engine = sqlite_files.ENGINE.get()
    listen = lambda conn, cursor, statement, params, context, many: compiled.append(str(context.cache_hit))  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        assert [_students(router, url) for url in files] == [["ann"], ["bob"], ["cleo"]]
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert real.made == 0  # nbgrader's own Gradebook would make an engine, and look at every table, per file
    per_file = len(compiled) // 3
    assert per_file and all(hit == "CacheStats.CACHE_HIT" for hit in compiled[per_file:]), compiled


def test_each_block_reads_what_another_process_committed_since(kept_url):
    router = GradebookRouter(CountingGradebook(), kept=(kept_url,))
    assert _students(router, kept_url) == []
    with Gradebook(kept_url, COURSE) as outside:  # a TA's nbgrader command, say
        outside.add_student("ann")
    assert _students(router, kept_url) == ["ann"]


def test_what_a_failed_block_wrote_is_not_seen_by_the_next(kept_url):
    router = GradebookRouter(CountingGradebook(), kept=(kept_url,))
    with pytest.raises(RuntimeError):
        with router.opened(kept_url, COURSE) as (gb, session):
            gb.add_student("bob")  # its own commit only flushes: the block's owner commits
            raise RuntimeError("the attempt failed")
    assert _students(router, kept_url) == []


def test_a_replaced_file_is_opened_anew(kept_url, tmp_path):
    real = CountingGradebook()
    router = GradebookRouter(real, kept=(kept_url,))
    assert _students(router, kept_url) == []
    restored = tmp_path / "restored.db"
    with Gradebook(f"sqlite:///{restored}", COURSE) as backup:
        backup.add_student("cleo")
    os.replace(restored, tmp_path / "scratch.db")  # an instructor restores a backup
    assert _students(router, kept_url) == ["cleo"]
    assert (real.made, real.closed) == (2, 1)


def test_a_removed_file_is_made_again_and_not_kept_open_on_the_old_one(kept_url, tmp_path):
    real = CountingGradebook()
    router = GradebookRouter(real, kept=(kept_url,))
    with router.opened(kept_url, COURSE) as (gb, session):
        gb.add_student("dan")
        session.commit()
    os.unlink(tmp_path / "scratch.db")
    assert _students(router, kept_url) == []
    assert (tmp_path / "scratch.db").exists() and (real.made, real.closed) == (2, 1)
    with router.opened(kept_url, COURSE) as (gb, session):
        gb.add_student("eve")
        session.commit()
    with Gradebook(kept_url, COURSE) as reread:
        assert [s.id for s in reread.students] == ["eve"]


def test_nbgraders_commits_in_a_block_write_nothing_yet_every_read_sees_them(kept_url):
    """nbgrader's preprocessors change a row and commit, cell after cell; in a block those commits wait
    for the owner's (one flush where a read needs it, not one per cell), and a read in the block still
    sees every change."""
    from sqlalchemy import event

    router = GradebookRouter(Gradebook, kept=(kept_url,))
    with router.opened(kept_url, COURSE) as (gb, session):
        for name in ("ann", "bob", "cleo"):
            gb.update_or_create_student(name)
        session.commit()
    with router.opened(kept_url, COURSE) as (gb, session):
        flushes = []
        event.listen(session(), "after_flush", lambda *_: flushes.append(1))
        students = sorted(gb.students, key=lambda student: student.id)
        for student in students:  # as SaveAutoGrades sets a score, then commits
            student.first_name = student.id.capitalize()
            gb.db.commit()
        written_by_commits = len(flushes)
        assert sorted(student.first_name for student in gb.students) == ["Ann", "Bob", "Cleo"]  # the read flushed
        session.commit()
    assert written_by_commits == 0 and len(flushes) == 1
    with router.opened(kept_url, COURSE) as (gb, session):
        assert sorted(student.first_name for student in gb.students) == ["Ann", "Bob", "Cleo"]
        session.rollback()
    router.close()
