"""Every endpoint of the formgrader service, for a student, a TA and an instructor.

``EXPECTED`` is written here, independently of the gate's own table: for each request
handler a Jupyter Server with every installed extension registers, the role each
HTTP method needs (``ta`` = TAs and instructors, ``instructor``, ``anyone``), or
nothing at all (not served). Two tests use it:

* ``test_every_registered_route_is_classified``: a Jupyter Server with *all*
  extensions on (Lab, terminals, kernels, nbgrader's student side, ...) is built in
  this process; for every route it registers, the gate's decision for every method
  equals the table, and a handler the table does not know is denied;
* ``test_each_role_on_the_live_formgrader``: the README's hub, where a student, the
  TA and the instructor send each request; allowed and refused answers match the table.
"""

from __future__ import annotations

import os
import re

import pytest
from tornado.routing import PathMatches, RuleRouter

from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.formgrader import formgrader_gate
from hub_helpers import COURSE, posted_status

PREFIX = f"/services/{COURSE}/"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
TA, INSTRUCTOR, ANYONE = "ta", "instructor", "anyone"
EXTENSIONS = "extensions"  # instructors, and TAs when COURSE_TAS_GRANT_EXTENSIONS is 1 (not on the test hubs)
PROBE = "gate-probe"  # an id no assignment, student or submission has

# handler class -> {method: role}; any handler or method not listed is not served at all
EXPECTED: dict[str, dict[str, str]] = {
    # nbgrader's formgrader pages
    "FormgraderHandler": {"GET": TA},
    "ManageAssignmentsHandler": {"GET": TA},
    "ManageSubmissionsHandler": {"GET": TA},
    "GradebookAssignmentsHandler": {"GET": TA},
    "GradebookNotebooksHandler": {"GET": TA},
    "GradebookNotebookSubmissionsHandler": {"GET": TA},
    "ManageStudentsHandler": {"GET": TA},
    "ManageStudentsAssignmentsHandler": {"GET": TA},
    "ManageStudentNotebookSubmissionsHandler": {"GET": TA},
    "SubmissionHandler": {"GET": TA},  # the page (the API handler of the same name is below)
    "SubmissionNavigationHandler": {"GET": TA},
    "SubmissionFilesHandler": {"GET": TA},  # pictures only: see test_submission_files_are_pictures_only
    # nbgrader's formgrader API
    "StatusHandler": {"GET": TA},
    "AssignmentCollectionHandler": {"GET": TA},
    "AssignmentHandler": {"GET": TA, "PUT": INSTRUCTOR},
    "AssignHandler": {"POST": INSTRUCTOR},
    "ReleaseHandler": {"POST": INSTRUCTOR},
    "UnReleaseHandler": {"POST": INSTRUCTOR},
    "CollectHandler": {"POST": TA},
    "GenerateAllFeedbackHandler": {"POST": TA},
    "ReleaseAllFeedbackHandler": {"POST": TA},
    "GenerateFeedbackHandler": {"POST": TA},
    "ReleaseFeedbackHandler": {"POST": TA},
    "NotebookCollectionHandler": {"GET": TA},
    "SubmissionCollectionHandler": {"GET": TA},
    "AutogradeHandler": {"POST": TA},
    "SubmittedNotebookCollectionHandler": {"GET": TA},
    "FlagSubmissionHandler": {"POST": TA},
    "GradeCollectionHandler": {"GET": TA},
    "GradeHandler": {"GET": TA, "PUT": TA},
    "CommentCollectionHandler": {"GET": TA},
    "CommentHandler": {"GET": TA, "PUT": TA},
    "StudentCollectionHandler": {"GET": TA},
    "StudentHandler": {"GET": TA, "PUT": INSTRUCTOR},
    "StudentSubmissionCollectionHandler": {"GET": TA},
    "StudentNotebookSubmissionCollectionHandler": {"GET": TA},
    # public library files of the formgrader's pages
    "StaticFileHandler": {"GET": ANYONE, "HEAD": ANYONE},
    # the server itself: its version (health check) and the front door's redirect
    "APIVersionHandler": {"GET": ANYONE},
    "MainHandler": {"GET": ANYONE},
    "RedirectWithParams": {"GET": ANYONE},
    "LogoutHandler": {"GET": ANYONE},  # ends the service's session (the hub's own logout in the live server)
    # the course's additions (attention_platform/formgrader/formgrader_extras.py)
    "CourseStaticHandler": {"GET": ANYONE, "HEAD": ANYONE},  # attention.js and .css: public code
    "SubmissionStatesHandler": {"GET": TA},
    "AutogradeProgressHandler": {"GET": TA},
    "AutogradeAllHandler": {"GET": TA, "POST": TA},  # autograde_all.py: the batch grader and its progress
    "PreviewHandler": {"GET": INSTRUCTOR},  # preview.py: the student version of an assignment
    # feedback on submit (attention_platform/formgrader/feedback_on_submit.py)
    "AttemptsPageHandler": {"GET": TA},
    "AttemptsApiHandler": {"GET": TA},
    "AttemptNotebookHandler": {"GET": TA},  # any attempt's graded notebook
    # the policy's form (attention_platform/formgrader/policy_form.py): TAs read, instructors change
    "PolicyFormHandler": {"GET": TA, "POST": INSTRUCTOR},
    # the Reports page and its files (attention_platform/formgrader/reports.py)
    "ReportsPageHandler": {"GET": TA},
    "ReportFileHandler": {"GET": TA},
    # grades sent to the LMS (attention_platform/formgrader/lms_page.py): TAs read, instructors resend;
    # a student reaches neither, so nothing a student posts changes a score the LMS receives
    "LmsPageHandler": {"GET": TA},
    "ResendHandler": {"POST": INSTRUCTOR},
    # the similarity report (attention_platform/formgrader/similarity_page.py)
    "SimilarityIndexHandler": {"GET": TA},
    "SimilarityReportHandler": {"GET": TA},
    # students' extensions (attention_platform/formgrader/extensions_page.py)
    "ExtensionsIndexHandler": {"GET": EXTENSIONS},
    "ExtensionsPageHandler": {"GET": EXTENSIONS, "POST": EXTENSIONS},
    # each submission against its deadline (attention_platform/formgrader/submission_deadlines.py)
    "SubmissionDeadlinesHandler": {"GET": TA},
}
# Handlers whose only route here is the formgrader's catch-all or a route they share with
# a served handler: their pattern is served, through another handler, only where listed.
SHARED = {"Template404", "TrailingSlashHandler"}


