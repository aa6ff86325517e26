"""The formgrader service's gate: only the formgrader, only for its roles, scripts only its own.

The formgrader is nbgrader's extension inside a Jupyter Server, and a Jupyter Server
carries much more than the formgrader: the Contents API (read and write any file of
the course directory), kernels and terminals (run code as the service's account),
``/api/shutdown``, nbconvert, config writes, and nbgrader's other extensions. None of
that belongs to grading, so this extension (loaded by the grader service,
``jupyter_config/grader/jupyter_server_config.py``) routes every request through :data:`ROUTES`:

* a request whose method and path match no route is answered 404 before any
  handler runs (default deny: a handler added by a future version is closed too);
* a matched route names the role it needs, checked on the server for every
  request from the hub user's groups: ``grader`` (TAs and instructors),
  ``instructor``, or ``extensions`` (instructors, and TAs when the course's
  COURSE_TAS_GRANT_EXTENSIONS allows it, read at each request); a refused request
  gets 403 "instructors only" (or "TAs and instructors only");
* path parameters must look like ids (letters, digits, ``_.@+-``), so no markup
  ever reaches a page through a URL.

Every response also gets a Content-Security-Policy whose ``script-src`` is a fresh
nonce: nbgrader's own templates get the nonce on their ``<script>`` tags when they
are *compiled* (:class:`NonceScripts`), so a script that arrives with student
content, after rendering, never carries it and never runs. Student notebooks are
rendered through :class:`~attention_platform.reporting.safe_html.SafeHTMLExporter`,
and files of a submission are served only if they are images.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import secrets
from dataclasses import dataclass
from urllib.parse import urlencode

from jinja2.ext import Extension
from tornado import web

from attention_platform import third_party_patches
from attention_platform.settings import course_id, settings

GRADER, INSTRUCTOR, ANYONE = "grader", "instructor", "anyone"
EXTENSIONS = "extensions"  # granting students' extensions: instructors, and TAs where the course allows it
_ID = r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}"
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_IMAGE = rf"(?:{_SEGMENT}/){{0,8}}{_SEGMENT}\.(?:png|jpe?g|gif)"
_STATIC = rf"(?:{_SEGMENT}/){{0,12}}{_SEGMENT}"


@dataclass(frozen=True)
class Route:
    pattern: str  # regex for the path after the service's prefix, without a leading slash
    roles: dict  # HTTP method -> role needed

    def __post_init__(self):
        object.__setattr__(self, "regex", re.compile(self.pattern + r"/?\Z"))


def _r(pattern: str, **roles: str) -> Route:
    return Route(pattern, {method.upper(): role for method, role in roles.items()})


A, S, N = "(?P<assignment>" + _ID + ")", "(?P<student>" + _ID + ")", "(?P<notebook>" + _ID + ")"
ROUTES: tuple[Route, ...] = (
    # the service's front door, the hub's OAuth hand-shake, a health check
    _r("", get=ANYONE),  # a redirect to formgrader/, which checks
    _r("oauth_callback", get=ANYONE),
    _r("logout", get=ANYONE),
    _r("api", get=ANYONE),  # Jupyter Server's version: the launcher waits for it
    # nbgrader's static files (public library code, no course data)
    _r(rf"formgrader/static/{_STATIC}", get=ANYONE, head=ANYONE),
    _r(rf"formgrader/submissions/components/{_STATIC}", get=ANYONE, head=ANYONE),
    _r(rf"formgrader/fonts/{_STATIC}", get=ANYONE, head=ANYONE),
    # pages
    _r("formgrader", get=GRADER),
    _r("formgrader/manage_assignments", get=GRADER),
    _r(f"formgrader/manage_submissions/{A}", get=GRADER),
    _r("formgrader/gradebook", get=GRADER),
    _r(f"formgrader/gradebook/{A}", get=GRADER),
    _r(f"formgrader/gradebook/{A}/{N}", get=GRADER),
    _r("formgrader/manage_students", get=GRADER),
    _r(f"formgrader/manage_students/{S}", get=GRADER),
    _r(f"formgrader/manage_students/{S}/{A}", get=GRADER),
    _r(f"formgrader/submissions/{_ID}", get=GRADER),
    _r(f"formgrader/submissions/{_ID}/(?:next_incorrect|prev_incorrect|next|prev)", get=GRADER),
    _r(f"formgrader/submissions/{_ID}/{_IMAGE}", get=GRADER),  # pictures a notebook shows
    # the formgrader's API
    _r("formgrader/api/status", get=GRADER),
    _r("formgrader/api/assignments", get=GRADER),
    _r(f"formgrader/api/assignment/{A}", get=GRADER, put=INSTRUCTOR),
    _r(f"formgrader/api/assignment/{A}/assign", post=INSTRUCTOR),
    _r(f"formgrader/api/assignment/{A}/release", post=INSTRUCTOR),
    _r(f"formgrader/api/assignment/{A}/unrelease", post=INSTRUCTOR),
    _r(f"formgrader/api/assignment/{A}/collect", post=GRADER),
    _r(f"formgrader/api/assignment/{A}/generate_feedback", post=GRADER),
    _r(f"formgrader/api/assignment/{A}/release_feedback", post=GRADER),
    _r(f"formgrader/api/assignment/{A}/{S}/generate_feedback", post=GRADER),
    _r(f"formgrader/api/assignment/{A}/{S}/release_feedback", post=GRADER),
    _r(f"formgrader/api/notebooks/{A}", get=GRADER),
    _r(f"formgrader/api/submissions/{A}", get=GRADER),
    _r(f"formgrader/api/submission/{A}/{S}", get=GRADER),
    _r(f"formgrader/api/submission/{A}/{S}/autograde", post=GRADER),
    _r(f"formgrader/api/submitted_notebooks/{A}/{N}", get=GRADER),
    _r(f"formgrader/api/submitted_notebook/{_ID}/flag", post=GRADER),
    _r("formgrader/api/grades", get=GRADER),
    _r(f"formgrader/api/grade/{_ID}", get=GRADER, put=GRADER),
    _r("formgrader/api/comments", get=GRADER),
    _r(f"formgrader/api/comment/{_ID}", get=GRADER, put=GRADER),
    _r("formgrader/api/students", get=GRADER),
    _r(f"formgrader/api/student/{S}", get=GRADER, put=INSTRUCTOR),
    _r(f"formgrader/api/student_submissions/{S}", get=GRADER),
    _r(f"formgrader/api/student_notebook_submissions/{S}/{A}", get=GRADER),
    # the course's additions (formgrader_extras.py): its script and style, each student's state,
    # the progress of an autograde
    _r(rf"formgrader/attention/static/{_STATIC}", get=ANYONE, head=ANYONE),
    _r(f"formgrader/api/attention/states/{A}", get=GRADER),
    _r(f"formgrader/api/attention/progress/{A}/{S}", get=GRADER),
    # Autograde all (autograde_all.py): the batch grader over every collected submission, its progress
    _r(f"formgrader/api/attention/autograde_all/{A}", get=GRADER, post=GRADER),
    # Preview of the student version (preview.py), where nbgrader links to a file browser not served here
    _r(f"formgrader/attention/preview/{A}", get=INSTRUCTOR),
    _r(f"formgrader/attention/preview/{A}/{N}", get=INSTRUCTOR),
    # feedback on submit (attention_platform/formgrader/feedback_on_submit.py): the policies and every attempt
    _r("formgrader/feedback_on_submit", get=GRADER),
    _r(f"formgrader/api/attention/attempts/{A}", get=GRADER),
    _r(f"formgrader/attempts/{A}/{S}/[0-9]{{1,12}}/{N}", get=GRADER),
    # the policy's form (policy_form.py): TAs read it, instructors change it
    _r(f"formgrader/policy/{A}", get=GRADER, post=INSTRUCTOR),
    # the reports and exports (reports.py)
    _r("formgrader/reports", get=GRADER),
    _r(rf"formgrader/reports/{A}/(?:misconceptions\.html|check_breakdown\.csv|canvas_grades\.csv|attempts\.csv)",
       get=GRADER),
    # grades sent to the LMS and the roster's changes (lms_page.py): TAs read, instructors resend
    _r("formgrader/lms", get=GRADER),
    _r("formgrader/lms/resend", post=INSTRUCTOR),
    # the similarity report (attention_platform/formgrader/similarity_page.py)
    _r("formgrader/similarity", get=GRADER),
    _r(f"formgrader/similarity/{A}", get=GRADER),
    # students' extensions (extensions_page.py): grant, revoke, import a list, the change log
    _r("formgrader/extensions", get=EXTENSIONS),
    _r(f"formgrader/extensions/{A}", get=EXTENSIONS, post=EXTENSIONS),
    # each submission against its deadline, for the submissions list (submission_deadlines.py)
    _r(f"formgrader/api/attention/deadlines/{A}", get=GRADER),
)
# Query arguments that change what the formgrader *is*: ``?path=`` re-roots it on any
# folder and loads that folder's nbgrader_config.py (code) into this process.
FORBIDDEN_ARGUMENTS = {"formgrader": ("path",)}

REFUSALS = {
    INSTRUCTOR: "instructors only: ask one of the course's instructors to do this",
    GRADER: "TAs and instructors only: this is the course's grading service",
    EXTENSIONS: "instructors only: the course lets TAs grant extensions only when COURSE_TAS_GRANT_EXTENSIONS is 1",
}


def route_for(method: str, path: str) -> tuple[Route, str] | None:
    """The route and role for ``method`` on ``path`` (relative to the service prefix), or None."""
    for route in ROUTES:
        if route.regex.match(path):
            role = route.roles.get(method)
            return (route, role) if role else None
    return None


def role_of(user) -> str | None:
    """``instructor``, ``grader`` (a TA) or None, from the hub user's groups."""
    hub_user = getattr(user, "hub_user", None) or {}
    groups = set(hub_user.get("groups") or ())
    course = course_id()
    if f"instructors-{course}" in groups:
        return INSTRUCTOR
    if f"formgrade-{course}" in groups:
        return GRADER
    return None


