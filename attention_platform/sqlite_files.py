"""One SQLAlchemy engine for many SQLite files of one schema: the gradebooks set aside per attempt.

A SQLAlchemy engine compiles each statement once and keeps it, but only for itself: an engine made
per file compiles every statement again for every file (nbgrader's ``Gradebook`` also looks at every
table's columns when it makes one). Feedback on submit reads one gradebook file per graded attempt
(its own copy, set aside), so an engine per file would compile every query again for every attempt.

:func:`opening` names the file for the calling thread until its block ends; :data:`ENGINE`'s
connections are made on demand (no pool: none outlives its block or serves another file) and open
the file the thread named. Statements compiled for one file serve every other: the files share the
schema and the dialect, which is all a compiled statement depends on.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading

PREFIX = "sqlite:///"

_named = threading.local()


def path_of(db_url: str) -> str | None:
    """The file of a ``sqlite:///`` URL that exists; None for another URL or no file (nbgrader makes
    the tables of a new gradebook on its own engine)."""
    if not db_url.startswith(PREFIX) or "?" in db_url:
        return None
    path = db_url[len(PREFIX):]
    return path if path and os.path.isfile(path) else None


@contextlib.contextmanager
def opening(path: str):
    """Connections that this thread makes from :data:`ENGINE` until the block ends open ``path``."""
    outer = getattr(_named, "path", None)
    _named.path = path
    try:
        yield
    finally:
        _named.path = outer


def _connect() -> sqlite3.Connection:
    path = getattr(_named, "path", None)
    if path is None:
        raise RuntimeError("a shared SQLite engine was used outside sqlite_files.opening()")
    # as SQLAlchemy's own SQLite dialect connects; the connection stays in this thread's block
    return sqlite3.connect(path, check_same_thread=False)


def _engine():
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    return create_engine("sqlite://", creator=_connect, poolclass=NullPool)


class _Engine:
    """The shared engine, made on first use (importing SQLAlchemy only then)."""

    def __init__(self):
        self._made = None
        self._lock = threading.Lock()

    def get(self):
        with self._lock:
            if self._made is None:
                self._made = _engine()
            return self._made


ENGINE = _Engine()


def gradebook(gradebook_class, path: str, course_id: str):
    """nbgrader's ``Gradebook`` (``gradebook_class``: the class itself, which a grader may have
    replaced by another callable in nbgrader's modules) of the existing file ``path`` on the shared
    engine (its tables are there: none is made). Use it inside ``opening(path)``; end it with its
    session's ``remove()`` (its ``close()`` would dispose of the shared engine's pool)."""
    from sqlalchemy.orm import scoped_session, sessionmaker

    gb = gradebook_class.__new__(gradebook_class)  # what Gradebook.__init__ (nbgrader 0.9) sets, on ENGINE
    gb.engine = ENGINE.get()
    gb.db = scoped_session(sessionmaker(autoflush=True, bind=gb.engine, future=True))
    gb.authenticator = None
    gb.check_course(course_id=course_id)
    gb.course_id = course_id
    return gb
