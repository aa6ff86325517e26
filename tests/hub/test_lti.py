"""LMS launches: a real JupyterHub on 127.0.0.1 configured by ``attention_platform.hub.lti.configure_lti``
from the environment, a throw-away LMS (an RSA key pair made here, its JWKS served
on 127.0.0.1) and signed LTI 1.3 launches for each role. No external LMS.

The ``test_attack_*`` tests are attacks by someone holding a real LMS account or a captured
launch: a role whose fragment says Instructor, a launch from another course or deployment,
a replayed launch, a username claim naming the hub admin or a system account. Each is a
launch signed by the LMS's own key against the running hub."""

from __future__ import annotations

import html
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import pytest

jwt = pytest.importorskip("jwt")
requests = pytest.importorskip("requests")
pytest.importorskip("ltiauthenticator")
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from jwt.algorithms import RSAAlgorithm  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
from attention_platform.hub.lti import (  # noqa: E402
    RESERVED_USERNAMES, USERNAME_PATTERN, CourseLTI13Authenticator, SpentNonces, clean_username, configure_lti,
    course_roles, default_role_groups, groups_for_roles, parse_role_groups,
)
from tornado.web import HTTPError  # noqa: E402
from hub_helpers import free_port  # noqa: E402

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
LEARNER = LIS + "membership#Learner"
INSTRUCTOR = LIS + "membership#Instructor"
TA = LIS + "membership/Instructor#TeachingAssistant"
ISSUER = "https://lms.example.test"
CLIENT_ID = "attention-tool-1"
DEPLOYMENT = "deployment-1"
CONTEXT = "course-42"
ADMIN = "instructor"
KID = "lms-key-1"
COURSE = "dl-attention"
STUDENTS, GRADERS, INSTRUCTORS = f"nbgrader-{COURSE}", f"formgrade-{COURSE}", f"instructors-{COURSE}"
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"


# ---------------------------------------------------------------- unit: mapping and configuration

SUB_ROLE_NAMED_INSTRUCTOR = LIS + "membership/Learner#Instructor"


@pytest.mark.parametrize("case, roles, groups", [
    ("learner", [LEARNER], [STUDENTS]),
    ("teaching assistant", [TA], [GRADERS]),
    ("instructor", [INSTRUCTOR], sorted([GRADERS, INSTRUCTORS])),
    ("Canvas sends a TA as Instructor plus the TA sub-role: a TA", [INSTRUCTOR, TA], [GRADERS]),
    ("institution roles add nothing", [LEARNER, LIS + "institution/person#Instructor"], [STUDENTS]),
    ("a sub-role is not its fragment", [SUB_ROLE_NAMED_INSTRUCTOR], []),
    ("a sub-role beside a real role adds nothing", [LEARNER, SUB_ROLE_NAMED_INSTRUCTOR], [STUDENTS]),
    ("another vocabulary's #Learner", ["https://lms.example.test/roles#Learner"], []),
    ("LTI 1.1 short names", ["Learner", "Instructor"], []),
    ("a mentor", [LIS + "membership#Mentor"], []),
    ("a role that differs in case", [LIS + "membership#instructor"], []),
    ("roles that are not a list", LEARNER, []),
    ("no roles", [], []),
])
def test_roles_map_by_their_full_uri(case, roles, groups):
    assert groups_for_roles(roles, default_role_groups(COURSE)) == groups, case


def test_role_table_is_keyed_by_full_uri():
    mapping = parse_role_groups(f"{LEARNER}=s1 ; {TA}=g1;\n{INSTRUCTOR}=g1, i1")
    assert mapping == {LEARNER: ["s1"], TA: ["g1"], INSTRUCTOR: ["g1", "i1"]}
    assert course_roles([INSTRUCTOR, TA, LEARNER], mapping) == {TA, LEARNER}
    # a table without the TA row still keeps a Canvas TA out of Instructor
    assert groups_for_roles([INSTRUCTOR, TA], parse_role_groups(f"{INSTRUCTOR}=i1")) == []
    # the LTI 1.1 URN may be mapped on purpose, by its whole string
    assert groups_for_roles(["urn:lti:role:ims/lis/Learner"], parse_role_groups("urn:lti:role:ims/lis/Learner=s1")) == ["s1"]
    for bad in ("Learner=s1", f"{LEARNER}", "=s1"):
        with pytest.raises(ValueError, match="LTI_ROLE_GROUPS"):
            parse_role_groups(bad)


def test_configure_lti_reads_the_environment():
    from traitlets.config import Config

    env = {"LTI_ISSUER": ISSUER, "LTI_CLIENT_ID": "a, b", "LTI_AUTHORIZE_URL": "https://lms/auth",
           "LTI_JWKS_URL": "https://lms/jwks", "LTI_DEPLOYMENT_IDS": "d1, d2", "LTI_CONTEXT_IDS": "c1",
           "LTI_USERNAME_KEY": "custom_login",
           "LTI_ROLE_GROUPS": f"{LEARNER}=s1;{TA}=g1;{INSTRUCTOR}=g1,i1", "LTI_URI_SCHEME": "https"}
    c = Config()
    configure_lti(c, env)
    auth = CourseLTI13Authenticator(config=c)
    assert (auth.issuer, auth.client_id, auth.authorize_url, auth.jwks_endpoint) == (
        ISSUER, {"a", "b"}, "https://lms/auth", "https://lms/jwks")
    assert auth.username_key == "custom_login" and auth.uri_scheme == "https"
    assert (auth.deployment_ids, auth.context_ids) == ({"d1", "d2"}, {"c1"})
    assert auth.role_groups == {LEARNER: ["s1"], TA: ["g1"], INSTRUCTOR: ["g1", "i1"]}
    assert auth.manage_groups and auth.allow_all
    for name, blank in (("LTI_JWKS_URL", " "), ("LTI_DEPLOYMENT_IDS", " , "), ("LTI_CONTEXT_IDS", ",")):
        for missing in ({k: v for k, v in env.items() if k != name}, dict(env, **{name: blank})):
            with pytest.raises(SystemExit, match=name):
                configure_lti(Config(), missing)
    with pytest.raises(ValueError, match="LTI_ROLE_GROUPS"):
        configure_lti(Config(), dict(env, LTI_ROLE_GROUPS="Learner=s1"))


