"""The student's side of feedback on submit, in their own Jupyter server (runs as the student).

* ``GET <base>attention/feedback-on-submit?course_id=<course>``: every status the grader wrote
  into the student's feedback folder (see :mod:`attention_platform.attempts.status`), for their
  Assignments tab, which shows each attempt's state and result and when the next graded attempt
  is possible; and beside them each deadline the grader wrote there (:mod:`attention_platform.attempts.deadline_file`),
  with this server's clock (``now``) for the time left;
* ``GET <base>attention/feedback-on-submit/page/<assignment>/<attempt>/<notebook>.html``: the
  feedback page of one notebook of their attempt number ``<attempt>`` (1 is the first), straight
  from that folder, as HTML with a policy that lets no script run; a page's links to the other
  notebooks (``<notebook>.html``, relative) therefore lead to the same attempt's pages;
* the Assignments tab's Submit (nbgrader's ``AssignmentList.submit_assignment``, in this server)
  answers with :func:`~attention_platform.attempts.refusal.refused_submit`'s sentence instead of handing in an attempt
  the grader would not grade, and with its reason and next time apart (``refusal``), for the Lab's dialog;
  the exchange's submit (``attention_platform.exchange.submit.AtomicSubmit``) asks it too, for a
  terminal's ``nbgrader submit``.

This side only ever reads what the grader wrote; nothing here decides anything the grader relies
on. A student who edits this server's code gains nothing: the grader applies the policy again to
every submission it finds in their inbound folder.
"""

from __future__ import annotations

import json
import os
import re
import stat

from attention_platform.attempts import deadline_file
from attention_platform.attempts import status as status_file
from attention_platform.attempts.policy import now
from attention_platform.attempts.refusal import feedback_folder, refused_submit

PAGE = re.compile(r"[0-9a-f]{32}\.html\Z")
ASSIGNMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


def statuses(folder: str) -> dict:
    """``{assignment: status}`` of every status in ``folder``; an unreadable one is reported as such."""
    return by_assignment(folder, status_file)


def deadlines(folder: str) -> dict:
    """``{assignment: deadline file}`` of every deadline the grader wrote in ``folder`` (each read bounded,
    never through a link); an unreadable one is reported as such. The Lab works out what it means at
    the server's time from its effective deadline, cut-off and policy."""
    return by_assignment(folder, deadline_file)


def by_assignment(folder: str, kind) -> dict:
    """``{assignment: kind.read(folder, assignment)}`` of every ``<kind.PREFIX><assignment><kind.SUFFIX>``
    in ``folder``; an unreadable one as ``{"error": why}``."""
    found = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in sorted(names):
        if not (name.startswith(kind.PREFIX) and name.endswith(kind.SUFFIX)):
            continue
        assignment = name[len(kind.PREFIX):-len(kind.SUFFIX)]
        if not ASSIGNMENT.match(assignment):
            continue
        try:
            content = kind.read(folder, assignment)
        except ValueError as exc:
            content = {"error": str(exc)}
        if content is not None:
            found[assignment] = content
    return found


def attempt_page(status: dict, number: int, notebook: str) -> str | None:
    """The file name of ``notebook``'s feedback page of attempt ``number`` (1 is the first), if the
    grader listed one."""
    attempts = status.get("attempts") or []
    if not 1 <= number <= len(attempts):
        return None
    page = (attempts[number - 1].get("pages") or {}).get(notebook)
    return page if isinstance(page, str) and PAGE.match(page) else None


# --------------------------------------------------------------------------- the server extension

def _handlers():
    from jupyter_server.base.handlers import APIHandler, JupyterHandler
    from tornado import web

    from attention_platform import settings  # the course id, as everywhere (the student image carries it)

    class StatusHandler(APIHandler):
        @web.authenticated
        def get(self):
            course_id = self.get_argument("course_id", settings.course_id())
            if not ASSIGNMENT.match(course_id or ""):
                raise web.HTTPError(400, "course_id must be a course id")
            folder = feedback_folder(_exchange_root(), course_id)
            self.set_header("Cache-Control", "no-store")
            self.finish(json.dumps({"course_id": course_id, "now": now().isoformat(), "assignments": statuses(folder),
                                    "deadlines": deadlines(folder)}))

    class PageHandler(JupyterHandler):
        """A page, not an API answer: served as HTML (an APIHandler answers application/json)."""

        @web.authenticated
        def get(self, assignment, number, notebook):
            folder = feedback_folder(_exchange_root(), settings.course_id())
            page = attempt_page(statuses(folder).get(assignment) or {}, int(number), notebook)
            if page is None:
                raise web.HTTPError(404, "no such feedback page")
            try:
                fd = os.open(os.path.join(folder, page), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                raise web.HTTPError(404, "no such feedback page") from None
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    raise web.HTTPError(404, "no such feedback page")
                body = fh.read(20 << 20)
            # Student content, sanitised when the page was made; still: no script, no frames, no forms.
            self.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "
                            "img-src data:; font-src data:; sandbox; frame-ancestors 'self'")
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.set_header("X-Content-Type-Options", "nosniff")
            self.finish(body)

    return StatusHandler, PageHandler


def _exchange_root() -> str:
    from attention_platform.settings import settings

    return str(settings().nbgrader_exchange_root)


def _refused_submit(assignment_list, course_id, assignment_id) -> dict | None:
    """What nbgrader's ``AssignmentList.submit_assignment`` answers instead of submitting when
    :func:`~attention_platform.attempts.refusal.refused_submit` refuses; None lets it submit."""
    student = os.environ.get("JUPYTERHUB_USER", "")
    root = _exchange_root()
    if student and ASSIGNMENT.match(course_id or "") and ASSIGNMENT.match(assignment_id or ""):
        refused = refused_submit(root, course_id, assignment_id, os.path.join(root, course_id, "inbound"), student)
        if refused:
            assignment_list.log.info("feedback on submit: %s", refused.sentence)
            return {"success": False, "value": refused.sentence, "refusal": refused.to_json()}
    return None


def _jupyter_server_extension_points():
    return [{"module": "attention_platform.lab.feedback_on_submit"}]


def _load_jupyter_server_extension(serverapp):
    from jupyter_server.utils import url_path_join

    from attention_platform import third_party_patches

    third_party_patches.ask_before_submit(_refused_submit)

    status_handler, page_handler = _handlers()
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(base, "attention/feedback-on-submit"), status_handler),
        (url_path_join(base, r"attention/feedback-on-submit/page/([A-Za-z0-9][A-Za-z0-9_.-]{0,127})/([1-9][0-9]{0,5})/"
                             r"([A-Za-z0-9][A-Za-z0-9_.-]{0,127})\.html"), page_handler),
    ])
