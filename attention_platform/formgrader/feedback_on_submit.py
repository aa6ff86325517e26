"""Feedback on submit in the formgrader (TAs and instructors; behind formgrader_gate.py).

* ``formgrader/feedback_on_submit``: a page — per assignment the instructor's policy as the
  course configuration says it now (or why it cannot be used), and per student every attempt:
  when the exchange received it, its state, points, how long grading took, and the one that
  counts; a link to the student's submission in the formgrader.
* ``formgrader/api/attention/attempts/<assignment>``: the same as JSON (the policy and every
  attempt row of the gradebook).

The page is built here with every value escaped and carries no script at all; the policy is
read from the course's ``nbgrader_config.py`` at each request, as the grader re-reads it.
"""

from __future__ import annotations

import html
import json

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
            assignments = [a.name for a in self.gradebook.assignments]
            found = policies(self.coursedir.root, assignments)
            rows = _ledger(self.coursedir.db_url).attempts()
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.write(page(self.base_url, found, rows))

    return AttemptsPageHandler, AttemptsApiHandler


def _cell(value) -> str:
    return f"<td>{html.escape(str(value))}</td>"


def page(base_url: str, found: dict, rows: list[dict]) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Feedback on submit</title>",
        f"<link rel='stylesheet' href='{e(base_url)}/formgrader/static/node_modules/bootstrap/dist/css/bootstrap.min.css'>",
        "<style>body{margin:1.5rem} td,th{padding:.2rem .6rem} tr.counted{font-weight:600} "
        ".policy{max-width:60rem} .error{color:#a94442}</style></head><body>",
        f"<p><a href='{e(base_url)}/formgrader'>← Formgrader</a></p><h1>Feedback on submit</h1>",
        "<p class='policy'>Set per assignment in the course's <code>nbgrader_config.py</code> "
        "(<code>c.FeedbackOnSubmit.policies</code>); the grader applies a change within a second. "
        "Points below are the hidden checks' (written answers are graded here, by hand).</p>",
    ]
    for assignment, policy in found.items():
        parts.append(f"<h2 id='{e(assignment)}'>{e(assignment)}</h2>")
        if isinstance(policy, str):
            parts.append(f"<p class='policy error'>Not in force: {e(policy)}</p>")
        else:
            parts.append(f"<p class='policy' data-feedback='{e(policy.feedback)}' data-counts='{e(policy.counts)}'>"
                         f"{e(policy.describe())}</p>")
        mine = [row for row in rows if row["assignment"] == assignment]
        if not mine:
            parts.append("<p>No attempts.</p>")
            continue
        graded = [row for row in mine if row["state"] == "graded"]
        seconds = sorted(row["seconds"] for row in graded if row["seconds"] is not None)
        if seconds:
            parts.append(f"<p>{len(mine)} attempts, {len(graded)} graded by {len({r['student'] for r in graded})} "
                         f"students; grading took {seconds[len(seconds) // 2]:.1f} s (median), "
                         f"{seconds[-1]:.1f} s at most.</p>")
        parts.append("<table class='table table-condensed attempts'><thead><tr><th>student</th><th>attempt</th>"
                     "<th>received (UTC)</th><th>state</th><th>points</th><th>grading</th><th>counts</th>"
                     "<th>note</th></tr></thead><tbody>")
        numbers: dict[str, int] = {}
        for row in sorted(mine, key=lambda r: (r["student"], r["received_at"], r["id"])):
            numbers[row["student"]] = numbers.get(row["student"], 0) + 1
            points = "" if row["score"] is None else f"{row['score']:g} / {row['max_score']:g}"
            took = "" if row["seconds"] is None else f"{row['seconds']:.1f} s"
            student = (f"<td><a href='{e(base_url)}/formgrader/manage_students/{e(row['student'])}/{e(assignment)}'>"
                       f"{e(row['student'])}</a></td>")
            parts.append(f"<tr class='{'counted' if row['counted'] else ''}' data-student='{e(row['student'])}' "
                         f"data-state='{e(row['state'])}'>{student}{_cell(numbers[row['student']])}"
                         f"{_cell(row['received_at'].strftime('%Y-%m-%d %H:%M:%S'))}{_cell(row['state'])}"
                         f"{_cell(points)}{_cell(took)}{_cell('yes' if row['counted'] else '')}"
                         f"{_cell(row['message'][:300])}</tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "".join(parts)


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    page_handler, api_handler = _handlers()
    return [
        (join(base_url, r"formgrader/feedback_on_submit/?"), page_handler),
        (join(base_url, rf"formgrader/api/attention/attempts/(?P<assignment_id>{_ID})/?"), api_handler),
    ]
