"""What the formgrader adds for TAs and instructors, behind the gate (formgrader_gate.py).

* **Templates in front of nbgrader's**: ``formgrader_templates/`` is searched first; its
  ``base.tpl`` extends nbgrader's (``nbgrader/base.tpl``) and loads ``formgrader_static/
  attention.js`` with the user's role. The gate's nonce mechanism covers that folder too
  (``NonceScripts``), never what is rendered into a template.
* **attention.js** (no inline handlers): actions a role may not take are hidden, a refused
  request shows the server's "instructors only …" sentence, result dialogs lead with one line
  and fold the log (debug lines dropped), autograde shows which notebook it is on, and each
  student's state reads autograded / needs manual grading / feedback generated / released.
* **APIs** (both ``ta``): ``formgrader/api/attention/states/<assignment>`` — per student the
  state above, from the gradebook and the files; ``formgrader/api/attention/progress/
  <assignment>/<student>`` — the notebook being autograded.
* **Autograde off the event loop**: nbgrader's handler graded on the server's only thread, so
  nothing (not even progress) answered until it was done; here it runs on one worker thread
  (one submission at a time, as before: the sandbox broker connection is not shared).
* **The submission view** is rendered with ``attention_formgrade`` (a template extending
  nbgrader's ``formgrade``) and a summary of the notebook's checks at the top.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tornado import web

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "formgrader_templates"
STATIC = HERE / "formgrader_static"
FORMGRADE_TEMPLATES = HERE.parent / "reporting" / "templates"  # attention_formgrade/ (nbconvert)
_AUTOGRADE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autograde")


# --------------------------------------------------------------------------- templates

def install_templates(env) -> None:
    """Search our template folder first; nbgrader's stays reachable as ``nbgrader/<name>``."""
    from jinja2 import ChoiceLoader, FileSystemLoader, PrefixLoader

    if getattr(env, "_attention_templates", False):
        return
    nbgrader = env.loader
    env.loader = ChoiceLoader([FileSystemLoader(str(TEMPLATES)), PrefixLoader({"nbgrader": nbgrader}), nbgrader])
    env._attention_templates = True


def formgrade_exporter(config):
    """The submission view's exporter: nbgrader's formgrade template under ours (the check summary
    on top), student content sanitised. The template settings go in before the exporter is built:
    nbconvert reads them once."""
    from traitlets.config import Config

    from attention_platform.reporting.feedback import FormgradeSummary
    from attention_platform.reporting.safe_html import SafeHTMLExporter

    from nbgrader.server_extensions.formgrader.handlers import template_path

    config = Config(config)
    folders = list(config.HTMLExporter.get("extra_template_basedirs", []))
    config.HTMLExporter.extra_template_basedirs = folders + [str(FORMGRADE_TEMPLATES)]
    # ours extends 'formgrade/index.html.j2': nbgrader's template folder is searched by name too
    config.HTMLExporter.extra_template_paths = list(config.HTMLExporter.get("extra_template_paths", [])) + [template_path]
    config.HTMLExporter.template_name = "attention_formgrade"
    exporter = SafeHTMLExporter(config=config)
    exporter.register_preprocessor(FormgradeSummary(parent=exporter), enabled=True)
    return exporter


# --------------------------------------------------------------------------- handlers

class CourseStaticHandler(web.StaticFileHandler):
    """attention.js and attention.css: public code, no course data (like nbgrader's static)."""

    def initialize(self, path=str(STATIC), default_filename=None):
        super().initialize(path=path, default_filename=default_filename)

    def check_xsrf_cookie(self):
        pass


def _base():
    from nbgrader.server_extensions.formgrader.base import BaseApiHandler

    return BaseApiHandler


class SubmissionStatesHandler(_base()):
    """Per student of an assignment: where their submission stands."""

    @web.authenticated
    def get(self, assignment_id):
        self.write(json.dumps(submission_states(self.api, self.gradebook, self.coursedir, assignment_id)))


class AutogradeProgressHandler(_base()):
    """Which notebook of a student's submission is being autograded (null when none is)."""

    @web.authenticated
    def get(self, assignment_id, student_id):
        from attention_platform.grading import progress

        self.write(json.dumps(progress.current(assignment_id, student_id)))


