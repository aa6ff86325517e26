"""An LTI 1.3 platform nobody here wrote, for the hub's tests: ``lti1p3platform`` 0.1.8 (PyPI) on loopback.

The package builds and signs the platform's messages (OIDC login initiation, the launch's id_token, the
deep-linking request) and checks what the tool sends back (the deep-linking response against the tool's
JWKS). It ships no server one can use here (its FastAPI adapter needs FastAPI, and has no deep-linking
route), so ``LtiPlatform`` serves it with tornado in a thread of the test process:

    GET  /jwks                the platform's public keys (the hub's LTI_JWKS_URL)
    GET  /launch/<id>         what a click on the tool's link in the LMS does: the OIDC login initiation
    GET  /authorize           the OIDC authorization endpoint (LTI_AUTHORIZE_URL): the signed launch form
    POST /deep_link_return    where a deep-linking response is posted; verified, its items kept

``lti1p3platform`` does not check the ``redirect_uri`` it posts the id_token to: a test platform, never
a production one. Routes are added by subclasses (``routes``), e.g. tests/lti_platform_services.py.

The fixture ``lti_platform`` starts one for a test module; ``hub_environment`` gives the settings a hub
needs to accept its launches, ``register_tool(hub_url)`` registers the hub with it, and
``browser_launch(browser, ...)`` opens the tool as an LMS user would, in a new Playwright context.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import pytest
import tornado.escape
import tornado.httpserver
import tornado.web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jinja2 import Environment, PackageLoader
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request, TRequest

from hub_helpers import serve_in_threads

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
LEARNER = LIS + "membership#Learner"
INSTRUCTOR = LIS + "membership#Instructor"
TEACHING_ASSISTANT = LIS + "membership/Instructor#TeachingAssistant"
CLIENT_ID = "attention-tool"
DEPLOYMENT_ID = "deployment-1"
CONTEXT = {"id": "course-42", "label": "DL", "title": "Deep learning"}
# the package's own auto-submitting form (its templates module needs pkg_resources, which is gone)
LAUNCH_FORM = Environment(loader=PackageLoader("lti1p3platform.framework", "templates"),
                          autoescape=True).get_template("launch.html")


def _pem(key: rsa.RSAPrivateKey, private: bool) -> str:
    if private:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode()
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


@dataclass
class PlannedLaunch:
    """One click on the tool's link in the LMS: who, with which roles, which message."""

    user: str
    roles: list[str]
    name: str = ""
    message_type: str = "LtiResourceLinkRequest"
    resource_link_id: str = "self-attention-link"
    target_link_uri: str | None = None  # default: the registration's launch URL
    custom: dict[str, str] = field(default_factory=dict)
    document_target: str = "window"
    deep_link_data: str | None = None


class PlatformConfiguration(LTI1P3PlatformConfAbstract):
    """lti1p3platform's platform: one registration, the tool's."""

    def init_platform_config(self, registration: Registration) -> None:
        self._registration = registration

    def get_registration_by_params(self, **kwargs: Any) -> Registration:
        return self._registration


class TornadoRequest(Request):
    def build_metadata(self, request: tornado.httputil.HTTPServerRequest) -> TRequest:
        def flat(arguments):
            return {name: values[-1].decode() for name, values in arguments.items()}

        return {"method": request.method, "form_data": flat(request.body_arguments),
                "get_data": flat(request.query_arguments), "headers": request.headers,
                "content_type": request.headers.get("Content-Type"), "path": request.path, "json": None}


class OIDCLogin(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs: Any) -> None:
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url: str) -> str:
        return url


class MessageLaunch(LTIAdvantageMessageLaunchAbstract):
    def render_launch_form(self, launch_data: dict[str, Any], **kwargs: Any) -> str:
        return LAUNCH_FORM.render(**launch_data)