def needed_now(role_needed: str) -> str:
    """The role a route's ``role_needed`` asks for under the course's settings as they are now."""
    if role_needed == EXTENSIONS:
        return GRADER if settings().course_tas_grant_extensions else INSTRUCTOR
    return role_needed


def refusal(role_needed: str) -> str:
    """What a request refused for want of ``role_needed`` is told."""
    return REFUSALS[role_needed if needed_now(role_needed) == INSTRUCTOR else GRADER]


def allowed(role_needed: str, role: str | None) -> bool:
    role_needed = needed_now(role_needed)
    return role_needed == ANYONE or role == INSTRUCTOR or (role_needed == GRADER and role == GRADER)


def content_security_policy(nonce: str) -> str:
    return "; ".join([
        "default-src 'none'",
        f"script-src 'nonce-{nonce}'",  # only our templates' scripts; nothing inline or foreign
        "style-src 'self' 'unsafe-inline'",  # nbgrader's templates style inline; CSS runs no code
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "object-src 'none'",
        "frame-ancestors 'none'",
    ])


# --------------------------------------------------------------------------- nonces in nbgrader's templates

_ACTION_NAMES = ("toggle_name", "toggleAllNames")  # nbgrader's own inline onclick handlers
_ONCLICK = re.compile(r'onclick="(' + "|".join(_ACTION_NAMES) + r')\((true|false|)\);?"')
_CLICKS = (
    "<script{nonce}>document.addEventListener('click', function (event) {{"
    " var el = event.target.closest('[data-formgrader-action]'); if (!el) return;"
    " var name = el.getAttribute('data-formgrader-action');"
    f" if ({list(_ACTION_NAMES)!r}.indexOf(name) < 0 || typeof window[name] !== 'function') return;"
    " var arg = el.getAttribute('data-formgrader-arg');"
    " if (arg) {{ window[name](arg === 'true'); }} else {{ window[name](); }} }});</script>"
)