def _autograde_then_unlock(api, assignment_id, student_id):
    """nbgrader's autograde of one submission; the course's grading lock is let go even when it
    failed (nbgrader then skips the hook that would have)."""
    from attention_platform.grading.course_lock import release_autograde_lock

    try:
        return api.autograde(assignment_id, student_id)
    finally:
        release_autograde_lock()


def threaded_autograde(handler_class):
    """nbgrader's AutogradeHandler, grading on the worker thread."""

    class ThreadedAutogradeHandler(handler_class):
        @web.authenticated
        async def post(self, assignment_id, student_id):
            from attention_platform.grading import progress

            api = self.api  # built here: it reads the course's config on this thread
            try:
                result = await asyncio.get_running_loop().run_in_executor(_AUTOGRADE, _autograde_then_unlock, api,
                                                                          assignment_id, student_id)
            finally:
                progress.clear(assignment_id, student_id)
            self.write(json.dumps(result))

    ThreadedAutogradeHandler.__name__ = ThreadedAutogradeHandler.__qualname__ = handler_class.__name__
    return ThreadedAutogradeHandler


# --------------------------------------------------------------------------- states

def _released_copy(coursedir, student: str, html: Path) -> Path | None:
    """Where PerStudentReleaseFeedback (exchange/exchange.py) puts this feedback page for the student."""
    from nbgrader.utils import notebook_hash

    secret_file = html.parent / "submission_secret.txt"
    config = coursedir.parent.config if coursedir.parent is not None else {}
    root = config.get("Exchange", {}).get("root", "")
    if not secret_file.is_file() or not root:
        return None
    checksum = notebook_hash(secret=secret_file.read_text(), notebook_id=html.stem)
    return Path(str(root)) / coursedir.course_id / "feedback" / student / f"{checksum}.html"


def submission_states(api, gradebook, coursedir, assignment_id: str) -> dict:
    """``{student: {...}}``: autograded, needs_manual_grade, waiting_points, feedback ("none",
    "generated", "outdated" — older than the autograde —, "released"), state (one phrase)."""
    states = {}
    for submission in api.get_submissions(assignment_id):
        student = submission["student"]
        autograded = bool(submission.get("autograded"))
        waiting = 0.0
        if autograded:
            try:
                for notebook in gradebook.find_submission(assignment_id, student).notebooks:
                    waiting += sum(float(g.max_score or 0) for g in notebook.grades
                                   if g.needs_manual_grade and g.manual_score is None)
            except Exception:  # noqa: BLE001 - a missing entry reads as nothing waiting
                pass
        feedback = "none"
        folder = Path(coursedir.format_path(coursedir.feedback_directory, student, assignment_id))
        pages = sorted(folder.glob("*.html")) if folder.is_dir() else []
        if pages:
            graded_dir = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment_id))
            newest_grade = max((p.stat().st_mtime for p in graded_dir.glob("*.ipynb")), default=0)
            feedback = "outdated" if min(p.stat().st_mtime for p in pages) < newest_grade else "generated"
            if feedback == "generated":
                copies = [_released_copy(coursedir, student, page) for page in pages]
                if copies and all(c is not None and c.is_file() and c.read_bytes() == p.read_bytes()
                                  for c, p in zip(copies, pages)):
                    feedback = "released"
        if not submission.get("timestamp") and not autograded:
            state = "no submission"
        elif not autograded:
            state = "needs autograding"
        elif feedback == "released":
            state = "feedback released"
        elif feedback == "generated":
            state = "feedback generated, not released"
        elif waiting:
            state = f"needs manual grading ({waiting:g} points)"
        else:
            state = "autograded" + (" (feedback out of date)" if feedback == "outdated" else "")
        states[student] = {"autograded": autograded, "needs_manual_grade": bool(submission.get("needs_manual_grade")),
                           "waiting_points": waiting, "feedback": feedback, "state": state,
                           "submitted": bool(submission.get("timestamp"))}
    return states


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID, _STATIC

    return [
        (join(base_url, rf"formgrader/attention/static/(?P<path>{_STATIC})"), CourseStaticHandler),
        (join(base_url, rf"formgrader/api/attention/states/(?P<assignment_id>{_ID})/?"), SubmissionStatesHandler),
        (join(base_url, rf"formgrader/api/attention/progress/(?P<assignment_id>{_ID})/(?P<student_id>{_ID})/?"),
         AutogradeProgressHandler),
    ]
