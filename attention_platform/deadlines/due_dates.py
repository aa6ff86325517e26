"""The gradebook's due dates (the deadline every student has unless an extension moves theirs), its
submission times (the late days a student has spent) and its students, read without writing anything.

nbgrader's ``Gradebook`` creates its tables and course row when opened; every standing would then
be a write. This module reads the two tables with one query each, on one engine per database.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

UTC = dt.timezone.utc
_engines: dict = {}
_engines_lock = threading.Lock()


def default_db_url(course_dir) -> str:
    """The gradebook nbgrader uses for ``course_dir`` (the deployment's database, else the course's file)."""
    from attention_platform.settings import settings

    return settings().nbgrader_db_url or "sqlite:///" + str(Path(course_dir).resolve() / "gradebook.db")


def aware(value: dt.datetime | None) -> dt.datetime | None:
    """nbgrader's naive-UTC datetimes as aware ones."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def due_dates(gradebook) -> dict[str, dt.datetime | None]:
    """``{assignment: due date (aware UTC) or None}`` of every assignment in an open nbgrader Gradebook."""
    return {row.name: aware(row.duedate) for row in gradebook.assignments}


def _engine(db_url: str):
    from sqlalchemy import create_engine

    with _engines_lock:
        if db_url not in _engines:
            _engines[db_url] = create_engine(db_url, future=True)
        return _engines[db_url]


def _rows(db_url: str, query: str, **values) -> list:
    """The query's rows; [] while there is no gradebook (or no nbgrader tables) yet."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError, ProgrammingError

    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).exists():
        return []  # connecting would create an empty file
    try:
        with _engine(db_url).connect() as connection:
            return list(connection.execute(text(query), values))
    except (OperationalError, ProgrammingError):
        return []


def read_due_dates(db_url: str) -> dict[str, dt.datetime | None]:
    """:func:`due_dates` of the gradebook at ``db_url`` ({} when it does not exist yet)."""
    return {name: aware(_datetime(due)) for name, due in _rows(db_url, "SELECT name, duedate FROM assignment")}


def read_students(db_url: str) -> list[str]:
    """The gradebook's students (the course's roster), sorted."""
    return sorted(student for (student,) in _rows(db_url, "SELECT id FROM student"))


def read_submitted(db_url: str, assignments: list[str]) -> dict[tuple[str, str], dt.datetime]:
    """``{(assignment, student): time}`` of the gradebook's submissions of ``assignments``."""
    found = {}
    for assignment in assignments:
        rows = _rows(db_url, "SELECT submitted_assignment.student_id, submitted_assignment.timestamp "
                             "FROM submitted_assignment JOIN assignment "
                             "ON submitted_assignment.assignment_id = assignment.id WHERE assignment.name = :name",
                     name=assignment)
        found.update({(assignment, student): aware(_datetime(when)) for student, when in rows if when is not None})
    return found


def _datetime(value) -> dt.datetime | None:
    """SQLite hands a DateTime column back as text to a plain query."""
    if value is None or isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromisoformat(str(value))
