"""The formgrader's Reports page (TAs and instructors; behind formgrader_gate.py).

* ``formgrader/reports``: per assignment of the gradebook, links to what the course's commands
  produce (attention_platform/reporting/commands.py), made on request by this process (the grader
  account, never root) from the gradebook as it is now;
* ``formgrader/reports/<assignment>/<file>``: ``misconceptions.html`` (the misconception report,
  reporting/report.py, shown in the browser; ``?download=1`` saves it), ``check_breakdown.csv`` and
  ``canvas_grades.csv`` (reporting/exports.py) and ``attempts.csv`` (every feedback-on-submit attempt,
  attempts/ledger.py), each downloaded.

The report is built by ``render_html``, which escapes everything a student or the gradebook wrote;
it is served with the gate's Content-Security-Policy, under which its embedded data block never runs.
Reports are made one at a time on a worker thread (matplotlib is not thread-safe), so the
formgrader's other pages keep answering meanwhile.
"""

from __future__ import annotations

import asyncio
import io
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tornado import web

_REPORTS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reports")
FILES = {
    "misconceptions.html": "the misconception report",
    "check_breakdown.csv": "per-check breakdown (one row per student and check)",
    "canvas_grades.csv": "Canvas gradebook import",
    "attempts.csv": "every feedback-on-submit attempt",
}
_FILE = "(?P<name>" + "|".join(name.replace(".", r"\.") for name in FILES) + ")"


def misconception_report(db_url: str, assignment: str, course_root: str) -> str:
    from attention_platform.reporting.report import collect, render_html

    return render_html(collect(db_url, assignment, course=Path(course_root), stream=io.StringIO()))


def export_csv(kind: str, db_url: str, assignment: str, course_root: str) -> bytes:
    """One export of ``assignment``, as the ``attention-course export-*`` commands write it."""
    from attention_platform.reporting.exports import CanvasExportPlugin, CheckBreakdownExportPlugin, run_export

    plugin, traits = ((CanvasExportPlugin, {}) if kind == "canvas_grades.csv" else
                      (CheckBreakdownExportPlugin, {"course_root": str(Path(course_root).resolve())}))
    with tempfile.TemporaryDirectory(prefix="attention-export-") as folder:
        to = Path(folder) / kind
        run_export(plugin, db_url, to=str(to), assignments=[assignment], stream=io.StringIO(), **traits)
        return to.read_bytes()


def attempts_csv(db_url: str, assignment: str) -> bytes:
    from attention_platform.attempts.ledger import export_csv as export_attempts

    out = io.StringIO(newline="")
    export_attempts(db_url, out, assignment)
    return out.getvalue().encode("utf-8")


def make(name: str, db_url: str, assignment: str, course_root: str) -> tuple[str, bytes]:
    """``(content type, body)`` of the file ``name`` of ``assignment``."""
    if name == "misconceptions.html":
        return "text/html; charset=utf-8", misconception_report(db_url, assignment, course_root).encode("utf-8")
    if name == "attempts.csv":
        return "text/csv; charset=utf-8", attempts_csv(db_url, assignment)
    return "text/csv; charset=utf-8", export_csv(name, db_url, assignment, course_root)


def _handlers():
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    class ReportsPageHandler(BaseHandler):
        @web.authenticated
        def get(self):
            assignments = sorted(a.name for a in self.gradebook.assignments)
            self.write(self.render("attention_reports.tpl", base_url=self.base_url, assignments=assignments))

    class ReportFileHandler(BaseHandler):
        @web.authenticated
        async def get(self, assignment, name):
            from attention_platform.reporting.report import ReportError

            if assignment not in {a.name for a in self.gradebook.assignments}:
                raise web.HTTPError(404, f"the gradebook has no assignment {assignment!r}")
            try:
                kind, body = await asyncio.get_running_loop().run_in_executor(
                    _REPORTS, make, name, self.coursedir.db_url, assignment, self.coursedir.root)
            except ReportError as exc:
                self.set_status(409)
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.finish(f"The {FILES[name]} of {assignment} cannot be made: {exc}\n")
                return
            self.set_header("Content-Type", kind)
            if name != "misconceptions.html" or self.get_query_argument("download", ""):
                self.set_header("Content-Disposition", f'attachment; filename="{assignment}_{name}"')
            self.set_header("Cache-Control", "no-store")
            self.finish(body)

    return ReportsPageHandler, ReportFileHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    page, files = _handlers()
    return [
        (join(base_url, r"formgrader/reports/?"), page),
        (join(base_url, rf"formgrader/reports/(?P<assignment>{_ID})/{_FILE}"), files),
    ]
