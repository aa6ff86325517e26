"""The course in a hub user's JupyterLab: what each role sees, honest Validate, tidy lists.

A Jupyter Server extension loaded by every hub user's server (``jupyter_config/student/``), next to
the Lab extension in ``attention_platform/lab/`` (plain JavaScript, no build step):

* the Lab's page config gets ``attentionCourse`` (role, course, the formgrader's address,
  whether ``~/course-source`` exists) and the list of nbgrader's Lab plugins this role must
  not see: nbgrader's menu (its Formgrader and Course List entries lead nowhere on a hub
  user's server) and its course list for everyone, its Validate (ours replaces it), its
  "Create Assignment" sidebar for everyone but instructors, its assignment list for TAs and
  instructors, who are not enrolled;
* ``POST <base>attention/validate`` (``path``, a form field or JSON) runs a notebook and answers
  :meth:`attention_platform.course.validation.ValidationReport.to_json`;
* nbgrader's assignment list is answered with each assignment's notebooks in its order (its main
  notebook, part 1, first: ``ATTENTION_NOTEBOOK_ORDER``, which the hub sets from the hidden checks'
  registry, the student's server being unable to read them; without it, the notebook named like the
  assignment, then the others by name) and submission times to the second (``exact_timestamp``
  keeps nbgrader's own value); after a submit that filed nothing new (the exchange's submit files
  nothing for files identical to the newest submission, see :mod:`attention_platform.exchange.submit`)
  the assignment's submitted entry says so (``nothing_new_filed``), and the Lab tells the student.

The role comes from the hub's groups at spawn (``ATTENTION_COURSE_ROLE``, set by the hub's
pre-spawn hook); it only decides what the Lab *shows*: every action is still checked by the
hub and the formgrader's gate.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import re
from pathlib import Path

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from attention_platform import third_party_patches
from attention_platform.lab import remembered_checksums, remembered_config
from attention_platform.settings import course_id, settings

STUDENT, TA, INSTRUCTOR = "student", "ta", "instructor"
LAB_EXTENSION_DIR = Path(__file__).resolve().parents[1] / "lab"

# nbgrader's Lab plugins each role does without (see the module docstring for why).
_EVERYONE = ("@jupyter/nbgrader:menu", "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:validate-assignment",
             "@jupyterlab/apputils-extension:announcements")
HIDDEN_PLUGINS = {
    STUDENT: _EVERYONE + ("@jupyter/nbgrader:create-assignment",),
    TA: _EVERYONE + ("@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:assignment-list"),
    INSTRUCTOR: _EVERYONE + ("@jupyter/nbgrader:assignment-list",),
}


def role() -> str:
    value = os.environ.get("ATTENTION_COURSE_ROLE", STUDENT)
    return value if value in HIDDEN_PLUGINS else STUDENT


def course_info(root_dir: str) -> dict:
    course = course_id()
    base = os.environ.get("JUPYTERHUB_BASE_URL", "/")
    return {
        "role": role(),
        "course": course,
        "formgraderUrl": url_path_join(base, "services", course, "formgrader") if role() != STUDENT else "",
        "courseSource": "course-source" if role() == INSTRUCTOR and (Path(root_dir) / "course-source").exists() else "",
        "notebookOrder": notebook_orders(),
    }


def page_config_hook(handler, page_config: dict) -> dict:
    disabled = page_config.get("disabledExtensions") or []
    if isinstance(disabled, dict):
        disabled = [name for name, off in disabled.items() if off]
    page_config["disabledExtensions"] = sorted(set(disabled) | set(HIDDEN_PLUGINS[role()]))
    page_config["attentionCourse"] = course_info(handler.settings.get("server_root_dir", os.getcwd()))
    return page_config


# --------------------------------------------------------------------------- Validate

class ValidateHandler(APIHandler):
    """Runs a notebook of the user's own folder and says what is still to do."""

    @web.authenticated
    async def post(self):
        from attention_platform.course.validation import validate_file
        from attention_platform.lab.warm_validate import WarmValidator

        path = self.get_argument("path", None)  # a form field, as nbgrader's Validate took it, or JSON
        if path is None:
            path = (self.get_json_body() or {}).get("path", "")
        root = Path(self.settings["server_root_dir"]).resolve()
        target = (root / str(path)).resolve()
        if not target.is_relative_to(root) or target.suffix != ".ipynb" or not target.is_file():
            raise web.HTTPError(400, "Validate needs the path of a notebook in your folder")
        # The student's own server reads the notebook (as the student) and, where the hub runs a
        # validate service, sends its content to a warm sandbox (lab/warm_validate.py): no
        # privileged process ever opens a path the student named. Off the event loop.
        report = await asyncio.get_running_loop().run_in_executor(
            None, validate_file, str(target), _nbgrader_config(), WarmValidator)
        self.finish(json.dumps(report.to_json()))


def _nbgrader_config():
    """nbgrader's settings as its own Validate loads them (kernel transport, timeouts)."""
    from nbgrader.apps import NbGrader
    from jupyter_core.paths import jupyter_config_path

    app = NbGrader()
    app.config_file_paths.append([os.getcwd(), *jupyter_config_path()])
    app.load_config_file()
    return app.config


