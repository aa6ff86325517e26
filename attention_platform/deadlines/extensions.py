"""Per-student extensions: a later deadline for one student on one assignment, with why and by whom.

The current extensions are in ``<course>/extensions.json`` (``{assignment: {student: {due, reason,
granted_by, granted_at}}}``); every change is also appended to ``<course>/extensions.log``, one JSON
line each (who, when, what, why), which nothing rewrites: the record of every grant and revocation.
Both are the grader account's (see attention_platform/attempts/course_files.py); a change holds a
lock on the log, so two instructors saving at once both land, one after the other.

An extension can be granted after the deadline passed: what a student submitted in between is
judged against the new deadline wherever it is judged (standing.py).
"""

from __future__ import annotations

import csv
import datetime as dt
import fcntl
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from attention_platform.attempts.course_files import CourseFileError, append_line, read_bytes, read_object, write_object
from .due_dates import UTC, aware

STATE_FILE = "extensions.json"
LOG_FILE = "extensions.log"
MAX_STATE_BYTES = 4 << 20  # a few thousand extensions
MAX_LOG_BYTES = 32 << 20  # the whole record of a course's changes
MAX_CSV_BYTES = 256 * 1024  # an accommodations list of a large class is a few kB
MAX_CSV_ROWS = 5000
MAX_REASON = 500
MAX_EXTRA_HOURS = 24 * 366
CSV_COLUMNS = ("student", "assignment", "due", "extra_hours", "reason")
# one path component, no control characters: it names a file in the student's feedback folder
_NAME = re.compile(r"[^\x00-\x1f\x7f/\\]{1,128}")


class ExtensionError(ValueError):
    """An extension cannot be granted or revoked as asked; the message says why (for the form)."""


@dataclass(frozen=True)
class Extension:
    assignment: str
    student: str
    due: dt.datetime  # aware, UTC
    reason: str
    granted_by: str
    granted_at: dt.datetime

    def to_json(self) -> dict:
        return {"assignment": self.assignment, "student": self.student, "due": _iso(self.due),
                "reason": self.reason, "granted_by": self.granted_by, "granted_at": _iso(self.granted_at)}


@dataclass
class ImportReport:
    """What an accommodations CSV did: the extensions granted, or (and then nothing was) every bad row."""

    granted: list[Extension] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "line 3: ..." for each bad row

    @property
    def ok(self) -> bool:
        return not self.errors


def _iso(value: dt.datetime) -> str:
    return aware(value).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 time with its zone (``2026-12-01T23:59:00+01:00`` or ``...Z``) as aware UTC."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ExtensionError(f"{text!r} is not a date and time such as 2026-12-01T23:59:00+01:00") from None
    if value.tzinfo is None:
        raise ExtensionError(f"{text!r} has no time zone: add one, such as +01:00 or Z for UTC")
    return value.astimezone(UTC)


def check_name(what: str, name) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.strip() != name or name in (".", ".."):
        raise ExtensionError(f"{name!r} is not a {what} name")
    return name


def check_reason(reason) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ExtensionError("give a reason: it is kept for the record")
    reason = " ".join(reason.split())
    if len(reason) > MAX_REASON:
        raise ExtensionError(f"the reason is {len(reason)} characters long; at most {MAX_REASON} are kept")
    return reason


