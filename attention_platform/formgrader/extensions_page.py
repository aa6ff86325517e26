"""Students' extensions in the formgrader (behind formgrader_gate.py, role ``extensions``: instructors,
and TAs when COURSE_TAS_GRANT_EXTENSIONS allows it, checked on the server for every request).

* ``formgrader/extensions``: every assignment with its due date, its late policy and how many students
  have an extension, each leading to its page;
* ``formgrader/extensions/<assignment>``: the extensions in force, a form to grant one student a later
  deadline with a reason (or revoke theirs), an accommodations list uploaded as CSV
  (``student,assignment,due|extra_hours,reason``: all rows or none), and the change log — who, when,
  what, why — of the assignment. POST carries ``action`` = grant, revoke or import (the server's XSRF
  check covers the forms). A change is saved by attention_platform/deadlines/extensions.py and the
  students' deadline files are written again at once, so their Lab shows it.

A value that cannot be used is answered with the page, the sentence saying what to change, and nothing
saved. Times on these pages are UTC.
"""

from __future__ import annotations

import asyncio
import datetime as dt

from tornado import web

from attention_platform.deadlines import late_policy, student_file
from attention_platform.deadlines.extensions import ExtensionError, ExtensionStore, parse_time
from attention_platform.deadlines.late_policy import LatePolicyError
from attention_platform.deadlines.standing import Deadlines

DONE = {
    "granted": "Granted. The student's Lab shows the new deadline.",
    "revoked": "Revoked. The student's deadline is the class's again.",
    "imported": "Imported: every row of the list was granted.",
}
UPLOAD_FIELD = "accommodations"


def utc_text(value: dt.datetime | None) -> str:
    return "" if value is None else value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def new_deadline(due_text: str, extra_hours_text: str, class_due: dt.datetime | None) -> dt.datetime:
    """The new deadline from the form: a UTC date and time (the browser's datetime-local field), or a
    number of hours added to the class's deadline. ExtensionError says what to change."""
    due_text, extra_hours_text = due_text.strip(), extra_hours_text.strip()
    if bool(due_text) == bool(extra_hours_text):
        raise ExtensionError("give either a new deadline or a number of extra hours (one of the two)")
    if due_text:
        return parse_time(due_text if due_text[-1:] in "Zz" or "+" in due_text[10:] else due_text + "Z")
    try:
        extra = float(extra_hours_text)
    except ValueError:
        raise ExtensionError(f"extra hours must be a number, not {extra_hours_text[:40]!r}") from None
    if not 0 < extra <= 24 * 366:
        raise ExtensionError("extra hours must be more than 0 and at most a year's (8784)")
    if class_due is None:
        raise ExtensionError("this assignment has no due date to add hours to: give the new deadline itself")
    return class_due + dt.timedelta(hours=extra)


def change_log(history: list[dict], assignment: str) -> list[dict]:
    """The assignment's changes, newest first, as the page shows them."""
    rows = []
    for entry in reversed(history):
        if entry.get("assignment") != assignment:
            continue
        what = (f"granted until {_shown_time(entry.get('due'))}" if entry.get("action") == "grant"
                else "revoked" if entry.get("action") == "revoke" else str(entry.get("action", "")))
        rows.append({"at": _shown_time(entry.get("at")), "by": str(entry.get("by", "")),
                     "student": str(entry.get("student", "")), "what": what, "why": str(entry.get("reason") or "")})
    return rows


def publish(course_root: str, changed: list[tuple[str, str]], now: dt.datetime) -> None:
    """Write the deadline file of each (assignment, student) changed, the course's deadlines read once."""
    deadlines = Deadlines(course_root)
    for assignment, student in changed:
        student_file.publish(course_root, assignment, student, now, deadlines=deadlines)


def _shown_time(text) -> str:
    try:
        return utc_text(parse_time(str(text)))
    except ExtensionError:
        return str(text or "")


