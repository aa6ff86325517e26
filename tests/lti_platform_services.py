"""``lti1p3platform``'s services for the tool's service calls: tests/lti_platform.py's platform with the routes
an LMS serves for LTI Advantage (the package has the logic, not the routes):

    POST /token                          the OAuth 2 token endpoint: ``get_access_token`` checks the tool's
                                         client assertion against the tool's published key set
    GET|POST /<context>/lineitems        the course's line items (AGS), listed or made
    POST /<context>/lineitems/<n>/scores a score for a line item: the platform's gradebook keeps it
    GET  /<context>/lineitems/<n>/results the gradebook's results of a line item
    GET  /<context>/memberships          the course's roster (NRPS)

Every service route checks the bearer token with the package's ``validate_token`` and the scope the
route needs. ``gradebook`` holds, per line item, each user's last score, as an LMS's gradebook shows it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import tornado.web

from hub_helpers import serve_in_threads
from lti_platform import CONTEXT, LtiPlatform, PlatformHandler

AGS = "https://purl.imsglobal.org/spec/lti-ags/scope/"
MEMBERSHIP_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


class ServicesPlatform(LtiPlatform):
    def __init__(self, start_server):
        self.line_items: dict[str, dict[str, Any]] = {}
        self.gradebook: dict[str, dict[str, dict[str, Any]]] = {}  # line item id -> user id -> last score
        self.members: list[dict[str, Any]] = []
        self.token_answers: list[int] = []
        super().__init__(start_server)

    def routes(self) -> list:
        context = CONTEXT["id"]
        return super().routes() + [
            (r"/token", Token, {"platform": self}),
            (rf"/{context}/lineitems", LineItems, {"platform": self}),
            (rf"/{context}/lineitems/([0-9]+)/scores", Scores, {"platform": self}),
            (rf"/{context}/lineitems/([0-9]+)/results", Results, {"platform": self}),
            (rf"/{context}/memberships", Memberships, {"platform": self}),
        ]

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    @property
    def line_items_url(self) -> str:
        return f"{self.url}/{CONTEXT['id']}/lineitems"

    @property
    def memberships_url(self) -> str:
        return f"{self.url}/{CONTEXT['id']}/memberships"

    def add_service_claims(self, message) -> None:
        """Each launch names the course's line items (the AGS endpoint claim, with the scopes granted)."""
        message.set_ags(self.line_items_url)

    def services_environment(self) -> dict[str, str]:
        return {**self.hub_environment(), "LTI_TOKEN_URL": self.token_url, "LTI_LINE_ITEMS_URL": self.line_items_url,
                "LTI_MEMBERSHIPS_URL": self.memberships_url}

    def register_tool_key_set(self, url: str) -> None:
        """Where the platform fetches the tool's public keys to check its client assertions."""
        self.registration.set_tool_key_set_url(url)


class ServiceHandler(PlatformHandler):
    def check_xsrf_cookie(self):
        pass  # a service call carries a bearer token, no cookie

    def send(self, status: int, document: Any = None, content_type: str = "application/json") -> None:
        self.set_status(status)
        self.set_header("Content-Type", content_type)
        if document is not None:
            self.write(json.dumps(document))

    def scoped(self, scope: str) -> bool:
        token = self.request.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            allowed = bool(token) and self.platform.configuration().validate_token(token, allowed_scopes=[scope])
        except Exception:  # noqa: BLE001 - any token the package cannot verify
            allowed = False
        if not allowed:
            self.send(401, {"error": "invalid_token"})
        return allowed


class Token(ServiceHandler):
    def post(self):
        form = {name: values[0].decode() for name, values in self.request.body_arguments.items()}
        try:
            answer = self.platform.configuration().get_access_token(form)
        except Exception as error:  # noqa: BLE001 - the package's refusals are exceptions of several kinds
            self.platform.token_answers.append(400)
            return self.send(400, {"error": "invalid_client", "error_description": f"{type(error).__name__}: {error}"})
        self.platform.token_answers.append(200)
        self.send(200, answer)


class LineItems(ServiceHandler):
    def get(self):
        if self.scoped(AGS + "lineitem"):
            wanted = self.get_query_argument("resource_id", None)
            self.send(200, [item for item in self.platform.line_items.values()
                            if wanted is None or item.get("resourceId") == wanted],
                      "application/vnd.ims.lis.v2.lineitemcontainer+json")

    def post(self):
        if self.scoped(AGS + "lineitem"):
            item = json.loads(self.request.body)
            item["id"] = f"{self.platform.line_items_url}/{len(self.platform.line_items) + 1}"
            self.platform.line_items[item["id"]] = item
            self.send(201, item, "application/vnd.ims.lis.v2.lineitem+json")


class Scores(ServiceHandler):
    def post(self, number: str):
        if not self.scoped(AGS + "score"):
            return
        item = f"{self.platform.line_items_url}/{number}"
        if item not in self.platform.line_items:
            return self.send(404, {"error": "no such line item"})
        if self.request.headers.get("Content-Type") != "application/vnd.ims.lis.v1.score+json":
            return self.send(415, {"error": "a score is application/vnd.ims.lis.v1.score+json"})
        score = json.loads(self.request.body)
        self.platform.gradebook.setdefault(item, {})[score["userId"]] = score
        self.send(204)


class Results(ServiceHandler):
    def get(self, number: str):
        if not self.scoped(AGS + "result.readonly"):
            return
        item = f"{self.platform.line_items_url}/{number}"
        wanted = self.get_query_argument("user_id", None)
        self.send(200, [{"id": f"{item}/results/{user}", "scoreOf": item, "userId": user,
                         "resultScore": score["scoreGiven"], "resultMaximum": score["scoreMaximum"]}
                        for user, score in self.platform.gradebook.get(item, {}).items()
                        if wanted is None or user == wanted],
                  "application/vnd.ims.lis.v2.resultcontainer+json")


class Memberships(ServiceHandler):
    def get(self):
        if self.scoped(MEMBERSHIP_SCOPE):
            self.send(200, {"id": self.platform.memberships_url, "context": CONTEXT, "members": self.platform.members},
                      "application/vnd.ims.lti-nrps.v2.membershipcontainer+json")


@pytest.fixture(scope="module")
def services_platform():
    with serve_in_threads() as start:
        yield ServicesPlatform(start)