class LtiPlatform:
    """``lti1p3platform`` served on 127.0.0.1 (see the module's docstring)."""

    def __init__(self, start_server):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.launches: dict[str, PlannedLaunch] = {}
        self.deep_link_responses: list[dict[str, Any]] = []  # each: the verified items, or the error
        self.url = start_server(tornado.httpserver.HTTPServer, tornado.web.Application(self.routes())).rstrip("/")
        self.registration = (Registration()
                             .set_iss(self.url).set_client_id(CLIENT_ID).set_deployment_id(DEPLOYMENT_ID)
                             .set_platform_private_key(_pem(self.key, True))
                             .set_platform_public_key(_pem(self.key, False)))
        self.tool_url: str | None = None

    def routes(self) -> list:
        return [
            (r"/jwks", KeySet, {"platform": self}),
            (r"/launch/([0-9a-f]+)", LoginInitiation, {"platform": self}),
            (r"/authorize", Authorization, {"platform": self}),
            (r"/deep_link_return", DeepLinkReturn, {"platform": self}),
            (r"/course/([0-9a-f]+)", CoursePage, {"platform": self}),
        ]

    def configuration(self) -> PlatformConfiguration:
        return PlatformConfiguration(registration=self.registration)

    def hub_environment(self) -> dict[str, str]:
        """The settings under which a hub accepts this platform's launches of the course."""
        return {"HUB_AUTHENTICATOR": "lti", "LTI_ISSUER": self.url, "LTI_CLIENT_ID": CLIENT_ID,
                "LTI_AUTHORIZE_URL": self.url + "/authorize", "LTI_JWKS_URL": self.url + "/jwks",
                "LTI_DEPLOYMENT_IDS": DEPLOYMENT_ID, "LTI_CONTEXT_IDS": CONTEXT["id"], "LTI_URI_SCHEME": "http",
                "LTI_USERNAME_KEY": ""}

    def add_service_claims(self, message: MessageLaunch) -> None:
        """The LTI Advantage claims a launch carries (none: this platform serves no services)."""

    def register_tool(self, hub_url: str) -> None:
        """What an administrator enters in the LMS: the URLs of docs/instructors/lms.md."""
        self.tool_url = hub_url.rstrip("/")
        (self.registration.set_launch_url(self.tool_url + "/hub/")
         .set_deeplink_launch_url(self.tool_url + "/hub/")
         .set_oidc_login_url(self.tool_url + "/hub/lti13/oauth_login")
         .set_tool_key_set_url(self.tool_url + "/hub/lti13/jwks"))
        self.registration.set_tool_key_set(None)  # the package keeps the key set it fetched: another hub, another key

    def plan(self, launch: PlannedLaunch) -> str:
        """The URL whose opening starts ``launch`` (the link the LMS shows)."""
        hint = secrets.token_hex(8)
        self.launches[hint] = launch
        return f"{self.url}/launch/{hint}"

    def course_page(self, launch: PlannedLaunch, host: str = "localhost") -> str:
        """The URL of an LMS course page that shows ``launch`` embedded (an iframe), served from ``host``:
        ``localhost`` is another site than the hub's 127.0.0.1, as an LMS is."""
        return self.plan(launch).replace("127.0.0.1", host).replace("/launch/", "/course/")

    def browser_launch(self, browser, user: str, roles: list[str], *, lands_on: str = r".*/(hub|user)/.*",
                       timeout_ms: int = 120_000, **launch: Any):
        """A page of a new Playwright context of ``browser`` that opened the tool as LMS user ``user``."""
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(timeout_ms)
        page = context.new_page()
        page.goto(self.plan(PlannedLaunch(user=user, roles=roles, **launch)))
        page.wait_for_url(re.compile(lands_on))
        return page


class PlatformHandler(tornado.web.RequestHandler):
    def initialize(self, platform: LtiPlatform):
        self.platform = platform


class KeySet(PlatformHandler):
    def get(self):
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps({"keys": self.platform.registration.get_jwks()}))