def _handlers():
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    from attention_platform.deadlines.due_dates import due_dates

    class ExtensionsIndexHandler(BaseHandler):
        @web.authenticated
        def get(self):
            store, rows, error = ExtensionStore(self.coursedir.root), [], ""
            try:
                policies = late_policy.policies(self.coursedir.root)
            except LatePolicyError as exc:
                policies, error = {}, str(exc)
            for name, due in sorted(due_dates(self.gradebook).items()):
                try:
                    count = len(store.all(name))
                except ExtensionError as exc:
                    count, error = 0, str(exc)
                policy = policies.get(name)
                rows.append({"assignment": name, "due": utc_text(due) or "no due date", "extensions": count,
                             "policy": policy.describe() if policy else "none (nbgrader's: late submissions are "
                                                                         "marked late)"})
            self.write(self.render("attention_extensions_index.tpl", base_url=self.base_url, rows=rows, error=error))

    class ExtensionsPageHandler(BaseHandler):
        def _class_due(self, assignment: str) -> dt.datetime | None:
            found = due_dates(self.gradebook)
            if assignment not in found:
                raise web.HTTPError(404, f"the gradebook has no assignment {assignment!r}")
            return found[assignment]

        def _show(self, assignment: str, *, error: str = "", errors=(), values: dict | None = None, done: str = ""):
            store = ExtensionStore(self.coursedir.root)
            extensions, history = [], []
            try:
                extensions = store.all(assignment)
                history = store.history()
            except ExtensionError as exc:
                error = error or str(exc)
            try:
                policy = late_policy.policy_for(self.coursedir.root, assignment)
            except LatePolicyError as exc:
                policy, error = None, error or str(exc)
            self.write(self.render(
                "attention_extensions.tpl", base_url=self.base_url, assignment=assignment,
                class_due=utc_text(self._class_due(assignment)), policy=policy.describe() if policy else "",
                extensions=[{"student": e.student, "due": utc_text(e.due), "reason": e.reason,
                             "granted_by": e.granted_by, "granted_at": utc_text(e.granted_at)} for e in extensions],
                log=change_log(history, assignment), students=sorted(s.id for s in self.gradebook.students),
                error=error, errors=list(errors), values=values or {}, done=done, xsrf=self.xsrf_token.decode(),
                upload_field=UPLOAD_FIELD))

        @web.authenticated
        def get(self, assignment):
            self._class_due(assignment)
            self._show(assignment, done=DONE.get(self.get_query_argument("done", ""), ""))

        @web.authenticated
        async def post(self, assignment):
            class_due = self._class_due(assignment)
            action = self.get_body_argument("action", "")
            by, now = self.current_user.username, dt.datetime.now(dt.timezone.utc)  # the hub's user, the server's clock
            store = ExtensionStore(self.coursedir.root)
            values = {key: self.get_body_argument(key, "")[:600] for key in ("student", "due", "extra_hours", "reason")}
            changed: list[tuple[str, str]] = []
            try:
                if action == "grant":
                    due = new_deadline(values["due"], values["extra_hours"], class_due)
                    if values["student"].strip() not in {s.id for s in self.gradebook.students}:
                        raise ExtensionError(f"there is no student {values['student'].strip()[:128]!r} in the gradebook")
                    store.grant(assignment, values["student"].strip(), due, values["reason"], by, now)
                    changed = [(assignment, values["student"].strip())]
                elif action == "revoke":
                    if store.revoke(assignment, values["student"].strip(), by, now) is None:
                        raise ExtensionError(f"{values['student'].strip()[:128]!r} has no extension to revoke")
                    changed = [(assignment, values["student"].strip())]
                elif action == "import":
                    files = self.request.files.get(UPLOAD_FIELD) or []
                    text = files[0]["body"] if files else self.get_body_argument("csv", "").encode()
                    report = store.import_csv(text, by, now, due_dates(self.gradebook))
                    if not report.ok:
                        self.set_status(400)
                        self._show(assignment, error="Nothing was imported: the list has rows that cannot be used.",
                                   errors=report.errors[:200])
                        return
                    changed = [(e.assignment, e.student) for e in report.granted]
                else:
                    raise web.HTTPError(400, "action must be grant, revoke or import")
            except ExtensionError as exc:
                self.set_status(400)
                self._show(assignment, error=str(exc), values=values)
                return
            # the students' deadline files (a list may name many): off the server's only thread
            await asyncio.get_running_loop().run_in_executor(None, publish, self.coursedir.root, changed, now)
            done = {"grant": "granted", "revoke": "revoked", "import": "imported"}[action]
            self.redirect(f"{self.base_url}/formgrader/extensions/{assignment}?done={done}", status=303)

    return ExtensionsIndexHandler, ExtensionsPageHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    index_handler, page_handler = _handlers()
    return [
        (join(base_url, r"formgrader/extensions/?"), index_handler),
        (join(base_url, rf"formgrader/extensions/(?P<assignment>{_ID})/?"), page_handler),
    ]
