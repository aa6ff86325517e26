"""Every attempt graded on submit, in the course's gradebook database.

Two tables beside nbgrader's own (nbgrader never reads or migrates them; they work on SQLite
and PostgreSQL alike):

* ``attention_attempt``: one row per submission the grader saw while feedback on submit was
  on — when the exchange received it, its state (queued, grading, graded, refused, not graded,
  error), and once graded its points, each check's result, how long grading took and whether
  it is the attempt that counts for the grade;
* ``attention_feedback_on_submit``: per assignment, since when feedback on submit is on, so
  that turning it on does not grade every submission made before;
* ``attention_attempt_interrupted``: per attempt, how many times the grader's process ended
  while grading it (killed at its memory cap, say), so that an attempt which kills the grader
  is graded again once and then failed, never graded for ever.

The formgrader shows them (formgrader.py) and ``attention-course attempts`` exports them.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

from sqlalchemy import (Boolean, Column, DateTime, Float, Integer, MetaData, String, Table, Text, UniqueConstraint,
                        create_engine, insert, select, update)
from sqlalchemy.engine import make_url

from .policy import UTC

metadata = MetaData()

attempts = Table(
    "attention_attempt", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("assignment", String(128), nullable=False, index=True),
    Column("student", String(128), nullable=False, index=True),
    Column("submission", String(255), nullable=False),  # the folder's name in the student's inbound
    Column("claimed", String(64), nullable=False, default=""),  # the time the student's submit wrote
    Column("received_at", DateTime, nullable=False),  # the exchange's (kernel's) time, naive UTC
    Column("timestamp", DateTime, nullable=True),  # the time the gradebook records for it (see engine)
    Column("state", String(16), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("feedback", String(8), nullable=False),  # the policy's feedback level when it was graded
    Column("graded_at", DateTime, nullable=True),
    Column("seconds", Float, nullable=True),
    Column("score", Float, nullable=True),
    Column("max_score", Float, nullable=True),
    Column("checks", Text, nullable=False, default="[]"),  # JSON: [{id, notebook, title, passed, points}]
    Column("pages", Text, nullable=False, default="{}"),  # JSON: {notebook: feedback page file name}
    Column("counted", Boolean, nullable=False, default=False),
    UniqueConstraint("assignment", "student", "submission", name="attention_attempt_once"),
)

switches = Table(
    "attention_feedback_on_submit", metadata,
    Column("assignment", String(128), primary_key=True),
    Column("on", Boolean, nullable=False),
    Column("since", DateTime, nullable=False),
)

interruptions = Table(
    "attention_attempt_interrupted", metadata,
    Column("attempt", Integer, primary_key=True),
    Column("times", Integer, nullable=False),
)

FIELDS = [column.name for column in attempts.columns]


def naive(value: dt.datetime | None) -> dt.datetime | None:
    """Naive UTC, as nbgrader's gradebook stores times."""
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def row_dict(row) -> dict:
    data = dict(row._mapping)
    for key in ("received_at", "timestamp", "graded_at"):
        if data.get(key) is not None:
            data[key] = data[key].replace(tzinfo=UTC)
    data["checks"] = json.loads(data.get("checks") or "[]")
    data["pages"] = json.loads(data.get("pages") or "{}")
    return data


