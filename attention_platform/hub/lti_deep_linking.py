"""LTI Deep Linking 2.0: an instructor adds one of the course's released assignments to the LMS course.

The LMS's picker sends an ``LtiDeepLinkingRequest`` launch (checked as every launch is: signature,
issuer, client id, deployment, context, nonce). Only an instructor of this course may go on (the role is
checked at the launch and again, from the hub's groups, at every request of the picker); the request's
return URL and opaque ``data`` are kept in the hub's memory under a random id, for that user only, for
``REQUEST_LIFETIME`` seconds and one use. The picker lists the assignments released to students (the
exchange's outbound folders) and, once one is chosen, the browser posts an ``LtiDeepLinkingResponse``
JWT to the platform's ``deep_link_return_url``: signed with the tool's key (lti_tool_keys), ``iss`` the
tool's client id, ``aud`` the platform's issuer, the request's ``deployment_id`` and ``data`` echoed,
one ``ltiResourceLink`` whose target URL opens that assignment's folder in the student's Lab.
"""

from __future__ import annotations

import html
import os
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from jupyterhub.handlers import BaseHandler
from tornado import web

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
DEEP_LINKING_SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
CONTENT_ITEMS = "https://purl.imsglobal.org/spec/lti-dl/claim/content_items"
DATA = "https://purl.imsglobal.org/spec/lti-dl/claim/data"
DEEP_LINKING_REQUEST, DEEP_LINKING_RESPONSE = "LtiDeepLinkingRequest", "LtiDeepLinkingResponse"
REQUEST_LIFETIME = 1800  # seconds an instructor has to pick
MAX_PENDING = 1000
ASSIGNMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def is_deep_linking_request(id_token: dict[str, Any]) -> bool:
    return id_token.get(CLAIM + "message_type") == DEEP_LINKING_REQUEST


def deep_linking_problem(id_token: dict[str, Any]) -> str | None:
    """What a deep-linking request lacks to be answered, or None. The ``tool_platform`` and the other
    optional claims upstream's validator wrongly required are not asked for."""
    settings = id_token.get(DEEP_LINKING_SETTINGS)
    if not isinstance(settings, dict):
        return "it carries no deep-linking settings"
    url = settings.get("deep_link_return_url")
    if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s\"'<>]{1,2000}", url):
        return "its deep_link_return_url is not an http(s) URL"
    accepted = settings.get("accept_types")
    if isinstance(accepted, list) and "ltiResourceLink" not in accepted:
        return "the LMS accepts no LTI resource link here"
    return None


@dataclass
class PendingRequest:
    user: str
    return_url: str
    data: Any
    issuer: str
    client_id: str
    deployment_id: str
    expires: float


class PendingRequests:
    """Deep-linking requests waiting for the instructor's choice, by random id; each used once."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._pending: dict[str, PendingRequest] = {}

    def add(self, user: str, id_token: dict[str, Any], client_id: str) -> str:
        now = self.clock()
        self._pending = {key: request for key, request in self._pending.items() if request.expires > now}
        if len(self._pending) >= MAX_PENDING:
            raise web.HTTPError(503, "Too many additions to the LMS are waiting for a choice right now. Please "
                                     "try again in a few minutes.")
        settings = id_token[DEEP_LINKING_SETTINGS]
        key = secrets.token_urlsafe(24)
        self._pending[key] = PendingRequest(user=user, return_url=settings["deep_link_return_url"],
                                            data=settings.get("data"), issuer=id_token["iss"],
                                            client_id=client_id, deployment_id=id_token[CLAIM + "deployment_id"],
                                            expires=now + REQUEST_LIFETIME)
        return key

    def get(self, key: str, user: str) -> PendingRequest:
        request = self._pending.get(key)
        if request is None or request.expires <= self.clock() or request.user != user:
            raise web.HTTPError(404, "This addition to the LMS has expired or was already made. Please start it "
                                     "again from your LMS.")
        return request

    def take(self, key: str, user: str) -> PendingRequest:
        request = self.get(key, user)
        del self._pending[key]
        return request


def released_assignments(outbound: str | os.PathLike) -> list[str]:
    """Names of the assignments released to students: the exchange's outbound folders (no link followed)."""
    try:
        entries = list(os.scandir(outbound))
    except OSError:
        return []
    return sorted(entry.name for entry in entries
                  if entry.is_dir(follow_symlinks=False) and ASSIGNMENT_NAME.fullmatch(entry.name))