def test_the_username_claim_is_sub_unless_set():
    """``sub`` is the one claim an LMS assigns for good and never lets a user edit; ``email`` (upstream's
    default) can be edited and shared, so one LMS user could launch into another's account."""
    from traitlets.config import Config

    env = {"LTI_ISSUER": ISSUER, "LTI_CLIENT_ID": CLIENT_ID, "LTI_AUTHORIZE_URL": "https://lms/auth",
           "LTI_JWKS_URL": "https://lms/jwks", "LTI_DEPLOYMENT_IDS": DEPLOYMENT, "LTI_CONTEXT_IDS": CONTEXT}
    assert CourseLTI13Authenticator().username_key == "sub"
    for unset in ({}, {"LTI_USERNAME_KEY": ""}):
        c = Config()
        configure_lti(c, dict(env, **unset))
        auth = CourseLTI13Authenticator(config=c)
        assert auth.username_key == "sub"
        assert auth.get_username({"sub": "a1b2c3", "email": "someone.else@lms.test"}) == "a1b2c3"


def _course_authenticator(**settings):
    auth = CourseLTI13Authenticator(issuer=ISSUER, client_id={CLIENT_ID}, deployment_ids={DEPLOYMENT},
                                    context_ids={CONTEXT})
    for name, value in settings.items():
        setattr(auth, name, value)
    return auth


def _claims(**changes):
    token = {"iss": ISSUER, "aud": CLIENT_ID, CLAIM + "deployment_id": DEPLOYMENT, CLAIM + "context": {"id": CONTEXT}}
    for name, value in changes.items():
        name = CLAIM + name[len("lti_"):] if name.startswith("lti_") else name
        if value is None:
            token.pop(name, None)
        else:
            token[name] = value
    return token


@pytest.mark.parametrize("case, token, settings, says", [
    ("this course's launch", _claims(), {}, None),
    ("aud as a one-element list", _claims(aud=[CLIENT_ID]), {}, None),
    ("two of our client ids, azp ours", _claims(aud=[CLIENT_ID, "mine-2"], azp="mine-2"),
     {"client_id": {CLIENT_ID, "mine-2"}}, None),
    ("any course of a course-level deployment", _claims(lti_context={"id": "course-99"}), {"context_ids": {"*"}}, None),
    ("another issuer", _claims(iss="https://other.example"), {}, "issuer"),
    ("an issuer differing in case", _claims(iss=ISSUER.upper()), {}, "issuer"),
    ("no issuer configured", _claims(), {"issuer": ""}, "issuer"),
    ("another client id", _claims(aud="other"), {}, "client id"),
    ("an untrusted extra audience", _claims(aud=[CLIENT_ID, "other"], azp=CLIENT_ID), {}, "client id"),
    ("two audiences, no azp", _claims(aud=[CLIENT_ID, "mine-2"]), {"client_id": {CLIENT_ID, "mine-2"}}, "client id"),
    ("azp of another tool", _claims(azp="other"), {}, "client id"),
    ("no audience", _claims(aud=[]), {}, "client id"),
    ("another deployment", _claims(lti_deployment_id="deployment-2"), {}, "deployment"),
    ("no deployment configured", _claims(), {"deployment_ids": set()}, "deployment"),
    ("another course", _claims(lti_context={"id": "course-99", "title": "ML"}), {}, "context"),
    ("no context claim", _claims(lti_context=None), {}, "context"),
    ("no context claim, any course accepted", _claims(lti_context=None), {"context_ids": {"*"}}, "context"),
    ("a context without id", _claims(lti_context={"label": "DL"}), {}, "context"),
    ("no course configured", _claims(), {"context_ids": set()}, "context"),
])
def test_launch_refusal_names_what_does_not_match(case, token, settings, says):
    refusal = _course_authenticator(**settings).launch_refusal(token)
    if says is None:
        assert refusal is None, (case, refusal)
    else:
        assert refusal and says in refusal.lower(), (case, refusal)


class Clock:
    """Time that moves only when a test says so."""

    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def _refused(spent, nonce, issued_at, deadline):
    with pytest.raises(HTTPError) as refused:
        spent.spend(nonce, issued_at, deadline)
    return refused.value.status_code, refused.value.log_message


def test_a_nonce_is_spent_once_and_forgotten_after_its_deadline():
    clock = Clock()
    spent = SpentNonces(capacity=10, clock=clock)
    issued = clock.now + 1
    spent.spend("n1", issued, deadline=clock.now + 300)
    status, text = _refused(spent, "n1", issued, clock.now + 300)
    assert status == 403 and "already been used" in text
    clock.now += 299
    assert _refused(spent, "n1", issued, clock.now + 300)[0] == 403, "still remembered within its lifetime"
    clock.now += 2
    spent.spend("n2", clock.now, clock.now + 300)  # each spend first forgets the expired ones
    assert len(spent) == 1


def test_nonces_are_bounded_and_fail_closed_when_full():
    clock = Clock()
    spent = SpentNonces(capacity=3, clock=clock)
    for i in range(3):
        spent.spend(f"n{i}", clock.now, clock.now + 100 + i)
    status, text = _refused(spent, "n3", clock.now, clock.now + 100)
    assert status == 503 and "launch again" in text and len(spent) == 3
    clock.now += 100.5  # n0 expired: room for one
    spent.spend("n3", clock.now, clock.now + 100)
    assert _refused(spent, "n4", clock.now, clock.now + 100)[0] == 503
    assert _refused(spent, "n1", clock.now, clock.now + 100)[0] == 403, "a live nonce is never dropped to make room"


def test_a_launch_issued_before_the_process_started_is_refused():
    clock = Clock(1_000_000.75)
    spent = SpentNonces(capacity=10, clock=clock)
    status, text = _refused(spent, "n1", 999_999, clock.now + 300)
    assert status == 403 and "before the hub last started" in text and len(spent) == 0
    spent.spend("n2", 1_000_000, clock.now + 300)  # iat is whole seconds: the start's own second is in


