"""attention_platform/sqlite_files.py: many SQLite files of one schema read through one engine, each
thread's connections opening the file it named, and statements compiled once for all of them."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from sqlalchemy import text

from attention_platform import sqlite_files


def _file(tmp_path, name: str, value: str) -> str:
    path = str(tmp_path / f"{name}.db")
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE student (id TEXT)")
        db.execute("INSERT INTO student VALUES (?)", (value,))
    return path


def _read(path: str) -> str:
    with sqlite_files.opening(path), sqlite_files.ENGINE.get().connect() as db:
        return db.execute(text("SELECT id FROM student")).scalar_one()


@pytest.mark.parametrize("url, expected", [
    ("sqlite:///{tmp}/there.db", "{tmp}/there.db"),
    ("sqlite:///{tmp}/missing.db", None),  # nbgrader makes a new gradebook's tables on its own engine
    ("sqlite://", None),
    ("sqlite:///{tmp}/there.db?mode=ro", None),
    ("postgresql://grader@db/gradebook", None),
])
def test_which_urls_are_files_it_reads(tmp_path, url, expected):
    (tmp_path / "there.db").touch()
    found = sqlite_files.path_of(url.format(tmp=tmp_path))
    assert found == (expected.format(tmp=tmp_path) if expected else None)


def test_each_block_reads_the_file_it_named_also_when_nested(tmp_path):
    first, second = _file(tmp_path, "first", "ann"), _file(tmp_path, "second", "bob")
    with sqlite_files.opening(first):
        assert _read(second) == "bob"
        with sqlite_files.ENGINE.get().connect() as db:  # the outer file again once the inner block ended
            assert db.execute(text("SELECT id FROM student")).scalar_one() == "ann"


def test_threads_at_once_each_read_their_own_file(tmp_path):
    paths = {name: _file(tmp_path, name, name) for name in ("ann", "bob", "cleo", "dan")}
    together = threading.Barrier(len(paths))
    found = {}

    def read(name):
        with sqlite_files.opening(paths[name]), sqlite_files.ENGINE.get().connect() as db:
            together.wait(timeout=10)  # every thread's connection is open at this moment
            found[name] = db.execute(text("SELECT id FROM student")).scalar_one()

    threads = [threading.Thread(target=read, args=(name,)) for name in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == {name: name for name in paths}


def test_a_connection_outside_any_block_is_refused(tmp_path):
    with pytest.raises(Exception, match="outside sqlite_files.opening"):
        sqlite_files.ENGINE.get().connect()
