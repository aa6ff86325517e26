"""The outbox of scores for the LMS: what is to be sent, what was sent, when, and the LMS's answer.

A SQLite file of the grader's (``lms-outbox.sqlite`` in the course directory, mode 0600), written by the
grader's processes only: a student's server cannot reach it, and no page of the hub writes to it.
One row per (assignment, student) holds the newest score and the last one the LMS accepted:

* ``queue`` puts a score in; the same score as the one last accepted (or already waiting) is a no-op,
  so passing the gradebook over and over sends each score once;
* ``due`` lists what is waiting and due; ``delivered`` / ``failed`` / ``refused`` record the LMS's
  answer: an LMS that is down or slow (``failed``) is tried again after 30 s, doubling up to an hour;
  a refusal for good (``refused``: an unknown user, a scope the tool lacks) waits for ``resend``;
* ``released`` notes that a TA released a student's feedback, which makes that score one to send.

Nothing here talks to the LMS: posting is the worker's (passback.py), so grading never waits for it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

FIRST_RETRY_SECONDS = 30.0
MAX_RETRY_SECONDS = 3600.0
ANSWER_CHARS = 500
WAITING = ("queued", "retrying")

SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    assignment TEXT NOT NULL, student TEXT NOT NULL, user_id TEXT NOT NULL,
    score REAL NOT NULL, maximum REAL NOT NULL, pending_manual INTEGER NOT NULL,
    state TEXT NOT NULL, tries INTEGER NOT NULL DEFAULT 0, next_try REAL NOT NULL DEFAULT 0,
    queued_at REAL NOT NULL, sent_at REAL, answer TEXT NOT NULL DEFAULT '',
    sent_score REAL, sent_maximum REAL, sent_pending_manual INTEGER,
    PRIMARY KEY (assignment, student));
CREATE TABLE IF NOT EXISTS released (
    assignment TEXT NOT NULL, student TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (assignment, student));
CREATE TABLE IF NOT EXISTS line_items (assignment TEXT PRIMARY KEY, url TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    user TEXT PRIMARY KEY, lms_id TEXT NOT NULL, groups TEXT NOT NULL, active INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS roster_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, user TEXT NOT NULL, lms_id TEXT NOT NULL,
    change TEXT NOT NULL);
"""


def retry_delay(tries: int) -> float:
    return min(FIRST_RETRY_SECONDS * 2 ** max(tries - 1, 0), MAX_RETRY_SECONDS)