def _walk(router, found):
    for rule in router.rules:
        if isinstance(rule.target, RuleRouter):
            _walk(rule.target, found)
        elif isinstance(rule.matcher, PathMatches):
            name = getattr(rule.target, "__name__", type(rule.target).__name__)
            found.append((rule.matcher, name, rule.target))


def example_paths(matcher: PathMatches, handler: str) -> list[str]:
    """Concrete paths this route answers, with ids nobody has."""
    return [path.replace("/?", "/").replace("//", "/") for path in _examples(matcher, handler)]


def _examples(matcher: PathMatches, handler: str) -> list[str]:
    pattern = matcher.regex.pattern
    if "formgrader/attention/static" in pattern:  # nested groups tornado cannot reverse
        return [PREFIX + "formgrader/attention/static/attention.js"]
    if "formgrader/static" in pattern or "components" in pattern:
        return [matcher.reverse("js/utils.js") if "static" in pattern else matcher.reverse("x.js")]
    if "fonts" in pattern:
        return [matcher.reverse("glyphicons-halflings-regular.woff")]
    if handler == "AttemptNotebookHandler":  # an attempt's number is digits
        return [PREFIX + f"formgrader/attempts/{PROBE}/{PROBE}/1/{PROBE}"]
    if handler == "ReportFileHandler":  # a choice of file names tornado cannot reverse
        return [PREFIX + f"formgrader/reports/{PROBE}/{name}"
                for name in ("misconceptions.html", "check_breakdown.csv", "canvas_grades.csv", "attempts.csv")]
    if handler == "SubmissionFilesHandler":
        return [matcher.reverse(f"{PROBE}/data/figure.png"), matcher.reverse(f"{PROBE}/notes.html")]
    if "next_incorrect" in pattern:
        return [matcher.reverse(PROBE, "next")]
    if matcher._path is not None:
        try:
            return [matcher.reverse(*[PROBE] * (matcher._group_count or 0))]
        except Exception:  # noqa: BLE001 - a pattern tornado cannot reverse gets a hand-made path below
            pass
    handmade = re.sub(r"\(\?P<path>[^$]*?\)\)", f"/{PROBE}", pattern)
    handmade = re.sub(r"\(\?P<\w+>[^)]*\)", PROBE, handmade)
    handmade = re.sub(r"\([^)]*\)", PROBE, handmade).replace("\\", "").rstrip("$").replace("/?", "/")
    handmade = handmade.replace(".*", PROBE)
    return [handmade]