def nonce_template_source(source: str, nonce_expression: str) -> str:
    """nbgrader's template ``source`` with a nonce on each of its own ``<script>`` tags and
    its inline onclick handlers turned into data attributes a nonced listener serves."""
    nonce = f' nonce="{{{{ {nonce_expression} }}}}"'
    source = re.sub(r"<script\b", "<script" + nonce, source)
    source = _ONCLICK.sub(lambda m: f'data-formgrader-action="{m.group(1)}" data-formgrader-arg="{m.group(2)}"', source)
    if "data-formgrader-action" in source and "</body>" in source:
        source = source.replace("</body>", _CLICKS.format(nonce=nonce) + "</body>", 1)
    return source


def template_folders() -> tuple[str, ...]:
    """The folders whose templates' own scripts get the nonce: nbgrader's formgrader templates
    and the course's additions in front of them (formgrader_extras.py)."""
    from nbgrader.server_extensions.formgrader import handlers

    from attention_platform.formgrader.formgrader_extras import FORMGRADE_TEMPLATES, TEMPLATES

    return handlers.template_path, str(TEMPLATES), str(FORMGRADE_TEMPLATES)


class NonceScripts(Extension):
    """Adds nonces to the ``<script>`` tags of templates loaded from nbgrader's formgrader
    template folder and ours (:func:`template_folders`), at compile time. Other templates
    (nbconvert's, whose scripts would run outputs) and everything rendered *into* a template
    stay without one."""

    def preprocess(self, source, name, filename=None):
        if not filename or not any(os.path.abspath(filename).startswith(os.path.abspath(folder) + os.sep)
                                   for folder in template_folders()):
            return source
        expression = "resources.csp_nonce" if filename.endswith(".j2") else "csp_nonce"
        return nonce_template_source(source, expression)


