"""The student's side of feedback on submit, in their own Jupyter server (runs as the student).

* ``GET <base>attention/feedback-on-submit?course_id=<course>``: every status the grader wrote
  into the student's feedback folder (see :mod:`attention_platform.attempts.status`), for their
  Assignments tab, which shows each attempt's state and result and when the next graded attempt
  is possible; and beside them each deadline the grader wrote there (:mod:`attention_platform.attempts.deadline_file`),
  with this server's clock (``now``) for the time left, and the answer's ``version``. With
  ``since=<version>&wait=<seconds>`` (at most ``WAIT_MOST``) the request is held until the answer
  differs from that version, or the seconds have passed (:func:`changed_answer`): the tab learns of a
  result the moment the grader writes it, with one request per change;
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

import asyncio
import hashlib
import json
import os
import re
import stat
import time

from attention_platform.attempts import deadline_file
from attention_platform.attempts import status as status_file
from attention_platform.attempts.policy import now
from attention_platform.attempts.refusal import feedback_folder, refused_submit
from attention_platform.lab import folder_changes

PAGE = re.compile(r"[0-9a-f]{32}\.html\Z")
ASSIGNMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
VERSION = re.compile(r"[0-9a-f]{32}\Z")


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


WAIT_MOST = 30.0  # s: the longest a status request is held, well inside any proxy's idle time-out
LOOK_EVERY = 0.2  # s between two looks at the folder's entries while a request is held without a watch
READ_EVERY = 2.0  # s between two full reads while held without a watch: a file replaced within one tick
#                  of the file system's clock, with the same size and a reused inode, shows no new entry
WATCHED_READ_EVERY = 10.0  # s between two full reads while held with a watch: in case an event was lost
GONE_EVERY = 1.0  # s between two looks at whether the tab went away, while held with a watch


def answer(folder: str, course_id: str) -> dict:
    """What the Assignments tab is told, without the server's clock: the statuses, the deadlines, and
    the ``version`` of the two (a digest: equal versions, equal answers)."""
    content = {"course_id": course_id, "assignments": statuses(folder), "deadlines": deadlines(folder)}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:32]
    return {**content, "version": digest}


def entries(folder: str) -> tuple:
    """What changes whenever the grader replaces a status or a deadline (each is written to a new
    file, then renamed over the old one): each such entry's name, inode, time and size."""
    found = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.name.startswith((status_file.PREFIX, deadline_file.PREFIX)):
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    found.append((entry.name, info.st_ino, info.st_mtime_ns, info.st_size))
    except OSError:
        pass
    return tuple(sorted(found))


async def changed_answer(folder: str, course_id: str, since: str | None, wait: float, *, gone=lambda: False,
                         clock=time.monotonic) -> dict:
    """The :func:`answer`, once its version is not ``since`` or ``wait`` seconds (at most ``WAIT_MOST``)
    have passed, whichever comes first; ``gone()`` true ends the wait early (the tab went away).
    While waiting, the folder is read when the grader writes a status or a deadline into it
    (:mod:`.folder_changes`) and every ``WATCHED_READ_EVERY`` seconds anyway; where it cannot be
    watched, its entries are looked at every ``LOOK_EVERY`` seconds and read in full when they
    change, and every ``READ_EVERY`` seconds anyway (as for the rest of a wait whose watched folder was
    removed or moved away)."""
    async with folder_changes.watch(folder) as changes:  # before the first read: no write goes unseen
        seen = entries(folder) if changes is None else ()
        current = answer(folder, course_id)
        end = clock() + min(max(wait, 0.0), WAIT_MOST)
        last_read = clock()
        while since is not None and current["version"] == since and not gone():
            left = end - clock()
            if left <= 0:
                break
            if changes is not None and not changes.gone:  # gone: this request goes on on the timer
                news = await changes.news(min(WATCHED_READ_EVERY - (clock() - last_read), left, GONE_EVERY))
                if news or clock() - last_read >= WATCHED_READ_EVERY:
                    last_read = clock()
                    current = answer(folder, course_id)
                continue
            await asyncio.sleep(min(LOOK_EVERY, left))
            now_seen = entries(folder)
            if now_seen != seen or clock() - last_read >= READ_EVERY:
                seen, last_read = now_seen, clock()
                current = answer(folder, course_id)
    return current


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
        closed = False

        @web.authenticated
        async def get(self):
            course_id = self.get_argument("course_id", settings.course_id())
            if not ASSIGNMENT.match(course_id or ""):
                raise web.HTTPError(400, "course_id must be a course id")
            since = self.get_argument("since", None)
            if since is not None and not VERSION.match(since):
                raise web.HTTPError(400, "since must be the version of an earlier answer")
            try:
                wait = float(self.get_argument("wait", "0"))
            except ValueError:
                raise web.HTTPError(400, "wait must be a number of seconds") from None
            if not 0 <= wait <= WAIT_MOST:
                raise web.HTTPError(400, f"wait must be between 0 and {WAIT_MOST:g} seconds")
            folder = feedback_folder(_exchange_root(), course_id)
            current = await changed_answer(folder, course_id, since, wait, gone=lambda: self.closed)
            if self.closed:
                return
            self.set_header("Cache-Control", "no-store")
            self.finish(json.dumps({**current, "now": now().isoformat()}))

        def on_connection_close(self):
            self.closed = True
            super().on_connection_close()

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