def registered_routes():
    """(path, handler name, handler class) of every route of a Jupyter Server with every
    installed extension on, under the formgrader's base URL."""
    from jupyter_server.serverapp import ServerApp

    app = ServerApp()
    extensions = {name: True for name in (
        "jupyterlab", "notebook", "notebook_shim", "jupyter_lsp", "jupyter_server_terminals",
        "nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.assignment_list",
        "nbgrader.server_extensions.course_list", "nbgrader.server_extensions.validate_assignment",
        "attention_platform.formgrader.formgrader_gate")}
    app.initialize(argv=[f"--ServerApp.root_dir={COURSE_ROOT}", "--ServerApp.port=0", "--ServerApp.open_browser=False",
                         f"--ServerApp.base_url={PREFIX}", "--ServerApp.terminals_enabled=True"],
                   find_extensions=False, new_httpserver=False)
    for name in extensions:
        app.extension_manager.add_extension(name, enabled=True)
    app.extension_manager.link_all_extensions()
    app.extension_manager.load_all_extensions()
    found = []
    _walk(app.web_app.default_router, found)
    return [(path, name, target) for matcher, name, target in found for path in example_paths(matcher, name)
            if path.startswith(PREFIX) or path == PREFIX.rstrip("/")]


def expected_role(handler: str, method: str, path: str) -> str | None:
    if handler == "SubmissionFilesHandler" and not path.endswith(".png"):
        return None
    return EXPECTED.get(handler, {}).get(method)


def test_every_registered_route_is_classified():
    routes = registered_routes()
    handlers = {name for _, name, _ in routes}
    assert {"ContentsHandler", "MainKernelHandler", "TermSocket", "ShutdownHandler", "LabHandler",
            "ManageAssignmentsHandler"} <= handlers, sorted(handlers)  # the walk saw what is there
    wrong = []
    for path, handler, target in routes:
        relative = formgrader_gate.relative_path(path, PREFIX)
        for method in METHODS:
            decision = formgrader_gate.route_for(method, relative)
            got = None if decision is None else {"grader": TA}.get(decision[1], decision[1])
            want = None if handler in SHARED else expected_role(handler, method, path)
            if handler in SHARED and got is not None:
                continue  # the served handler of the same path is checked under its own name
            if got != want:
                wrong.append((method, path, handler, want, got))
    assert wrong == [], "\n".join(map(str, wrong))


# --------------------------------------------------------------------------- live

def refused(reply) -> bool:
    """The gate's or the hub's refusal, as opposed to anything the formgrader itself answered."""
    if reply.status_code == 404 and reply.text.startswith("Not found: this service serves"):
        return True
    if reply.status_code == 403:
        return True
    return reply.status_code == 400 and "does not accept ?path=" in reply.text


@pytest.fixture(scope="module")
def gate_hub(security_hub):
    return security_hub


