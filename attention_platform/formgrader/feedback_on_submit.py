"""Feedback on submit in the formgrader (TAs and instructors; behind formgrader_gate.py).

* ``formgrader/feedback_on_submit``: a page in the formgrader's layout — per assignment the policy
  in force (what the students are told, and a link to its form, policy_form.py), and per student
  every attempt: when the exchange received it, its state, points, how long grading took, which one
  is the counting attempt, and a link to each notebook of any attempt whose files are kept; the
  attempts as CSV (reports.py).
* ``formgrader/attempts/<assignment>/<student>/<attempt>/<notebook>``: that notebook of that attempt
  as the grader graded it, rendered like the formgrader's submissions (student content sanitised).
* ``formgrader/api/attention/attempts/<assignment>``: the policy and every attempt row as JSON.

The policy is read at each request, as the grader re-reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tornado import web

from attention_platform.attempts.ledger import Ledger
from attention_platform.attempts.policy import FeedbackOnSubmit, Policy, PolicyError, iso

_LEDGERS: dict[str, Ledger] = {}


def _ledger(db_url: str) -> Ledger:
    if db_url not in _LEDGERS:
        _LEDGERS[db_url] = Ledger(db_url)
    return _LEDGERS[db_url]


def policies(course_root: str, assignments: list[str]) -> dict[str, Policy | str]:
    """``{assignment: Policy or the sentence saying why the instructor's cannot be used}``."""
    from attention_platform.attempts.policy import load_config

    try:
        settings = FeedbackOnSubmit(config=load_config(course_root))
    except Exception as exc:  # noqa: BLE001 - shown on the page, as the grader logs it
        return {a: f"the course's nbgrader_config.py cannot be loaded ({exc})" for a in assignments}
    found: dict[str, Policy | str] = {}
    for assignment in sorted(set(assignments) | set(settings.assignments())):
        try:
            found[assignment] = settings.policy_for(assignment)
        except PolicyError as exc:
            found[assignment] = str(exc)
    return found


def _json_row(row: dict) -> dict:
    return {**row, "received_at": iso(row["received_at"]), "timestamp": iso(row["timestamp"]),
            "graded_at": iso(row["graded_at"])}


def kept_notebooks(course_root: str, row: dict, notebooks: list[str]) -> list[str]:
    """The assignment's notebooks whose graded copy of this attempt is still kept."""
    from attention_platform.feedback_on_submit.engine import WORK, archived_attempt

    folder = archived_attempt(Path(course_root) / WORK, row["student"], row["assignment"], row["id"]) / "autograded"
    return [name for name in notebooks if (folder / f"{name}.ipynb").is_file()]


def sections(course_root: str, found: dict, rows: list[dict], notebooks: dict[str, list[str]]) -> list[dict]:
    """Per assignment, what the attempts page shows: the policy, a summary line, and each attempt
    (numbered per student from 1, in the order the exchange received them)."""
    out = []
    for assignment, policy in found.items():
        mine = sorted((row for row in rows if row["assignment"] == assignment),
                      key=lambda r: (r["student"], r["received_at"], r["id"]))
        graded = [row for row in mine if row["state"] == "graded"]
        seconds = sorted(row["seconds"] for row in graded if row["seconds"] is not None)
        summary = ""
        if seconds:
            summary = (f"{len(mine)} attempts, {len(graded)} graded, by {len({r['student'] for r in graded})} "
                       f"students; grading took {seconds[len(seconds) // 2]:.1f} s (median), "
                       f"{seconds[-1]:.1f} s at most.")
        numbers: dict[str, int] = {}
        attempts = []
        for row in mine:
            numbers[row["student"]] = numbers.get(row["student"], 0) + 1
            attempts.append({
                **row, "number": numbers[row["student"]],
                "received": row["received_at"].strftime("%Y-%m-%d %H:%M:%S"),
                "points": "" if row["score"] is None else f"{row['score']:g} / {row['max_score']:g}",
                "took": "" if row["seconds"] is None else f"{row['seconds']:.1f} s",
                "note": row["message"][:300],
                "notebooks": kept_notebooks(course_root, row, notebooks.get(assignment, [])),
            })
        out.append({"assignment": assignment, "policy": policy if isinstance(policy, Policy) else None,
                    "error": policy if isinstance(policy, str) else "", "summary": summary, "attempts": attempts})
    return out


def _handlers():
    from nbgrader.server_extensions.formgrader.base import BaseApiHandler, BaseHandler

    class AttemptsApiHandler(BaseApiHandler):
        @web.authenticated
        def get(self, assignment_id):
            policy = policies(self.coursedir.root, [assignment_id])[assignment_id]
            rows = _ledger(self.coursedir.db_url).attempts(assignment_id)
            self.write(json.dumps({
                "assignment": assignment_id,
                "policy": policy.to_json() if isinstance(policy, Policy) else {"error": policy},
                "attempts": [_json_row(row) for row in rows],
            }))

    class AttemptsPageHandler(BaseHandler):
        @web.authenticated
        def get(self):
            notebooks = {a.name: [nb.name for nb in a.notebooks] for a in self.gradebook.assignments}
            found = policies(self.coursedir.root, list(notebooks))
            rows = _ledger(self.coursedir.db_url).attempts()
            self.write(self.render("attention_attempts.tpl", base_url=self.base_url,
                                   sections=sections(self.coursedir.root, found, rows, notebooks)))

    class AttemptNotebookHandler(BaseHandler):
        @web.authenticated
        def get(self, assignment, student, attempt, notebook):
            from attention_platform.bounded_json import TooComplex, read_notebook
            from attention_platform.feedback_on_submit.engine import WORK, archived_attempt
            from attention_platform.reporting.safe_html import SafeHTMLExporter

            row = next((r for r in _ledger(self.coursedir.db_url).attempts(assignment, student)
                        if r["id"] == int(attempt)), None)
            if row is None:
                raise web.HTTPError(404, f"{student} has no attempt {attempt} at {assignment}")
            known = {nb.name for a in self.gradebook.assignments if a.name == assignment for nb in a.notebooks}
            if notebook not in known or notebook not in kept_notebooks(self.coursedir.root, row, [notebook]):
                raise web.HTTPError(404, f"the graded {notebook} of this attempt is not kept (the grader keeps "
                                         f"the newest attempts' files and the counting attempt's)")
            path = archived_attempt(Path(self.coursedir.root) / WORK, student, assignment, row["id"])
            try:
                graded = read_notebook(path / "autograded" / f"{notebook}.ipynb")
            except TooComplex as exc:
                raise web.HTTPError(409, f"this attempt's {notebook} is not shown here: {exc}") from None
            body, _ = SafeHTMLExporter().from_notebook_node(graded)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.write(body)

    return AttemptsPageHandler, AttemptsApiHandler, AttemptNotebookHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    page_handler, api_handler, notebook_handler = _handlers()
    return [
        (join(base_url, r"formgrader/feedback_on_submit/?"), page_handler),
        (join(base_url, rf"formgrader/api/attention/attempts/(?P<assignment_id>{_ID})/?"), api_handler),
        (join(base_url, rf"formgrader/attempts/(?P<assignment>{_ID})/(?P<student>{_ID})/(?P<attempt>[0-9]{{1,12}})/"
                        rf"(?P<notebook>{_ID})/?"), notebook_handler),
    ]
