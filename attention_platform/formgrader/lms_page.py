"""Grades sent to the LMS, and the roster sync's changes, as a page of the formgrader (behind formgrader_gate.py).

``formgrader/lms``: GET shows TAs and instructors every score in the outbox (attention_platform/lms/outbox.py):
the points, when it was sent, the LMS's answer, what waits for a retry; and what the last roster syncs
changed. ``formgrader/lms/resend`` (POST, instructors only: the gate checks the role for every request,
the server's XSRF check covers the form) sends one student's score again. Nothing here posts to the LMS
itself: the worker does, on its next pass. A student's request never reaches this page (the gate's
default deny and its roles), so nothing a student sends changes what the LMS receives.
"""

from __future__ import annotations

import datetime as dt

from tornado import web

from attention_platform.lms.outbox import Outbox, outbox_path

STATES = {"queued": "waiting to be sent", "retrying": "the LMS did not answer; will retry",
          "sent": "sent", "refused": "refused by the LMS"}


def when(seconds: float | None) -> str:
    if not seconds:
        return ""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _handlers():
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    from attention_platform.formgrader.formgrader_gate import INSTRUCTOR, role_of

    class LmsPageHandler(BaseHandler):
        @web.authenticated
        def get(self):
            path = outbox_path(self.coursedir.root)
            rows, changes = [], []
            if path.is_file():
                outbox = Outbox(path)
                try:
                    rows = [dict(row, state_text=STATES.get(row["state"], row["state"]),
                                 sent=when(row["sent_at"]), next=when(row["next_try"]) if row["state"] == "retrying"
                                 else "") for row in outbox.rows()]
                    changes = [dict(row, at_text=when(row["at"])) for row in outbox.roster_changes()]
                finally:
                    outbox.close()
            done = {"resent": "The score will be sent again on the worker's next pass."}
            self.write(self.render("attention_lms.tpl", base_url=self.base_url, rows=rows, changes=changes,
                                   configured=path.is_file(), editable=role_of(self.current_user) == INSTRUCTOR,
                                   xsrf=self.xsrf_token.decode(), done=done.get(self.get_query_argument("done", ""), "")))

    class ResendHandler(BaseHandler):
        @web.authenticated
        def post(self):
            assignment = self.get_body_argument("assignment", "")[:128]
            student = self.get_body_argument("student", "")[:128]
            path = outbox_path(self.coursedir.root)
            if not path.is_file():
                raise web.HTTPError(404, "this course sends no grades to an LMS")
            outbox = Outbox(path)
            try:
                if not outbox.resend(assignment, student):
                    raise web.HTTPError(404, "the outbox has no score of that student for that assignment")
            finally:
                outbox.close()
            self.redirect(f"{self.base_url}/formgrader/lms?done=resent", status=303)

    return LmsPageHandler, ResendHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    page, resend = _handlers()
    return [(join(base_url, r"formgrader/lms/?"), page), (join(base_url, r"formgrader/lms/resend/?"), resend)]