@pytest.fixture(scope="module")
def sessions(gate_hub):
    """One logged-in browser-like session per role, each having opened the service once
    (as a browser does before its pages call the API)."""
    opened = {}
    for user in ("student1", "ta", "instructor"):
        opened[user] = gate_hub.session(user)
        opened[user].get(PREFIX)
    return opened


LIVE = [
    # (method, path below the service, handler)
    ("GET", "api/contents", "ContentsHandler"),
    ("PUT", "api/contents/nbgrader_config.py", "ContentsHandler"),
    ("POST", "api/kernels", "MainKernelHandler"),
    ("GET", "api/kernelspecs", "MainKernelSpecHandler"),
    ("POST", "api/terminals", "TermSocket"),
    ("POST", "api/sessions", "SessionRootHandler"),
    ("POST", "api/shutdown", "ShutdownHandler"),
    ("GET", "files/nbgrader_config.py", "AuthenticatedFileHandler"),
    ("GET", "api/nbconvert", "NbconvertRootHandler"),
    ("PUT", "api/config/notebook", "ConfigHandler"),
    ("GET", "lab", "LabHandler"),
    ("GET", "tree", "TreeHandler"),
    ("GET", "formgrader?path=/tmp", "FormgraderHandler?path"),
    ("POST", "assignments/validate", "ValidateAssignmentHandler"),
    ("GET", "formgrader", "FormgraderHandler"),
    ("GET", "formgrader/manage_assignments", "ManageAssignmentsHandler"),
    ("GET", "formgrader/manage_students", "ManageStudentsHandler"),
    ("GET", "formgrader/gradebook", "GradebookAssignmentsHandler"),
    ("GET", "formgrader/api/assignments", "AssignmentCollectionHandler"),
    ("GET", "formgrader/api/students", "StudentCollectionHandler"),
    ("PUT", f"formgrader/api/student/{PROBE}", "StudentHandler"),
    ("PUT", f"formgrader/api/assignment/{PROBE}", "AssignmentHandler"),
    ("POST", f"formgrader/api/assignment/{PROBE}/release", "ReleaseHandler"),
    ("POST", f"formgrader/api/assignment/{PROBE}/unrelease", "UnReleaseHandler"),
    ("POST", f"formgrader/api/assignment/{PROBE}/assign", "AssignHandler"),
    ("POST", f"formgrader/api/assignment/{PROBE}/collect", "CollectHandler"),
    ("POST", f"formgrader/api/submission/{PROBE}/{PROBE}/autograde", "AutogradeHandler"),
    ("GET", "formgrader/static/js/utils.js", "StaticFileHandler"),
    ("GET", "formgrader/feedback_on_submit", "AttemptsPageHandler"),
    ("GET", f"formgrader/api/attention/attempts/{PROBE}", "AttemptsApiHandler"),
    ("GET", f"formgrader/api/attention/autograde_all/{PROBE}", "AutogradeAllHandler"),
    ("GET", f"formgrader/attention/preview/{PROBE}", "PreviewHandler"),
    ("GET", f"formgrader/attempts/{PROBE}/{PROBE}/1/{PROBE}", "AttemptNotebookHandler"),
    ("GET", f"formgrader/policy/{PROBE}", "PolicyFormHandler"),
    ("POST", f"formgrader/policy/{PROBE}", "PolicyFormHandler"),
    ("GET", "formgrader/reports", "ReportsPageHandler"),
    ("GET", f"formgrader/reports/{PROBE}/attempts.csv", "ReportFileHandler"),
    ("GET", "formgrader/similarity", "SimilarityIndexHandler"),
    ("GET", f"formgrader/similarity/{PROBE}", "SimilarityReportHandler"),
    ("GET", f"formgrader/submissions/{PROBE}/notes.html", "SubmissionFilesHandler.html"),
    ("GET", "formgrader/extensions", "ExtensionsIndexHandler"),
    ("GET", f"formgrader/extensions/{PROBE}", "ExtensionsPageHandler"),
    ("POST", f"formgrader/extensions/{PROBE}", "ExtensionsPageHandler"),
    ("GET", f"formgrader/api/attention/deadlines/{PROBE}", "SubmissionDeadlinesHandler"),
]
LIVE_EXPECTED = {**{k: v for k, v in EXPECTED.items()}, "FormgraderHandler?path": {},
                 "SubmissionFilesHandler.html": {}}