def assignment_link(hub_url: str, assignment: str) -> str:
    """The content item's target URL: after the launch, the student's Lab opens the assignment's folder."""
    return f"{hub_url.rstrip('/')}/hub/user-redirect/lab/tree/{quote(assignment)}"


def response_claims(request: PendingRequest, hub_url: str, assignment: str) -> dict[str, Any]:
    claims = {
        "iss": request.client_id,
        "aud": request.issuer,
        "nonce": secrets.token_urlsafe(16),
        CLAIM + "message_type": DEEP_LINKING_RESPONSE,
        CLAIM + "version": "1.3.0",
        CLAIM + "deployment_id": request.deployment_id,
        CONTENT_ITEMS: [{"type": "ltiResourceLink", "title": assignment,
                         "url": assignment_link(hub_url, assignment), "custom": {"assignment": assignment}}],
    }
    if request.data is not None:
        claims[DATA] = request.data
    return claims


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body style="font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem">
<h1>{title}</h1>
{body}
</body></html>
"""


class DeepLinkPickerHandler(BaseHandler):
    """``/hub/lti13/deep_link/<id>``: the instructor's choice of assignment, and the signed answer to the LMS."""

    def instructor_request(self, key: str) -> PendingRequest:
        user = self.current_user
        if user is None:
            raise web.HTTPError(403, "Please start again from your LMS.")
        instructors = self.authenticator.instructors_group
        if instructors not in {group.name for group in user.groups}:
            raise web.HTTPError(403, "Only the course's instructors can add its assignments to the LMS.")
        return self.authenticator.deep_link_requests.get(key, user.name)

    def hub_url(self) -> str:
        return f"{self.authenticator.get_uri_scheme(self.request)}://{self.request.host}"

    def get(self, key: str):
        self.instructor_request(key)
        assignments = released_assignments(self.authenticator.outbound_dir)
        if not assignments:
            body = "<p>No assignment of this course has been released to students yet. Release one in the " \
                   "formgrader, then add it from your LMS again.</p>"
        else:
            choices = "".join(
                f'<p><label><input type="radio" name="assignment" value="{html.escape(name, quote=True)}"'
                f'{" checked" if index == 0 else ""}> {html.escape(name)}</label></p>'
                for index, name in enumerate(assignments))
            body = (f'<form method="post"><input type="hidden" name="_xsrf" value="{html.escape(self.xsrf_token.decode())}">'
                    f"<fieldset><legend>Which assignment should the LMS link to?</legend>{choices}</fieldset>"
                    '<p><button type="submit">Add to the LMS course</button></p></form>')
        self.finish(PAGE.format(title="Add an assignment to your LMS course", body=body))

    def post(self, key: str):
        self.instructor_request(key)
        assignment = self.get_body_argument("assignment", "")
        if assignment not in released_assignments(self.authenticator.outbound_dir):
            raise web.HTTPError(400, "Please choose one of the released assignments listed.")
        request = self.authenticator.deep_link_requests.take(key, self.current_user.name)
        token = self.authenticator.tool_key.sign(response_claims(request, self.hub_url(), assignment))
        self.log.info("LTI deep link: %s added %s to %s", self.current_user.name, assignment, request.return_url)
        body = (f'<form id="answer" method="post" action="{html.escape(request.return_url, quote=True)}">'
                f'<input type="hidden" name="JWT" value="{html.escape(token, quote=True)}">'
                f'<p>Returning to your LMS with “{html.escape(assignment)}”…</p>'
                '<p><button type="submit">Continue to the LMS</button></p></form>'
                "<script>document.getElementById('answer').submit()</script>")
        self.finish(PAGE.format(title="Adding the assignment to your LMS course", body=body))