# --------------------------------------------------------------------------- gated handlers

class NotInTheFormgrader(web.RequestHandler):
    """Everything the formgrader does not serve."""

    def prepare(self):
        self.set_header("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_status(404)
        self.finish("Not found: this service serves the course's formgrader and nothing else.\n")

    def check_xsrf_cookie(self):
        pass


_GATED: dict[type, type] = {}


def gated(cls: type) -> type:
    """``cls`` with the role check, the nonce and the security headers (one subclass per class)."""
    if cls in _GATED:
        return _GATED[cls]

    class Gated(cls):
        def set_default_headers(self):
            super().set_default_headers()
            self.csp_nonce = secrets.token_urlsafe(18)
            self.set_header("Content-Security-Policy", content_security_policy(self.csp_nonce))
            self.set_header("X-Content-Type-Options", "nosniff")
            self.set_header("Referrer-Policy", "same-origin")
            self.set_header("Cross-Origin-Opener-Policy", "same-origin")

        async def prepare(self, *args, **kwargs):
            result = super().prepare(*args, **kwargs)
            if inspect.isawaitable(result):
                await result
            if self._finished:
                return
            path = relative_path(self.request.path, self.application.settings.get("base_url", "/"))
            found = route_for(self.request.method, path or "")
            if found is None:  # find_handler let it through, so this cannot happen; deny anyway
                raise web.HTTPError(404)
            route, needed = found
            if needed == ANYONE:
                return
            user = self.current_user
            if user is None:
                if self.request.method in ("GET", "HEAD") and not path.startswith("formgrader/api/"):
                    login = self.get_login_url()  # as tornado's @web.authenticated sends a visitor to log in
                    self.redirect(login if "?" in login else login + "?" + urlencode({"next": self.request.uri}))
                    return
                raise web.HTTPError(403, "log in through the hub first")
            if not allowed(needed, role_of(user)):
                self.refuse(refusal(needed))
                return
            for argument in FORBIDDEN_ARGUMENTS.get(path, ()):
                if argument in self.request.arguments:
                    self.refuse(f"the formgrader does not accept ?{argument}=", status=400)

        def refuse(self, message: str, status: int = 403) -> None:
            self.set_status(status)
            if relative_path(self.request.path, self.application.settings.get("base_url", "/")).startswith("formgrader/api/"):
                self.set_header("Content-Type", "application/json")
                self.finish(json.dumps({"message": message}))
            else:
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.finish(f"{status}: {message}\n")

        def render(self, name, **namespace):
            namespace.setdefault("csp_nonce", getattr(self, "csp_nonce", ""))
            namespace.setdefault("attention_role", role_of(self.current_user) or "")  # what the page shows
            namespace.setdefault("attention_may_extend", allowed(EXTENSIONS, role_of(self.current_user)))
            return super().render(name, **namespace)

        @property
        def exporter(self):
            exporter, nonce = super().exporter, self.csp_nonce

            class WithNonce:
                def from_filename(self, filename, resources=None, **kw):
                    return exporter.from_filename(filename, resources={**(resources or {}), "csp_nonce": nonce}, **kw)

            return WithNonce()

        def compute_etag(self):  # a nonce changes every response: caching a page would break its scripts
            return None

    Gated.__name__ = Gated.__qualname__ = f"Gated{cls.__name__}"
    _GATED[cls] = Gated
    return Gated


class ImagesOnly:
    """Mixin for nbgrader's SubmissionFilesHandler: a submission's files are student data,
    served as images (the route admits only .png/.jpg/.gif) and never as a page."""

    def set_extra_headers(self, path):
        self.set_header("Content-Security-Policy", "default-src 'none'; sandbox")
        self.set_header("Content-Disposition", "inline")

    def get_content_type(self):
        kind = super().get_content_type()
        return kind if kind in ("image/png", "image/jpeg", "image/gif") else "application/octet-stream"


def _use_safe_exporter(settings: dict) -> None:
    from attention_platform.formgrader.formgrader_extras import formgrade_exporter, install_templates
    from attention_platform.reporting.safe_html import SafeHTMLExporter

    current = settings.get("nbgrader_exporter")
    if current is not None and not isinstance(current, SafeHTMLExporter):
        exporter = formgrade_exporter(current.config)  # sanitised, with the check summary on top
        exporter.environment.add_extension(NonceScripts)
        settings["nbgrader_exporter"] = exporter
    env = settings.get("nbgrader_jinja2_env")
    if env is not None:
        install_templates(env)
        if NonceScripts.identifier not in env.extensions:
            env.add_extension(NonceScripts)


def relative_path(path: str, base_url: str) -> str | None:
    """``path`` below the service's prefix, without slashes at either end; None if outside."""
    prefix = base_url.rstrip("/") + "/"
    if path + "/" == prefix:
        return ""
    return path[len(prefix):].strip("/") if path.startswith(prefix) else None


def _image_files_handler():
    from nbgrader.server_extensions.formgrader.handlers import SubmissionFilesHandler

    return SubmissionFilesHandler, type("SubmissionImagesHandler", (ImagesOnly, SubmissionFilesHandler), {})


def install(web_app, base_url: str) -> None:
    """Route every request of ``web_app`` through the gate."""
    from nbgrader.server_extensions.formgrader.apihandlers import AutogradeHandler

    from attention_platform.formgrader import autograde_all, extensions_page, feedback_on_submit, preview
    from attention_platform.formgrader import formgrader_extras
    from attention_platform.formgrader import lms_page, policy_form, reports
    from attention_platform.formgrader import similarity_page, submission_deadlines

    files_handler, images_handler = _image_files_handler()
    replaced = {files_handler: images_handler, AutogradeHandler: formgrader_extras.threaded_autograde(AutogradeHandler)}
    web_app.add_handlers(".*$", formgrader_extras.handlers(base_url))
    web_app.add_handlers(".*$", feedback_on_submit.handlers(base_url))
    web_app.add_handlers(".*$", autograde_all.handlers(base_url))
    web_app.add_handlers(".*$", preview.handlers(base_url))
    web_app.add_handlers(".*$", policy_form.handlers(base_url))
    web_app.add_handlers(".*$", lms_page.handlers(base_url))
    web_app.add_handlers(".*$", reports.handlers(base_url))
    web_app.add_handlers(".*$", similarity_page.handlers(base_url))
    web_app.add_handlers(".*$", extensions_page.handlers(base_url))
    web_app.add_handlers(".*$", submission_deadlines.handlers(base_url))

    def find_handler(original, request, **kwargs):
        relative = relative_path(request.path, base_url)
        if relative is None or route_for(request.method, relative) is None:
            return web_app.get_handler_delegate(request, NotInTheFormgrader)
        _use_safe_exporter(web_app.settings)  # nbgrader sets its exporter up when it loads
        delegate = original(request, **kwargs)
        handler = delegate.handler_class
        delegate.handler_class = gated(replaced.get(handler, handler))
        return delegate

    third_party_patches.route_through(web_app, "formgrader gate", find_handler)


def _jupyter_server_extension_points():
    return [{"module": "attention_platform.formgrader.formgrader_gate"}]


def _load_jupyter_server_extension(serverapp):
    install(serverapp.web_app, serverapp.base_url)
    serverapp.log.info("formgrader gate: %d routes for course %r, everything else 404", len(ROUTES), course_id())