# --------------------------------------------------------------------------- assignment list

def notebook_orders() -> dict[str, list[str]]:
    """Each assignment's notebook ids in order, as the hub said them (``ATTENTION_NOTEBOOK_ORDER``)."""
    try:
        said = json.loads(os.environ.get("ATTENTION_NOTEBOOK_ORDER") or "{}")
    except ValueError:
        return {}
    if not isinstance(said, dict):
        return {}
    return {str(a): [str(n) for n in names] for a, names in said.items() if isinstance(names, list)}


def _in_order(assignment: str, orders: dict[str, list[str]]):
    """A sort key for the assignment's notebook ids."""
    order = {name: i for i, name in enumerate(orders.get(assignment) or [assignment])}
    return lambda notebook_id: (order.get(notebook_id, len(order)), notebook_id)


_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})\.\d+(.*)$")


def to_the_second(timestamp: str) -> str:
    """``2026-11-23 18:25:17.480123 UTC`` → ``2026-11-23 18:25:17 UTC``."""
    match = _STAMP.match(timestamp or "")
    return f"{match.group(1)}{match.group(2)}" if match else timestamp


def tidy_listing(result: dict) -> dict:
    """nbgrader's assignment listing, notebooks in the assignment's order, times to the second."""
    if not result.get("success") or not isinstance(result.get("value"), list):
        return result
    orders = notebook_orders()
    for assignment in result["value"]:
        if isinstance(assignment.get("notebooks"), list):
            order = _in_order(str(assignment.get("assignment_id", "")), orders)
            assignment["notebooks"].sort(key=lambda nb: order(str(nb.get("notebook_id", ""))))
        for submission in assignment.get("submissions") or ():
            if isinstance(submission.get("timestamp"), str):
                # nbgrader's list shows "timestamp" as it is; the exact value stays for tools
                submission["exact_timestamp"] = submission["timestamp"]
                submission["timestamp"] = to_the_second(submission["timestamp"])
    return result


def own_submissions(course: str, assignment: str) -> frozenset[str]:
    """The names of this user's submissions of ``assignment`` in their view of the course's inbound."""
    root = str(settings().nbgrader_exchange_root)
    student = os.environ.get("JUPYTERHUB_USER", "")
    pattern = os.path.join(glob.escape(os.path.join(root, course, "inbound")),
                           f"{glob.escape(student)}+{glob.escape(assignment)}+*")
    return frozenset(os.path.basename(path) for path in glob.glob(pattern))


def mark_nothing_new(result: dict, assignment_id: str) -> dict:
    """The listing after a submit that filed nothing new: its submitted entry says so."""
    if not result.get("success"):
        return result
    for assignment in result.get("value") or ():
        if assignment.get("assignment_id") == assignment_id and assignment.get("status") == "submitted":
            assignment["nothing_new_filed"] = True
    return result


def _tidy_manager(web_app) -> None:
    manager = web_app.settings.get("assignment_list_manager")
    if manager is None:
        return
    unchanged = []  # the submit nbgrader's handler lists right after, if it filed nothing new

    def submit(submit_assignment, course_id, assignment_id):
        before = own_submissions(course_id, assignment_id)
        result = submit_assignment(course_id, assignment_id)
        if result.get("success") and before and own_submissions(course_id, assignment_id) == before:
            unchanged.append(assignment_id)
        return result

    def listing(list_assignments, course_id=None):
        result = tidy_listing(list_assignments(course_id=course_id))
        while unchanged:
            mark_nothing_new(result, unchanged.pop())
        return result

    third_party_patches.wrap_assignment_list(manager, submit, listing)
    remembered_config.remember(manager)  # a class's Submits in one minute each load it seven times
    # and each Submit's listing would read every feedback page of every attempt so far
    third_party_patches.checksum_listed_feedback_with(remembered_checksums.checksums)


# --------------------------------------------------------------------------- loading

def _jupyter_server_extension_points():
    return [{"module": "attention_platform.lab.course_lab"}]


def _chain_page_config_hook(web_app) -> None:
    """Ours after any other extension's (jupyterhub-singleuser sets one for the hub's links)."""
    current = web_app.settings.get("page_config_hook")
    if getattr(current, "attention_course", False):
        return

    def hook(handler, page_config):
        if current is not None:
            page_config = current(handler, page_config)
        return page_config_hook(handler, page_config)

    hook.attention_course = True
    web_app.settings["page_config_hook"] = hook


def _load_jupyter_server_extension(serverapp):
    web_app = serverapp.web_app
    web_app.add_handlers(".*$", [(url_path_join(web_app.settings["base_url"], "attention/validate"), ValidateHandler)])
    # Extensions load in name order, and later ones set up what we extend (nbgrader's assignment
    # list its manager, jupyterhub-singleuser its page config hook): do it before the first
    # request is routed, once everything has loaded.
    def tidying_find_handler(find_handler, request, **kwargs):
        _tidy_manager(web_app)
        _chain_page_config_hook(web_app)
        return find_handler(request, **kwargs)

    third_party_patches.route_through(web_app, "course Lab", tidying_find_handler)
    serverapp.log.info("course Lab: role %s, hiding %d of nbgrader's Lab plugins", role(), len(HIDDEN_PLUGINS[role()]))