class Ledger:
    """The attempts tables of one gradebook database (thread-safe: one short transaction per call).

    ``remember=True`` is for the one process that writes the attempts (the feedback-on-submit
    grader): a student's rows are read from the database once, then kept as it writes them, so
    the work of one more attempt (its status, its turn, what counts) never reads the rows of the
    attempts before it again."""

    def __init__(self, db_url: str, *, remember: bool = False):
        self.engine = create_engine(db_url, future=True)
        self.lock = threading.Lock()
        self.remember = remember
        self._rows: dict[tuple[str, str], list[dict]] = {}  # (assignment, student) -> their rows, in order
        self._key_of: dict[int, tuple[str, str]] = {}  # attempt id -> its (assignment, student) in _rows
        metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ switching on
    def enabled_since(self, assignment: str, on: bool, now: dt.datetime,
                      first: dt.datetime | None = None) -> dt.datetime | None:
        """Since when feedback on submit has been on for ``assignment`` (recording a switch now; the
        first one ever recorded for it, as on since ``first`` when given)."""
        with self.lock, self.engine.begin() as db:
            row = db.execute(select(switches).where(switches.c.assignment == assignment)).first()
            if row is None:
                since = naive(first or now)
                db.execute(insert(switches).values(assignment=assignment, on=on, since=since))
            elif bool(row.on) != on:
                db.execute(update(switches).where(switches.c.assignment == assignment).values(on=on, since=naive(now)))
                since = naive(now)
            else:
                since = row.since
        return since.replace(tzinfo=UTC) if on else None

    # ------------------------------------------------------------------ attempts
    def add(self, **values) -> int:
        for key in ("received_at", "timestamp", "graded_at"):
            values[key] = naive(values.get(key))
        for key in ("checks", "pages"):
            if not isinstance(values.get(key, ""), str):
                values[key] = json.dumps(values[key])
        with self.lock, self.engine.begin() as db:
            attempt_id = db.execute(insert(attempts).values(**values)).inserted_primary_key[0]
            key = (values.get("assignment"), values.get("student"))
            if key in self._rows:
                self._rows[key].append(self._read_row(db, attempt_id))
                self._rows[key].sort(key=lambda row: (row["received_at"], row["id"]))
                self._key_of[attempt_id] = key
        return attempt_id

    def set(self, attempt_id: int, **values) -> None:
        for key in ("received_at", "timestamp", "graded_at"):
            if key in values:
                values[key] = naive(values[key])
        for key in ("checks", "pages"):
            if key in values and not isinstance(values[key], str):
                values[key] = json.dumps(values[key])
        with self.lock, self.engine.begin() as db:
            db.execute(update(attempts).where(attempts.c.id == attempt_id).values(**values))
            key = self._key_of.get(attempt_id)
            if key is not None:
                remembered = self._rows[key]
                at = next(i for i, row in enumerate(remembered) if row["id"] == attempt_id)
                remembered[at] = self._read_row(db, attempt_id)

    @staticmethod
    def _read_row(db, attempt_id: int) -> dict:
        return row_dict(db.execute(select(attempts).where(attempts.c.id == attempt_id)).one())

    def interrupted(self, attempt_id: int) -> int:
        """Record that the grader's process ended while grading ``attempt_id``; how many times it has."""
        with self.lock, self.engine.begin() as db:
            row = db.execute(select(interruptions).where(interruptions.c.attempt == attempt_id)).first()
            times = (row.times if row else 0) + 1
            if row is None:
                db.execute(insert(interruptions).values(attempt=attempt_id, times=times))
            else:
                db.execute(update(interruptions).where(interruptions.c.attempt == attempt_id).values(times=times))
        return times

    def set_counted(self, assignment: str, student: str, attempt_id: int | None) -> None:
        """Mark ``attempt_id`` as the one that counts for the student (and no other)."""
        with self.lock, self.engine.begin() as db:
            db.execute(update(attempts).where(attempts.c.assignment == assignment, attempts.c.student == student,
                                              attempts.c.counted.is_(True)).values(counted=False))
            if attempt_id is not None:
                db.execute(update(attempts).where(attempts.c.id == attempt_id).values(counted=True))
            for row in self._rows.get((assignment, student), ()):
                row["counted"] = row["id"] == attempt_id

    def attempts(self, assignment: str | None = None, student: str | None = None) -> list[dict]:
        key = (assignment, student)
        if self.remember and assignment is not None and student is not None:
            with self.lock:
                if key in self._rows:
                    return [dict(row) for row in self._rows[key]]
        query = select(attempts)
        if assignment is not None:
            query = query.where(attempts.c.assignment == assignment)
        if student is not None:
            query = query.where(attempts.c.student == student)
        with self.lock, self.engine.begin() as db:
            rows = [row_dict(row) for row in db.execute(query.order_by(attempts.c.received_at, attempts.c.id)).all()]
            if self.remember and assignment is not None and student is not None:
                self._rows[key] = rows
                self._key_of.update((row["id"], key) for row in rows)
                rows = [dict(row) for row in rows]
        return rows

    def known(self, assignment: str) -> set[tuple[str, str]]:
        with self.lock, self.engine.begin() as db:
            rows = db.execute(select(attempts.c.student, attempts.c.submission)
                              .where(attempts.c.assignment == assignment)).all()
        return {(row.student, row.submission) for row in rows}


EXPORT_COLUMNS = ("assignment", "student", "attempt", "received_at", "timestamp", "state", "score", "max_score",
                  "counted", "graded_at", "seconds", "submission", "message")


def export_csv(db_url: str, out, assignment: str | None = None) -> int:
    """Every attempt as CSV rows to the text stream ``out`` (``attention-course attempts``); returns
    how many. ``attempt`` numbers each student's attempts of an assignment from 1, as their tab does;
    times are UTC, ``received_at`` the exchange's (the kernel's) and ``timestamp`` the gradebook's."""
    import csv

    if _missing_sqlite_file(db_url):
        rows = []  # nothing released or submitted yet; creating the file is nbgrader's (with its tables)
    else:
        ledger = Ledger(db_url)
        try:
            rows = ledger.attempts(assignment)
        finally:
            ledger.close()
    writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    numbers: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (row["assignment"], row["student"])
        numbers[key] = numbers.get(key, 0) + 1
        writer.writerow({**row, "attempt": numbers[key], "counted": int(bool(row["counted"])),
                         **{k: row[k].strftime("%Y-%m-%d %H:%M:%S.%f") if row[k] else ""
                            for k in ("received_at", "timestamp", "graded_at")}})
    return len(rows)


def _missing_sqlite_file(db_url: str) -> bool:
    url = make_url(db_url)
    return url.get_backend_name() == "sqlite" and bool(url.database) and url.database != ":memory:" \
        and not Path(url.database).exists()