class ExtensionStore:
    def __init__(self, course_dir):
        self.course_dir = Path(course_dir)
        self.state_path = self.course_dir / STATE_FILE
        self.log_path = self.course_dir / LOG_FILE

    # ------------------------------------------------------------------ reading
    def _state(self) -> dict:
        try:
            return read_object(self.state_path, MAX_STATE_BYTES)
        except CourseFileError as exc:
            raise ExtensionError(str(exc)) from None

    @staticmethod
    def _extension(assignment: str, student: str, saved) -> Extension:
        try:
            return Extension(assignment, student, parse_time(saved["due"]), str(saved["reason"]),
                             str(saved["granted_by"]), parse_time(saved["granted_at"]))
        except (KeyError, TypeError, ExtensionError) as exc:
            raise ExtensionError(f"the extension of {student!r} on {assignment!r} in {STATE_FILE} is unusable "
                                 f"({exc}); revoke and grant it again") from None

    def get(self, assignment: str, student: str) -> Extension | None:
        saved = self._state().get(assignment, {})
        return self._extension(assignment, student, saved[student]) if isinstance(saved, dict) and student in saved \
            else None

    def all(self, assignment: str) -> list[Extension]:
        """``assignment``'s extensions, by student."""
        saved = self._state().get(assignment, {})
        if not isinstance(saved, dict):
            raise ExtensionError(f"{STATE_FILE}: the extensions of {assignment!r} are not a JSON object")
        return [self._extension(assignment, student, saved[student]) for student in sorted(saved)]

    def everything(self) -> dict[tuple[str, str], Extension]:
        """``{(assignment, student): extension}`` of the whole course."""
        found = {}
        for assignment in self._state():
            for extension in self.all(assignment):
                found[(assignment, extension.student)] = extension
        return found

    def history(self) -> list[dict]:
        """Every change, oldest first: ``{at, by, action, assignment, student, due, reason}``."""
        import json

        try:
            data = read_bytes(self.log_path, MAX_LOG_BYTES) or b""
        except CourseFileError as exc:
            raise ExtensionError(str(exc)) from None
        found = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(entry, dict):
                found.append(entry)
        return found

    # ------------------------------------------------------------------ changing
    def _locked(self):
        """The log, open for appending and locked: one change at a time, across processes."""
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _apply(self, changes: list[tuple[str, Extension | tuple[str, str]]], by: str, now: dt.datetime) -> None:
        """Apply grants (Extension) and revocations ((assignment, student)) together, each logged."""
        fd = self._locked()
        try:
            state = self._state()
            for action, what in changes:
                if action == "grant":
                    state.setdefault(what.assignment, {})[what.student] = {
                        key: value for key, value in what.to_json().items() if key not in ("assignment", "student")}
                    line = {"action": "grant", "assignment": what.assignment, "student": what.student,
                            "due": _iso(what.due), "reason": what.reason}
                else:
                    assignment, student = what
                    state.get(assignment, {}).pop(student, None)
                    if not state.get(assignment, True):
                        del state[assignment]
                    line = {"action": "revoke", "assignment": assignment, "student": student}
                append_line(self.log_path, {"at": _iso(now), "by": by, **line})
            write_object(self.state_path, state)
        finally:
            os.close(fd)  # releases the lock

    def grant(self, assignment: str, student: str, due: dt.datetime, reason: str, by: str,
              now: dt.datetime) -> Extension:
        """Give ``student`` until ``due`` on ``assignment`` (replacing an extension they had)."""
        if not isinstance(due, dt.datetime) or due.tzinfo is None:
            raise ExtensionError("the new deadline needs a time zone")
        extension = Extension(check_name("assignment", assignment), check_name("student", student),
                              due.astimezone(UTC), check_reason(reason), check_name("user", by), aware(now))
        self._apply([("grant", extension)], by, now)
        return extension

    def revoke(self, assignment: str, student: str, by: str, now: dt.datetime) -> Extension | None:
        """Take back ``student``'s extension on ``assignment``: the one revoked, or None if there was none."""
        existing = self.get(assignment, student)
        if existing is not None:
            self._apply([("revoke", (assignment, student))], check_name("user", by), now)
        return existing

    def import_csv(self, text: str | bytes, by: str, now: dt.datetime,
                   due_dates: dict[str, dt.datetime | None] | None = None) -> ImportReport:
        """Grant every row of an accommodations list, or none when any row is bad.

        Columns (a header row names them, in any order): ``student``, ``assignment``, either ``due``
        (an ISO 8601 time with its zone) or ``extra_hours`` (added to the assignment's due date in
        ``due_dates``, the gradebook's), and ``reason``.
        """
        report = ImportReport()
        if isinstance(text, bytes):
            if len(text) > MAX_CSV_BYTES:
                report.errors.append(f"the file is {len(text) // 1024} kB; at most {MAX_CSV_BYTES // 1024} kB "
                                     f"are read")
                return report
            try:
                text = text.decode("utf-8-sig")
            except UnicodeDecodeError:
                report.errors.append("the file is not UTF-8 text: save it as CSV (UTF-8)")
                return report
        if len(text) > MAX_CSV_BYTES:
            report.errors.append(f"the file is longer than {MAX_CSV_BYTES // 1024} kB")
            return report
        try:
            check_name("user", by)
        except ExtensionError as exc:
            report.errors.append(str(exc))
            return report
        rows = csv.reader(io.StringIO(text.lstrip("\ufeff")))
        try:
            header = [name.strip().lower() for name in next(rows)]
        except StopIteration:
            report.errors.append("the file is empty: its first line names the columns "
                                 "student,assignment,due,reason (or extra_hours instead of due)")
            return report
        except csv.Error as exc:
            report.errors.append(f"line 1: {exc}")
            return report
        missing = [c for c in ("student", "assignment", "reason") if c not in header]
        if "due" not in header and "extra_hours" not in header:
            missing.append("due or extra_hours")
        unknown = [c for c in header if c not in CSV_COLUMNS]
        if missing or unknown or len(set(header)) != len(header):
            report.errors.append("line 1: the columns must be student, assignment, due (or extra_hours) and reason"
                                 + (f"; missing: {', '.join(missing)}" if missing else "")
                                 + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                                 + ("; a column is named twice" if len(set(header)) != len(header) else ""))
            return report
        seen: dict[tuple[str, str], int] = {}
        granted = []
        try:
            for values in rows:
                line = rows.line_num
                if not any(v.strip() for v in values):
                    continue
                if len(granted) + len(report.errors) >= MAX_CSV_ROWS:
                    report.errors.append(f"line {line}: more than {MAX_CSV_ROWS} rows; split the file")
                    break
                try:
                    granted.append(self._row(dict(zip(header, values)), len(values) == len(header), by, now,
                                             due_dates, seen, line))
                except ExtensionError as exc:
                    report.errors.append(f"line {line}: {exc}")
        except csv.Error as exc:
            report.errors.append(f"line {rows.line_num}: {exc}")
        if not report.errors and not granted:
            report.errors.append("the file has no rows below its header")
        if report.errors:
            return report
        self._apply([("grant", extension) for extension in granted], by, now)
        report.granted = granted
        return report

    @staticmethod
    def _row(row: dict, whole: bool, by: str, now: dt.datetime, due_dates, seen: dict, line: int) -> Extension:
        if not whole:
            raise ExtensionError("this row does not have one value for each column")
        student = check_name("student", row["student"].strip())
        assignment = check_name("assignment", row["assignment"].strip())
        if due_dates is not None and assignment not in due_dates:
            raise ExtensionError(f"there is no assignment {assignment!r} in the gradebook")
        if (assignment, student) in seen:
            raise ExtensionError(f"{student!r} on {assignment!r} is already on line {seen[(assignment, student)]}")
        seen[(assignment, student)] = line
        due_text, extra_text = row.get("due", "").strip(), row.get("extra_hours", "").strip()
        if bool(due_text) == bool(extra_text):
            raise ExtensionError("give either a due time or extra_hours, not both and not neither")
        if due_text:
            due = parse_time(due_text)
        else:
            try:
                extra = float(extra_text)
            except ValueError:
                raise ExtensionError(f"extra_hours must be a number, not {extra_text!r}") from None
            if not 0 < extra <= MAX_EXTRA_HOURS:
                raise ExtensionError(f"extra_hours must be more than 0 and at most {MAX_EXTRA_HOURS}")
            base = (due_dates or {}).get(assignment)
            if base is None:
                raise ExtensionError(f"{assignment!r} has no due date in the gradebook to add extra_hours to")
            due = base + dt.timedelta(hours=extra)
        return Extension(assignment, student, due, check_reason(row["reason"]), by, aware(now))