class Outbox:
    def __init__(self, path: str | os.PathLike, clock=time.time):
        self.path, self.clock = Path(path), clock
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def queue(self, assignment: str, student: str, user_id: str, score: float, maximum: float,
              pending_manual: bool) -> bool:
        """Put a score in the outbox; False when it is the one already sent or already waiting."""
        row = self.db.execute("SELECT * FROM scores WHERE assignment = ? AND student = ?",
                              (assignment, student)).fetchone()
        value = (float(score), float(maximum), int(pending_manual))
        if row is not None and row["user_id"] == user_id:
            if row["state"] == "sent" and (row["sent_score"], row["sent_maximum"], row["sent_pending_manual"]) == value:
                return False
            if row["state"] != "sent" and (row["score"], row["maximum"], row["pending_manual"]) == value:
                return False  # waiting, or refused: resend() is the instructor's
        now = self.clock()
        self.db.execute(
            "INSERT INTO scores (assignment, student, user_id, score, maximum, pending_manual, state, tries, "
            "next_try, queued_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?) "
            "ON CONFLICT (assignment, student) DO UPDATE SET user_id = excluded.user_id, score = excluded.score, "
            "maximum = excluded.maximum, pending_manual = excluded.pending_manual, state = 'queued', tries = 0, "
            "next_try = excluded.next_try, queued_at = excluded.queued_at",
            (assignment, student, user_id, *value, now, now))
        return True

    def due(self) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM scores WHERE state IN (?, ?) AND next_try <= ? ORDER BY next_try",
                               (*WAITING, self.clock())).fetchall()

    def delivered(self, row: sqlite3.Row, answer: str) -> None:
        self.db.execute(
            "UPDATE scores SET state = 'sent', sent_at = ?, answer = ?, tries = tries + 1, sent_score = ?, "
            "sent_maximum = ?, sent_pending_manual = ? WHERE assignment = ? AND student = ? AND queued_at = ?",
            (self.clock(), answer[:ANSWER_CHARS], row["score"], row["maximum"], row["pending_manual"],
             row["assignment"], row["student"], row["queued_at"]))

    def failed(self, row: sqlite3.Row, answer: str) -> None:
        tries = row["tries"] + 1
        self.db.execute("UPDATE scores SET state = 'retrying', tries = ?, next_try = ?, answer = ? "
                        "WHERE assignment = ? AND student = ? AND queued_at = ?",
                        (tries, self.clock() + retry_delay(tries), answer[:ANSWER_CHARS], row["assignment"],
                         row["student"], row["queued_at"]))

    def refused(self, row: sqlite3.Row, answer: str) -> None:
        self.db.execute("UPDATE scores SET state = 'refused', tries = tries + 1, answer = ? "
                        "WHERE assignment = ? AND student = ? AND queued_at = ?",
                        (answer[:ANSWER_CHARS], row["assignment"], row["student"], row["queued_at"]))

    def resend(self, assignment: str, student: str) -> bool:
        """Send this score again now (the instructor's Resend); False when the outbox has none."""
        changed = self.db.execute("UPDATE scores SET state = 'queued', tries = 0, next_try = ?, queued_at = ? "
                                  "WHERE assignment = ? AND student = ?",
                                  (self.clock(), self.clock(), assignment, student)).rowcount
        return bool(changed)

    def rows(self, assignment: str | None = None) -> list[sqlite3.Row]:
        where, args = ("WHERE assignment = ?", (assignment,)) if assignment else ("", ())
        return self.db.execute(f"SELECT * FROM scores {where} ORDER BY assignment, student", args).fetchall()

    def note_release(self, assignment: str, student: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO released (assignment, student, at) VALUES (?, ?, ?)",
                        (assignment, student, self.clock()))

    def released(self) -> set[tuple[str, str]]:
        return {(r["assignment"], r["student"]) for r in self.db.execute("SELECT * FROM released")}

    def line_item(self, assignment: str) -> str | None:
        row = self.db.execute("SELECT url FROM line_items WHERE assignment = ?", (assignment,)).fetchone()
        return row["url"] if row else None

    def keep_line_item(self, assignment: str, url: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO line_items (assignment, url) VALUES (?, ?)", (assignment, url))

    def keep_member(self, user: str, lms_id: str, groups: list[str], active: bool) -> None:
        self.db.execute("INSERT OR REPLACE INTO members (user, lms_id, groups, active) VALUES (?, ?, ?, ?)",
                        (user, lms_id, ",".join(groups), int(active)))

    def lms_id(self, user: str) -> str | None:
        """The LMS's id of hub user ``user`` as the last roster sync found it (None: not in the roster)."""
        row = self.db.execute("SELECT lms_id FROM members WHERE user = ?", (user,)).fetchone()
        return row["lms_id"] if row else None

    def members(self) -> dict[str, sqlite3.Row]:
        return {row["user"]: row for row in self.db.execute("SELECT * FROM members")}

    def note_roster_change(self, user: str, lms_id: str, change: str) -> None:
        self.db.execute("INSERT INTO roster_changes (at, user, lms_id, change) VALUES (?, ?, ?, ?)",
                        (self.clock(), user, lms_id, change))

    def roster_changes(self, limit: int = 200) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM roster_changes ORDER BY id DESC LIMIT ?", (limit,)).fetchall()


OUTBOX_NAME = "lms-outbox.sqlite"


def outbox_path(course_root) -> Path:
    return Path(course_root) / OUTBOX_NAME


def note_release(course_root, assignment: str, student: str) -> None:
    """Mark a student's feedback released (their score is then one to send); nothing when the course
    sends no grades to an LMS (no outbox: the worker makes it when it first starts). Here rather than
    beside the worker: the exchange's release calls it, in images that carry no LMS client."""
    path = outbox_path(course_root)
    if not path.is_file():
        return
    outbox = Outbox(path)
    try:
        outbox.note_release(assignment, student)
    finally:
        outbox.close()