@pytest.mark.parametrize("case, raw, name", [
    ("an email", "alice@uni.example", "alice@uni.example"),
    ("capitals are folded", "Carol.Smith+DL@Uni.Example", "carol.smith+dl@uni.example"),
    ("an opaque LMS id", "a1b2c3-d4", "a1b2c3-d4"),
    ("64 characters", "e" * 64, "e" * 64),
    ("65 characters", "e" * 65, None),
    ("empty", "", None),
    ("not a string", 42, None),
    ("full-width letters", "ｉｎｓｔｒｕｃｔｏｒ", None),
    ("a ligature", "ﬁona@uni.example", None),
    ("a superscript", "bob²@uni.example", None),
    ("a dotless i", "ınstructor", None),
    ("a dotted capital I", "İnstructor", None),
    ("a Cyrillic a", "\u0430dmin", None),
    ("a NUL", "eve\x00@lms.test", None),
    ("a newline at the end", "eve@lms.test\n", None),
    ("a zero-width space", "ad\u200bmin", None),
    ("a right-to-left override", "eve\u202e@lms.test", None),
    ("a space", "eve smith", None),
    ("a leading dot", ".eve", None),
    ("a leading dash", "-eve", None),
    ("a path", "../eve", None),
    ("a colon", "eve:x", None),
])
def test_clean_username(case, raw, name):
    if name is None:
        with pytest.raises(ValueError):
            clean_username(raw)
    else:
        assert clean_username(raw) == name, case
        assert USERNAME_PATTERN.fullmatch(name)


def _a_system_account_we_did_not_list():
    for entry in pwd.getpwall():
        if (entry.pw_uid < 1000 and entry.pw_name not in RESERVED_USERNAMES
                and USERNAME_PATTERN.fullmatch(entry.pw_name)):
            return entry.pw_name
    return None


@pytest.mark.parametrize("case, name, says", [
    ("a learner", "alice@uni.example", None),
    ("a configured hub admin", ADMIN, "administrator"),
    ("an admin configured with capitals", "boss", "administrator"),
    ("root", "root", "reserved"),
    ("nobody", "nobody", "reserved"),
    ("a reserved name added by the course", "course-robot", "reserved"),
    ("a system account of this machine", _a_system_account_we_did_not_list(), "reserved"),
])
def test_username_refusal(case, name, says):
    if name is None:
        pytest.skip("this machine has no system account outside RESERVED_USERNAMES")
    auth = CourseLTI13Authenticator(admin_users={ADMIN, "Boss"},
                                    reserved_usernames=set(RESERVED_USERNAMES) | {"course-robot"})
    refusal = auth.username_refusal(name)
    if says is None:
        assert refusal is None, (case, refusal)
    else:
        assert refusal and says in refusal, (case, refusal)


# ---------------------------------------------------------------- integration: a real hub

def _chp() -> str | None:
    local = REPO / "node_modules" / ".bin" / "configurable-http-proxy"
    return str(local) if local.exists() else shutil.which("configurable-http-proxy")


class LMS:
    """The platform side: a key pair, its JWKS on 127.0.0.1, and signed id_tokens."""

    def __init__(self, delay: float = 0.0):
        """``delay``: seconds the JWKS endpoint waits before it answers; ``fetches`` counts its answers,
        ``fetching`` is set while one is being answered."""
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update(kid=KID, alg="RS256", use="sig")
        body = json.dumps({"keys": [jwk]}).encode()
        self.delay, self.fetches, self.fetching = delay, 0, threading.Event()
        lms = self

        class JWKS(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if self.path == "/jwks.json":
                    lms.fetching.set()
                    time.sleep(lms.delay)
                    lms.fetches += 1
                    lms.fetching.clear()
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body if self.path == "/jwks.json" else b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), JWKS)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def id_token(self, *, user, roles, nonce, key=None, claims=None):
        """A signed launch of the LMS user whose ``sub`` is ``user`` (the hub's default username claim);
        ``claims`` replaces claims of a regular one (None removes the claim)."""
        now = int(time.time())
        token = {
            "iss": ISSUER, "aud": CLIENT_ID, "sub": user, "email": f"{uuid.uuid5(uuid.NAMESPACE_DNS, user).hex}@lms.test",
            "iat": now, "exp": now + 300, "nonce": nonce,
            CLAIM + "version": "1.3.0", CLAIM + "deployment_id": DEPLOYMENT,
            CLAIM + "message_type": "LtiResourceLinkRequest", CLAIM + "target_link_uri": "http://127.0.0.1/hub",
            CLAIM + "resource_link": {"id": "self-attention-link"}, CLAIM + "roles": roles,
            CLAIM + "context": {"id": CONTEXT, "label": "DL", "title": "Deep learning"},
        }
        for name, value in (claims or {}).items():
            if value is None:
                token.pop(name, None)
            else:
                token[name] = value
        return jwt.encode(token, key or self.key, algorithm="RS256", headers={"kid": KID})


HUB_CONFIG = """
from attention_platform.hub.lti import configure_lti
configure_lti(c)
# as jupyter_config/jupyterhub_config.py does after configure_lti
c.Authenticator.admin_users = {{{admin!r}}}
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.pid_file = {state!r} + "/proxy.pid"
c.JupyterHub.db_url = "sqlite:///" + {state!r} + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = {state!r} + "/cookie_secret"
# the checker plays the hub admin too: it promotes a user at run time
c.JupyterHub.services = [{{"name": "checker", "api_token": {token!r}, "admin": True}}]
c.JupyterHub.load_roles = [
    {{"name": "graders", "scopes": ["access:services"], "groups": [{graders!r}]}},
]
"""