ALLOWS = {TA: {"ta", "instructor"}, INSTRUCTOR: {"instructor"}, ANYONE: {"student1", "ta", "instructor"},
          EXTENSIONS: {"instructor"}}


@pytest.mark.slow
@pytest.mark.parametrize("method, path, handler", LIVE, ids=[f"{m} {p}" for m, p, _ in LIVE])
@pytest.mark.hub
@pytest.mark.root
def test_each_role_on_the_live_formgrader(gate_hub, sessions, method, path, handler):
    role = LIVE_EXPECTED.get(handler, {}).get(method)
    for user, session in sessions.items():
        url = PREFIX + path
        # a body nbgrader rejects as malformed: an allowed write changes nothing on the shared course
        kwargs = {"data": "not json"} if method in ("PUT", "POST") else {}
        reply = getattr(session, method.lower())(url, **kwargs) if method in ("GET", "POST", "PUT") else \
            session.http.request(method, gate_hub.url + url, timeout=60)
        should_pass = role is not None and user in ALLOWS[role]
        assert refused(reply) != should_pass, (user, method, path, reply.status_code, reply.text[:200])


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_refusals_say_who_may(sessions):
    ta = sessions["ta"]
    reply = ta.post(PREFIX + f"formgrader/api/assignment/{PROBE}/release")
    assert reply.status_code == 403 and reply.json()["message"].startswith("instructors only")


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_every_response_forbids_inline_and_foreign_script(sessions):
    ta = sessions["ta"]
    page = ta.get(PREFIX + "formgrader/manage_assignments")
    policy = page.headers["Content-Security-Policy"]
    nonce = re.search(r"script-src 'nonce-([\w-]+)'", policy).group(1)
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    scripts = re.findall(r"<script\b[^>]*>", page.text)
    assert scripts and all(f'nonce="{nonce}"' in tag for tag in scripts), scripts
    assert ta.get(PREFIX + "formgrader/manage_assignments").headers["Content-Security-Policy"] != policy  # fresh nonce


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_the_formgrader_runs_as_the_grader_account_not_root(gate_hub):
    import pwd
    from pathlib import Path

    from attention_platform.settings import course_id
    from attention_platform.hub.native import grader_account

    grader = grader_account(course_id())

    servers = [pid for pid in filter(str.isdigit, os.listdir("/proc"))
               if str(gate_hub.state / "course").encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
               and b"jupyterhub-singleuser" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert servers
    for pid in servers:
        uids = [line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:")]
        assert uids[0].split()[1:] == [str(pwd.getpwnam(grader).pw_uid)] * 4, uids
    # and it, not root, owns the course directory it serves
    assert (gate_hub.state / "course").stat().st_uid == pwd.getpwnam(grader).pw_uid


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_request_body_no_formgrader_page_needs_is_refused_unread(gate_hub):
    """Jupyter Server reads a request's whole body (up to 512 MB by default) before any handler
    checks who sent it, and the service's path is open to anyone who reaches the hub: a few such
    posts, without logging in, could fill the grader account's memory. Its requests carry small
    JSON; a body over 1 MB is refused from its length, before it is read."""
    url = gate_hub.url + PREFIX + f"formgrader/api/assignment/{PROBE}/release"
    small = posted_status(url, data=b"x" * 1000)
    assert small in (302, 403), small  # read, then refused: who is asking?
    status = posted_status(url, data=b"x" * (2 << 20))
    # The formgrader closes the connection on the length alone; the hub's proxy answers that with 503.
    assert status in (400, 413, 503, "closed"), status
    assert posted_status(url, data=b"x" * 1000) == small  # and the service is still there
