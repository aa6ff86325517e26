"""The similarity report in the formgrader (TAs and instructors; behind formgrader_gate.py).

* ``formgrader/similarity``: the course's assignments, each a link to its report;
* ``formgrader/similarity/<assignment>``: the report (attention_platform/reporting/similarity.py), built
  at each request from the submissions the formgrader has collected and the gradebook's failing checks.

The gate checks the role on the server before any of this runs: a student gets its 403 and nothing of
the report, not even whether it exists. The comparison runs in a thread, so the formgrader keeps
answering while it works; the pages carry no script.
"""

from __future__ import annotations

import asyncio
import html

from tornado import web


def _handlers():
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    from attention_platform.reporting import similarity

    class SimilarityIndexHandler(BaseHandler):
        @web.authenticated
        def get(self):
            e = html.escape
            names = sorted(a.name for a in self.gradebook.assignments)
            links = "".join(f"<li><a href='{e(self.base_url)}/formgrader/similarity/{e(name)}'>{e(name)}</a></li>"
                            for name in names) or "<li>No assignment yet.</li>"
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.write("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Similar answers</title>"
                       "<style>body{margin:1.5rem;font-family:sans-serif}</style></head><body>"
                       f"<p><a href='{e(self.base_url)}/formgrader'>← Formgrader</a></p><h1>Similar answers</h1>"
                       f"<p class='notice'>{e(similarity.NOTICE)}</p><ul>{links}</ul></body></html>")

    class SimilarityReportHandler(BaseHandler):
        @web.authenticated
        async def get(self, assignment_id):
            if assignment_id not in {a.name for a in self.gradebook.assignments}:
                raise web.HTTPError(404, "no such assignment in the gradebook")
            root, db_url = self.coursedir.root, self.coursedir.db_url
            try:
                data = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: similarity.collect(root, assignment_id, db_url=db_url))
            except similarity.SimilarityError as exc:
                self.set_status(409)
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.finish(f"{exc}\n")
                return
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.write(similarity.render_html(data, back=f"{self.base_url}/formgrader/similarity"))

    return SimilarityIndexHandler, SimilarityReportHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    index, report = _handlers()
    return [
        (join(base_url, r"formgrader/similarity/?"), index),
        (join(base_url, rf"formgrader/similarity/(?P<assignment_id>{_ID})/?"), report),
    ]