class Hub:
    """A real JupyterHub (and its proxy) on 127.0.0.1, configured by ``configure_lti`` from
    the environment; ``restart`` keeps its state directory (database, cookie secret)."""

    def __init__(self, state: Path, lms: LMS, chp: str):
        self.state, self.lms, self.token = state, lms, uuid.uuid4().hex
        port, hub_port, api_port = free_port(), free_port(), free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.log = state / "hub.log"
        (state / "jupyterhub_config.py").write_text(HUB_CONFIG.format(
            port=port, hub_port=hub_port, api_port=api_port, chp=chp, state=str(state),
            token=self.token, graders=GRADERS, admin=ADMIN))
        self.env = dict(os.environ, LTI_ISSUER=ISSUER, LTI_CLIENT_ID=CLIENT_ID, LTI_URI_SCHEME="http",
                        LTI_AUTHORIZE_URL=lms.url + "/authorize", LTI_JWKS_URL=lms.url + "/jwks.json",
                        LTI_DEPLOYMENT_IDS=DEPLOYMENT, LTI_CONTEXT_IDS=CONTEXT, NBGRADER_COURSE_ID=COURSE,
                        HUB_STATE_DIR=str(state),
                        PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
        for name in ("LTI_ROLE_GROUPS", "LTI_USERNAME_KEY", "LTI_ALLOW_UNMAPPED_ROLES"):
            self.env.pop(name, None)
        self.proc = None

    def start(self):
        log = open(self.log, "a")
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "jupyterhub"), "-f", "jupyterhub_config.py"],
                                     cwd=self.state, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                pytest.fail("the hub exited:\n" + self.log.read_text()[-3000:])
            try:
                if requests.get(self.base + "/hub/api", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the hub did not start in 60 s:\n" + self.log.read_text()[-3000:])
            time.sleep(0.3)

    def stop(self):
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        self.start()

    def api(self, method, path, **kw):
        return requests.request(method, self.base + "/hub/api" + path,
                                headers={"Authorization": "token " + self.token}, timeout=10, **kw)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    chp = _chp()
    if chp is None:
        pytest.skip("configurable-http-proxy is not installed (make system-deps)")
    lms = LMS()
    running = Hub(tmp_path_factory.mktemp("hub"), lms, chp)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        lms.server.shutdown()


def _login_init(hub, user):
    """Step 1 (LMS → tool): OIDC login initiation; returns the session and the authorize request."""
    session = requests.Session()
    r = session.post(hub.base + "/hub/lti13/oauth_login", allow_redirects=False, data={
        "iss": ISSUER, "login_hint": user, "target_link_uri": hub.base + "/hub", "client_id": CLIENT_ID,
        "lti_message_hint": "hint-1"})
    assert r.status_code == 302, r.text[:500]
    location = urlparse(r.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == hub.lms.url + "/authorize"
    return session, {k: v[0] for k, v in parse_qs(location.query).items()}


class Launch:
    """One launch as it crosses the wire: the browser's cookies and the id_token form post,
    i.e. everything an attacker who captured it holds."""

    def __init__(self, hub, user, roles, *, nonce=None, key=None, claims=None):
        self.session, auth = _login_init(hub, user)
        assert auth["client_id"] == CLIENT_ID and auth["response_type"] == "id_token"
        token = hub.lms.id_token(user=user, roles=roles, nonce=nonce or auth["nonce"], key=key, claims=claims)
        self.url = auth["redirect_uri"]
        self.form = {"id_token": token, "state": auth["state"]}
        self.cookies = self.session.cookies.get_dict()

    def post(self):
        return self.session.post(self.url, data=self.form, allow_redirects=False)

    def replay(self):
        """The captured request sent again from another machine: same cookies, same form."""
        return requests.post(self.url, data=self.form, cookies=self.cookies, allow_redirects=False)


def launch(hub, user, roles, *, nonce=None, key=None, claims=None):
    """A whole launch; returns the callback response (the tool's answer to the signed id_token)."""
    return Launch(hub, user, roles, nonce=nonce, key=key, claims=claims).post()


def logged_in(response) -> bool:
    return "jupyterhub-hub-login" in response.headers.get("Set-Cookie", "")


def message(response) -> str:
    return html.unescape(response.content.decode("utf-8", "replace"))  # the page says utf-8 in a meta tag only


def user_model(hub, name):
    r = hub.api("GET", "/users/" + quote(name, safe=""))
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return r.json()


def groups_of(hub, name):
    model = user_model(hub, name)
    return None if model is None else sorted(model["groups"])


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.parametrize("user, roles, groups", [
    ("learner@lms.test", [LEARNER], [STUDENTS]),
    ("ta@lms.test", [INSTRUCTOR, TA], [GRADERS]),
    ("prof@lms.test", [INSTRUCTOR, LIS + "institution/person#Faculty"], sorted([GRADERS, INSTRUCTORS])),
])
def test_signed_launch_puts_each_role_in_its_groups(hub, user, roles, groups):
    r = launch(hub, user, roles)
    assert r.status_code == 302, r.text[:500]
    assert logged_in(r), "the launch logs the user in"
    assert groups_of(hub, user) == groups


@pytest.mark.slow
@pytest.mark.hub
def test_the_tool_serves_its_public_key_set_and_keeps_the_key_for_the_hub_alone(hub):
    r = requests.get(hub.base + "/hub/lti13/jwks", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    (key,) = r.json()["keys"]
    assert key["kty"] == "RSA" and key["kid"] and "d" not in key
    assert (hub.state / "lti-tool-key.pem").stat().st_mode & 0o077 == 0


@pytest.mark.slow
@pytest.mark.hub
def test_the_tool_configuration_asks_only_for_what_the_tool_uses(hub):
    """Upstream's asked for AGS, NRPS and nine Canvas scopes this hub never uses (it calls no LMS service
    unless set to), and gave a target link URI without /hub/ and no redirect URI."""
    r = requests.get(hub.base + "/hub/lti13/config", timeout=10)
    assert r.status_code == 200
    configuration = r.json()
    assert configuration["scopes"] == []
    assert configuration["target_link_uri"] == hub.base + "/hub/"
    assert configuration["oidc_initiation_url"] == hub.base + "/hub/lti13/oauth_login"
    assert configuration["redirect_uris"] == [hub.base + "/hub/lti13/oauth_callback"]
    assert configuration["public_jwk_url"] == hub.base + "/hub/lti13/jwks"
    assert "email" not in json.dumps(configuration), "no custom field sends the user's e-mail"
    (placement,) = configuration["extensions"][0]["settings"]["placements"]
    assert placement["target_link_uri"] == hub.base + "/hub/" and placement["windowTarget"] == "_blank"


@pytest.mark.slow
@pytest.mark.hub
def test_groups_follow_the_lms_role_at_every_launch(hub):
    assert launch(hub, "switch@lms.test", [INSTRUCTOR]).status_code == 302
    assert groups_of(hub, "switch@lms.test") == sorted([GRADERS, INSTRUCTORS])
    assert launch(hub, "switch@lms.test", [LEARNER]).status_code == 302
    assert groups_of(hub, "switch@lms.test") == [STUDENTS]


@pytest.mark.slow
@pytest.mark.hub
def test_bad_signature_is_rejected(hub):
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    r = launch(hub, "forged@lms.test", [INSTRUCTOR], key=forger)
    assert r.status_code == 400 and "signature" in r.text.lower()
    assert not logged_in(r)
    assert groups_of(hub, "forged@lms.test") is None


@pytest.mark.slow
@pytest.mark.hub
def test_wrong_nonce_is_rejected(hub):
    r = launch(hub, "replay@lms.test", [LEARNER], nonce="a-nonce-from-another-launch")
    assert r.status_code == 400 and "nonce" in r.text.lower()
    assert groups_of(hub, "replay@lms.test") is None


@pytest.mark.slow
@pytest.mark.hub
def test_role_without_a_course_group_is_refused(hub):
    r = launch(hub, "mentor@lms.test", [LIS + "membership#Mentor"])
    assert r.status_code == 403
    assert groups_of(hub, "mentor@lms.test") is None


# ---------------------------------------------------------------- attacks: each a signed launch doing exactly that

@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.parametrize("case, roles, groups", [
    ("a Learner sub-role whose fragment is Instructor", [SUB_ROLE_NAMED_INSTRUCTOR], None),
    ("a student who also carries that sub-role", [LEARNER, SUB_ROLE_NAMED_INSTRUCTOR], [STUDENTS]),
    ("an institution role Instructor", [LIS + "institution/person#Instructor"], None),
    ("a system role Administrator", [LIS + "system/person#Administrator"], None),
    ("another vocabulary's #Instructor", ["https://lms.example.test/vocab/custom#Instructor"], None),
    ("an Instructor sub-role other than TA", [LIS + "membership/Instructor#Grader"], None),
    ("the LTI 1.1 short name", ["Instructor"], None),
    ("the LTI 1.1 URN", ["urn:lti:role:ims/lis/Instructor"], None),
    ("a TA whom Canvas also calls Instructor", [INSTRUCTOR, TA], [GRADERS]),
    ("a learner sub-role whose fragment is TeachingAssistant", [LIS + "membership/Learner#TeachingAssistant"], None),
])
def test_attack_roles_are_matched_on_their_full_uri(hub, case, roles, groups):
    user = f"roles-{uuid.uuid4().hex[:8]}@lms.test"
    r = launch(hub, user, roles)
    if groups is None:
        assert r.status_code == 403, (case, r.status_code)
        assert not logged_in(r) and groups_of(hub, user) is None, case
        assert "role" in message(r).lower()
    else:
        assert r.status_code == 302, (case, message(r)[:500])
        assert groups_of(hub, user) == groups, case


OTHER_COURSE = {"id": "course-99", "label": "ML", "title": "Machine learning"}


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.parametrize("case, claims, says", [
    ("an instructor of another course of the same LMS", {CLAIM + "context": OTHER_COURSE}, "context"),
    ("another deployment of the tool in the same LMS", {CLAIM + "deployment_id": "deployment-2"}, "deployment"),
    ("a launch that names no course", {CLAIM + "context": None}, "context"),
    ("another platform signing with the same keys", {"iss": "https://other-lms.example.test"}, "issuer"),
    ("a token for another tool of the LMS", {"aud": "another-tool"}, "client id"),
    ("a token for this tool and an untrusted one", {"aud": [CLIENT_ID, "another-tool"], "azp": CLIENT_ID}, "client id"),
    ("a token authorised by another party", {"aud": [CLIENT_ID, "another-tool"], "azp": "another-tool"}, "client id"),
])
def test_attack_launch_from_elsewhere_is_refused(hub, case, claims, says):
    user = f"elsewhere-{uuid.uuid4().hex[:8]}@lms.test"
    r = launch(hub, user, [INSTRUCTOR], claims=claims)
    assert r.status_code == 403, (case, r.status_code, message(r)[:300])
    assert says in message(r).lower(), (case, message(r)[:1000])
    assert not logged_in(r) and groups_of(hub, user) is None, case


@pytest.mark.slow
@pytest.mark.hub
def test_attack_captured_launch_is_replayed(hub):
    captured = Launch(hub, "replayed-prof@lms.test", [INSTRUCTOR])
    first = captured.post()
    assert first.status_code == 302 and logged_in(first)
    again = captured.replay()
    assert again.status_code == 403, (again.status_code, message(again)[:300])
    assert "already been used" in message(again) and not logged_in(again)


@pytest.mark.slow
@pytest.mark.hub
def test_attack_captured_launch_is_replayed_after_a_hub_restart(hub):
    captured = Launch(hub, "restart-prof@lms.test", [INSTRUCTOR])
    assert captured.post().status_code == 302
    hub.restart()
    again = captured.replay()
    assert again.status_code == 403, (again.status_code, message(again)[:300])
    assert "launch again" in message(again).lower() and not logged_in(again)


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.parametrize("case, username, why", [
    ("the hub admin's name", ADMIN, "administrator"),
    ("the hub admin's name in capitals", ADMIN.upper(), "administrator"),
    ("the hub admin's name in full-width letters", "ｉｎｓｔｒｕｃｔｏｒ", "not a valid user name"),
    ("root", "root", "reserved"),
    ("a system account", "daemon", "reserved"),
    ("nobody", "nobody", "reserved"),
    ("admin", "admin", "reserved"),
    ("a control character", "eve\x00@lms.test", "not a valid user name"),
    ("a newline", "eve\n@lms.test", "not a valid user name"),
    ("a leading dash", "-eve@lms.test", "not a valid user name"),
    ("a slash", "../eve@lms.test", "not a valid user name"),
    ("a dotless i", "ınstructor", "not a valid user name"),
    ("too long", "e" * 65, "not a valid user name"),
])
def test_attack_username_claims_a_reserved_or_unclean_name(hub, case, username, why):
    r = launch(hub, username, [INSTRUCTOR])
    assert r.status_code == 403, (case, r.status_code, message(r)[:300])
    assert why in message(r).lower(), (case, message(r)[:1000])
    assert not logged_in(r), case
    admin = user_model(hub, ADMIN)
    assert admin["admin"] and admin["groups"] == [], "the hub admin is untouched"


@pytest.mark.slow
@pytest.mark.hub
def test_attack_an_edited_email_does_not_reach_another_account(hub):
    """A student sets their LMS e-mail to a TA's (LMSs let users edit it, and do not keep it unique):
    they still land in their own account, and the TA's keeps its groups."""
    ta, student = f"ta-{uuid.uuid4().hex[:8]}", f"student-{uuid.uuid4().hex[:8]}"
    assert launch(hub, ta, [INSTRUCTOR, TA], claims={"email": "ta@uni.test"}).status_code == 302
    r = launch(hub, student, [LEARNER], claims={"email": "ta@uni.test"})
    assert r.status_code == 302 and logged_in(r), message(r)[:500]
    assert groups_of(hub, student) == [STUDENTS] and groups_of(hub, ta) == [GRADERS]
    assert groups_of(hub, "ta@uni.test") is None


@pytest.mark.slow
@pytest.mark.hub
def test_attack_username_of_a_user_made_admin_at_run_time(hub):
    assert hub.api("POST", "/users/promoted", json={"admin": True}).status_code == 201
    r = launch(hub, "promoted", [LEARNER])
    assert r.status_code == 403 and "administrator" in message(r) and not logged_in(r)
    assert user_model(hub, "promoted")["admin"] and groups_of(hub, "promoted") == []


@pytest.mark.slow
@pytest.mark.hub
def test_lti_users_are_never_hub_admins_and_names_are_normalised(hub):
    r = launch(hub, "Carol.Smith+dl@LMS.test", [INSTRUCTOR])
    assert r.status_code == 302, message(r)[:500]
    model = user_model(hub, "carol.smith+dl@lms.test")
    assert model and not model["admin"] and model["groups"] == sorted([GRADERS, INSTRUCTORS])


# ---------------------------------------------------------------- LMS ids that are not Unix account names

CANVAS_SUB = "8c2c8f46-2bd1-4bc2-9e2b-1f6b4d6a7e01"  # a UUID: 36 characters
MOODLE_SUB = "2417"  # digits only


def _native_authenticator(tmp_path, **settings):
    return _course_authenticator(unix_account_names=True, lms_ids_file=str(tmp_path / "lms-ids.json"), **settings)


def _authenticate(auth, sub, **claims):
    import asyncio

    token = _claims(sub=sub, lti_roles=[LEARNER], **claims)
    return asyncio.run(auth.authenticate(None, token))


@pytest.mark.parametrize("case, sub, kept", [
    ("a Canvas UUID", CANVAS_SUB, False),
    ("a Moodle number", MOODLE_SUB, False),
    ("an e-mail", "alice@uni.example", False),
    ("capitals (sub is case-sensitive: Alice is not alice)", "Alice", False),
    ("255 characters", "x" * 255, False),
    ("a name that is already a Unix account name", "alice", True),
    ("an account name shaped like a mapped one", "lti-aaaaaaaaaaaaaaaa", False),
])
def test_every_lms_id_gets_a_unix_account_name(tmp_path, case, sub, kept):
    from attention_platform.hub import accounts

    auth = _native_authenticator(tmp_path)
    name = _authenticate(auth, sub)["name"]
    assert accounts.name_problem(name) is None, (case, name)
    assert (name == sub) is kept, (case, name)
    again = _native_authenticator(tmp_path)
    assert _authenticate(again, sub)["name"] == name, "the same LMS user gets the same name at every launch"
    if not kept:
        assert name.startswith("lti-") and name != _authenticate(auth, "y" + sub[1:])["name"]
        assert json.loads((tmp_path / "lms-ids.json").read_text())[name] == {"issuer": ISSUER, "claim": "sub", "id": sub}
        assert (tmp_path / "lms-ids.json").stat().st_mode & 0o077 == 0, "the table is the hub's alone"


def test_mapped_names_differ_by_issuer_and_by_case():
    from attention_platform.hub.lti import unix_account_name

    names = {unix_account_name(ISSUER, "Alice"), unix_account_name(ISSUER, "alice@x"),
             unix_account_name("https://other.example", "Alice"), unix_account_name(ISSUER, "ALICE")}
    assert len(names) == 4


@pytest.mark.parametrize("case, sub", [("not a string", 2417), ("over 255 characters", "x" * 256)])
def test_an_lms_id_that_cannot_be_mapped_is_refused_at_login(tmp_path, case, sub):
    with pytest.raises(HTTPError) as refused:
        _authenticate(_native_authenticator(tmp_path), sub)
    assert refused.value.status_code == 403 and "ask your instructor" in refused.value.log_message, case
    assert not (tmp_path / "lms-ids.json").exists()


# ---------------------------------------------------------------- the platform's key set

def _timed_get(url):
    started = time.monotonic()
    requests.get(url, timeout=60)
    return time.monotonic() - started


@pytest.mark.slow
@pytest.mark.hub
def test_a_slow_key_set_holds_up_neither_the_hub_nor_a_second_launch(tmp_path):
    """The LMS's JWKS takes seconds to answer: while a launch waits for it, the hub answers others as
    fast as when idle (compared with the wait itself, measured here); the next launch uses the cached key."""
    chp = _chp()
    if chp is None:
        pytest.skip("configurable-http-proxy is not installed (make system-deps)")
    lms = LMS(delay=3.0)
    slow = Hub(tmp_path, lms, chp)
    try:
        slow.start()
        first = Launch(slow, "slow-jwks@lms.test", [LEARNER])
        answers = {}

        def post():
            started = time.monotonic()
            answers["launch"] = first.post()
            answers["seconds"] = time.monotonic() - started

        launching = threading.Thread(target=post)
        launching.start()
        assert lms.fetching.wait(30), "the launch fetches the key set"
        during = _timed_get(slow.base + "/hub/health")
        launching.join(60)
        assert answers["launch"].status_code == 302, message(answers["launch"])[:500]
        assert lms.fetches == 1
        assert during < answers["seconds"] / 3, (during, answers["seconds"])

        second = launch(slow, "slow-jwks-2@lms.test", [LEARNER])
        assert second.status_code == 302 and logged_in(second), message(second)[:500]
        assert lms.fetches == 1, "the second launch uses the cached key"
    finally:
        slow.stop()
        lms.server.shutdown()


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a Unix account per hub user needs root (CI is root)")
def test_native_hub_serves_lms_users_whose_ids_are_no_unix_names():
    """``attention-course hub`` with HUB_AUTHENTICATOR=lti: a Canvas UUID and a Moodle number each log in
    as their own Unix account and get a server; the launcher prints the LMS's URLs, no password."""
    from types import SimpleNamespace

    from hub_helpers import HubSession, launch_hub

    lms = LMS()
    env = {"HUB_AUTHENTICATOR": "lti", "LTI_ISSUER": ISSUER, "LTI_CLIENT_ID": CLIENT_ID, "LTI_URI_SCHEME": "http",
           "LTI_AUTHORIZE_URL": lms.url + "/authorize", "LTI_JWKS_URL": lms.url + "/jwks.json",
           "LTI_DEPLOYMENT_IDS": DEPLOYMENT, "LTI_CONTEXT_IDS": CONTEXT, "LTI_USERNAME_KEY": ""}
    subs = (str(uuid.uuid4()), str(uuid.uuid4().int % 10**6))
    names = []
    try:
        with launch_hub("lti-native", release=False, env=env) as hub:
            printed = hub.log()
            problems = [f"the launcher printed the password of {name}" for name, password in hub.passwords.items()
                        if password in printed]
            if f"{hub.url}/hub/lti13/oauth_login" not in printed:
                problems.append("the launcher did not print the login URL")
            for sub in subs:
                launched = Launch(SimpleNamespace(base=hub.url, lms=lms), sub, [LEARNER])
                r = launched.post()
                assert r.status_code == 302 and logged_in(r), message(r)[:500]
                student = HubSession(hub.url, "", password="")
                student.http = launched.session
                assert student.get("/hub/home").status_code == 200
                name = student.username = student.hub_api("GET", "/user").json()["name"]
                names.append(name)
                try:
                    student.spawn()
                except (AssertionError, TimeoutError) as failed:
                    problems.append(f"LMS user {sub}: {failed}")
                    continue
                assert pwd.getpwnam(name).pw_uid >= 20000
                kept = json.loads((hub.state / "lti-users.json").read_text())
                assert kept[name] == {"issuer": ISSUER, "claim": "sub", "id": sub}
            assert not problems, "\n".join(problems)
    finally:
        lms.server.shutdown()
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)


def test_an_unknown_key_id_fetches_the_key_set_again_at_most_once_per_interval():
    import asyncio

    from attention_platform.hub.lti_keys import KeySetUnavailable, PlatformKeys, UnknownKey

    lms, clock = LMS(), Clock()
    keys = PlatformKeys(lms.url + "/jwks.json", timeout=2, refetch_interval=30, max_age=3600, clock=clock)

    async def launches():
        found = await asyncio.gather(*[keys.signing_key(KID) for _ in range(5)])
        assert {key.key_id for key in found} == {KID} and lms.fetches == 1, "five launches, one fetch"
        for made_up in ("made-up-1", "made-up-2"):
            with pytest.raises(UnknownKey, match="does not list"):
                await keys.signing_key(made_up)
        assert lms.fetches == 1, "made-up key ids within the interval fetch nothing"
        clock.now += 31
        with pytest.raises(UnknownKey):
            await keys.signing_key("rotated-in")
        assert lms.fetches == 2, "an unknown key id after the interval fetches the set again"
        clock.now += 3600
        await keys.signing_key(KID)
        assert lms.fetches == 3, "a key set older than max_age is fetched again"
        lms.delay = 3
        slow = PlatformKeys(lms.url + "/jwks.json", timeout=0.5)
        with pytest.raises(KeySetUnavailable, match="Timeout"):
            await slow.signing_key(KID)
        missing = PlatformKeys(lms.url + "/nowhere.json", timeout=2)
        with pytest.raises(KeySetUnavailable, match="404"):
            await missing.signing_key(KID)

    try:
        asyncio.run(launches())
    finally:
        lms.server.shutdown()


# ---------------------------------------------------------------- new window or embedded: cookies and frames

EMBEDDING_LMS = "https://canvas.example.edu"


def test_embedding_is_configured_for_the_lms_origins_only():
    from traitlets.config import Config

    env = {"LTI_ISSUER": ISSUER, "LTI_CLIENT_ID": CLIENT_ID, "LTI_AUTHORIZE_URL": "https://lms/auth",
           "LTI_JWKS_URL": "https://lms/jwks", "LTI_DEPLOYMENT_IDS": DEPLOYMENT, "LTI_CONTEXT_IDS": CONTEXT,
           "LTI_URI_SCHEME": "https"}
    c = Config()
    configure_lti(c, env)
    assert CourseLTI13Authenticator(config=c).presentation == "window"
    assert "headers" not in c.JupyterHub.tornado_settings.to_dict().get("update", {}), "window: nothing framed"
    c = Config()
    configure_lti(c, dict(env, LTI_PRESENTATION="embed", LTI_EMBED_ORIGINS=EMBEDDING_LMS + "/"))
    from jupyterhub.app import JupyterHub

    settings = JupyterHub(config=c).tornado_settings
    assert settings["headers"]["Content-Security-Policy"] == f"frame-ancestors 'self' {EMBEDDING_LMS}"
    assert settings["cookie_options"] == {"samesite": "None", "secure": True}
    for origins in ("", "*", "https://canvas.example.edu/courses/1", "'unsafe-inline'", "canvas.example.edu"):
        with pytest.raises(SystemExit, match="LTI_EMBED_ORIGINS"):
            configure_lti(Config(), dict(env, LTI_PRESENTATION="embed", LTI_EMBED_ORIGINS=origins))

    # a student's server, started with the environment the hub gives it (its own process: the file
    # installs the server's request limits)
    read = subprocess.run([sys.executable, "-c", STUDENT_SERVER_CONFIG], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **c.Spawner.environment.to_dict()["update"]), check=True)
    assert json.loads(read.stdout) == [f"frame-ancestors 'self' {EMBEDDING_LMS}", {"samesite": "None", "secure": True}]


STUDENT_SERVER_CONFIG = f"""
import json
from traitlets.config import Config
c = Config()
exec(open({str(REPO / "jupyter_config" / "student" / "jupyter_server_config.py")!r}).read(), {{"get_config": lambda: c}})
print(json.dumps([c.ServerApp.tornado_settings["headers"]["Content-Security-Policy"], c.HubOAuth.cookie_options]))
"""


def _set_cookies(response, name_start):
    return [line for line in response.raw.headers.getlist("Set-Cookie") if line.startswith(name_start)]


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.parametrize("presentation", ["window", "embed"])
def test_launch_cookies_cross_sites_over_https_and_frames_follow_the_presentation(tmp_path, presentation):
    chp = _chp()
    if chp is None:
        pytest.skip("configurable-http-proxy is not installed (make system-deps)")
    lms = LMS()
    hub = Hub(tmp_path, lms, chp)
    hub.env.update(LTI_URI_SCHEME="auto", LTI_PRESENTATION=presentation, LTI_EMBED_ORIGINS=EMBEDDING_LMS)
    login = {"iss": ISSUER, "login_hint": "framed@lms.test", "target_link_uri": hub.base + "/hub/",
             "client_id": CLIENT_ID, "lti_message_hint": "hint-1"}
    https = {"X-Forwarded-Proto": "https"}  # what the TLS proxy in front of the hub says
    try:
        hub.start()
        started = requests.post(hub.base + "/hub/lti13/oauth_login", data=login, headers=https, allow_redirects=False)
        assert started.status_code == 302, started.text[:300]
        launch_cookies = _set_cookies(started, "lti13authenticator-")
        assert len(launch_cookies) == 2 and all("SameSite=None" in c and "Secure" in c for c in launch_cookies), \
            launch_cookies
        plain = requests.post(hub.base + "/hub/lti13/oauth_login", data=login, allow_redirects=False)
        assert not any("SameSite=None" in c for c in _set_cookies(plain, "lti13authenticator-")), \
            "over plain HTTP browsers refuse SameSite=None without Secure"

        auth = {k: v[0] for k, v in parse_qs(urlparse(started.headers["Location"]).query).items()}
        token = lms.id_token(user="framed@lms.test", roles=[LEARNER], nonce=auth["nonce"])
        landed = requests.post(auth["redirect_uri"].replace("https://", "http://"), headers=https,
                               data={"id_token": token, "state": auth["state"]},
                               cookies={c.name: c.value for c in started.cookies}, allow_redirects=False)
        assert landed.status_code == 302, message(landed)[:500]
        login_cookies = _set_cookies(landed, "jupyterhub-hub-login")
        assert login_cookies and all("SameSite=None" in c and "Secure" in c for c in login_cookies), login_cookies

        in_a_frame = requests.post(hub.base + "/hub/lti13/oauth_login", data=login,
                                   headers={"Sec-Fetch-Dest": "iframe"}, allow_redirects=False)
        page_policy = requests.get(hub.base + "/hub/login").headers["Content-Security-Policy"]
        if presentation == "window":
            assert in_a_frame.status_code == 200, in_a_frame.status_code
            page = message(in_a_frame)
            assert "Open the course hub in a new window" in page and 'target="_blank"' in page
            link = parse_qs(urlparse(re.search(r'href="([^"]+)"', page).group(1)).query)
            assert link["login_hint"] == ["framed@lms.test"] and link["lti_message_hint"] == ["hint-1"]
            assert "frame-ancestors *" in in_a_frame.headers["Content-Security-Policy"]
            assert "frame-ancestors 'none'" in page_policy
        else:
            assert in_a_frame.status_code == 302, "embedded, the launch goes on inside the frame"
            assert page_policy == f"frame-ancestors 'self' {EMBEDDING_LMS}"
    finally:
        hub.stop()
        lms.server.shutdown()


# ---------------------------------------------------------------- deep linking: the request kept, the answer signed

def _deep_linking_request(**settings):
    token = _claims(sub="prof", lti_message_type="LtiDeepLinkingRequest", lti_roles=[INSTRUCTOR],
                    nonce="n", iat=1, exp=2, lti_version="1.3.0", lti_target_link_uri="http://hub/hub/")
    token["https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"] = {
        "deep_link_return_url": "https://lms.example.test/return", "accept_types": ["ltiResourceLink"],
        "data": "opaque-42", **settings}
    return token


@pytest.mark.parametrize("case, settings, says", [
    ("a request as Canvas sends it, without tool_platform", {}, None),
    ("no return URL", {"deep_link_return_url": None}, "return_url"),
    ("a return URL that is a script", {"deep_link_return_url": "javascript:alert(1)"}, "return_url"),
    ("only files accepted", {"accept_types": ["file"]}, "resource link"),
])
def test_a_deep_linking_request_needs_only_what_the_specification_requires(case, settings, says):
    from attention_platform.hub.lti_deep_linking import deep_linking_problem

    problem = deep_linking_problem(_deep_linking_request(**settings))
    assert (problem is None) if says is None else (problem and says in problem), (case, problem)


def test_a_pending_deep_link_is_its_instructors_once_and_expires():
    from attention_platform.hub.lti_deep_linking import REQUEST_LIFETIME, PendingRequests, response_claims

    clock = Clock()
    pending = PendingRequests(clock=clock)
    key = pending.add("prof", _deep_linking_request(), CLIENT_ID)
    with pytest.raises(HTTPError) as other:
        pending.get(key, "student")
    assert other.value.status_code == 404
    request = pending.take(key, "prof")
    claims = response_claims(request, "https://hub.example.test", "self_attention")
    assert (claims["iss"], claims["aud"]) == (CLIENT_ID, ISSUER)
    assert claims[CLAIM + "deployment_id"] == DEPLOYMENT and claims[CLAIM + "message_type"] == "LtiDeepLinkingResponse"
    assert claims["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "opaque-42"
    (item,) = claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"]
    assert item["url"] == "https://hub.example.test/hub/user-redirect/lab/tree/self_attention"
    with pytest.raises(HTTPError):
        pending.take(key, "prof")
    late = pending.add("prof", _deep_linking_request(), CLIENT_ID)
    clock.now += REQUEST_LIFETIME + 1
    with pytest.raises(HTTPError):
        pending.get(late, "prof")


def test_released_assignments_are_the_outbound_folders_and_no_links(tmp_path):
    from attention_platform.hub.lti_deep_linking import released_assignments

    for name in ("self_attention", "multi_head_attention", ".hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "planted").symlink_to("/etc")
    assert released_assignments(tmp_path) == ["multi_head_attention", "self_attention"]
    assert released_assignments(tmp_path / "missing") == []
