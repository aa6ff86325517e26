"""The gradebook's due dates: the deadline every student has unless an extension moves theirs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

UTC = dt.timezone.utc


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


def read_due_dates(db_url: str) -> dict[str, dt.datetime | None]:
    """:func:`due_dates` of the gradebook at ``db_url`` ({} when it does not exist yet)."""
    from nbgrader.api import Gradebook

    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).exists():
        return {}  # opening would create an empty gradebook
    with Gradebook(db_url) as gradebook:
        return due_dates(gradebook)