class LoginInitiation(PlatformHandler):
    def get(self, hint: str):
        launch = self.platform.launches.get(hint)
        if launch is None:
            raise tornado.web.HTTPError(404)
        login = OIDCLogin(TornadoRequest(self.request), self.platform.configuration())
        login.set_lti_message_hint(hint=hint)
        if launch.message_type == "LtiDeepLinkingRequest":
            login.set_deeplinking_launch_url()
        elif launch.target_link_uri:
            login.set_launch_url(launch.target_link_uri)
        self.redirect(login.initiate_login(launch.user))


class CoursePage(PlatformHandler):
    """A course page of the LMS with the tool embedded, as an LMS shows a tool set to open in its page."""

    def get(self, hint: str):
        if hint not in self.platform.launches:
            raise tornado.web.HTTPError(404)
        launch = f"{self.platform.url}/launch/{hint}"
        self.write(f"<!DOCTYPE html><title>Deep learning</title><h1>Deep learning</h1>"
                   f"<iframe id=tool title=\"Course hub\" src=\"{tornado.escape.xhtml_escape(launch)}\" "
                   f"width=1000 height=700></iframe>")


class Authorization(PlatformHandler):
    """The platform's answer to the tool's authentication request: the signed launch, auto-posted."""

    def get(self):
        launch = self.platform.launches.get(self.get_query_argument("lti_message_hint", ""))
        if launch is None or self.get_query_argument("login_hint", "") != launch.user:
            raise tornado.web.HTTPError(403, "unknown launch")
        message = MessageLaunch(TornadoRequest(self.request), self.platform.configuration())
        message.set_user_data(launch.user, launch.roles, full_name=launch.name or None)
        message.set_launch_context_claim(CONTEXT["id"], context_title=CONTEXT["title"],
                                         context_label=CONTEXT["label"])
        message.set_launch_presentation_claim(document_target=launch.document_target)
        if launch.custom:
            message.set_custom_parameters_claim(launch.custom)
        self.platform.add_service_claims(message)
        if launch.message_type == "LtiDeepLinkingRequest":
            message.set_dl(self.platform.url + "/deep_link_return", title="Add from the course hub",
                           accept_types={"ltiResourceLink"}, extra_data=launch.deep_link_data)
        else:
            message.set_resource_link_claim(launch.resource_link_id, title="Self-attention")
            if launch.target_link_uri:
                message.set_launch_url(launch.target_link_uri)
        self.write(message.lti_launch())

    post = get


class DeepLinkReturn(PlatformHandler):
    """The LMS's deep_link_return_url: checks the tool's signed response and keeps its content items."""

    def check_xsrf_cookie(self):
        return None

    def post(self):
        configuration = self.platform.configuration()
        response = self.get_body_argument("JWT", "")
        try:
            items = configuration.validate_deeplinking_resp({"JWT": response})
            claims = configuration.tool_validate_and_decode(response)
        except Exception as error:  # what the platform would show the instructor
            self.platform.deep_link_responses.append({"error": f"{type(error).__name__}: {error}"})
            raise tornado.web.HTTPError(400, "the deep-linking response was refused") from None
        self.platform.deep_link_responses.append({"items": items, "claims": claims})
        self.write("<!DOCTYPE html><title>Added</title><h1>Added to the course</h1><ul>" + "".join(
            f"<li>{tornado.escape.xhtml_escape(str(item.get('title', '')))}</li>" for item in items) + "</ul>")


@pytest.fixture(scope="module")
def lti_platform():
    with serve_in_threads() as start:
        yield LtiPlatform(start)


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def chromium():
    """Debian's chromium through Playwright, for ``LtiPlatform.browser_launch``."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def hub_user(page) -> dict[str, Any]:
    """The hub's model of the user the page is logged in as (its own API, with the page's cookies)."""
    hub = re.match(r"https?://[^/]+", page.url).group(0)
    xsrf = next((cookie["value"] for cookie in page.context.cookies(hub)
                 if cookie["name"] == "_xsrf" and cookie["path"] == "/hub/"), "")
    reply = page.request.get(hub + "/hub/api/user", headers={"X-XSRFToken": xsrf})
    assert reply.ok, (reply.status, reply.text()[:300])
    return reply.json()
