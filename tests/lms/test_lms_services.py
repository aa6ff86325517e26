"""The LMS's services (attention_platform/lms/) against a platform's service side on 127.0.0.1
(services_lms.ServicesLMS): service tokens by a signed client assertion, line items, scores through
the outbox, the roster; and the faults: the LMS down or slow or flooding, a token refused, a service
URL on another site, another deployment's context."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from attention_platform.lms import bounded_http
from attention_platform.lms.ags import GradeService, Score, ServiceRefused
from attention_platform.lms.bounded_http import LmsUnavailable
from attention_platform.lms.nrps import members
from attention_platform.lms.outbox import Outbox
from attention_platform.lms.passback import GradebookScore, deliver, queue_scores
from attention_platform.lms.service_tokens import (
    LINE_ITEM_SCOPE, MEMBERSHIP_SCOPE, SCORE_SCOPE, ServiceTokens, TokenRefused, ToolCredentials,
)
from services_lms import CLIENT_ID, ServicesLMS

TOOL_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
WHEN = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.timezone.utc)


class Clock:
    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def lms():
    platform = ServicesLMS(TOOL_KEY.public_key())
    yield platform
    platform.close()


def tokens_for(lms, clock=None, key=TOOL_KEY):
    credentials = ToolCredentials(CLIENT_ID, lms.token_url, key, "tool-key-1")
    return ServiceTokens(credentials, **({"clock": clock} if clock else {}))


@pytest.fixture
def outbox(tmp_path):
    clock = Clock()
    box = Outbox(tmp_path / "lms-outbox.sqlite", clock=clock)
    box.clock_ = clock
    yield box
    box.close()


# ------------------------------------------------------------------ service tokens

def test_a_token_is_asked_for_with_a_signed_assertion_and_only_the_scopes_needed(lms):
    clock = Clock()
    tokens = tokens_for(lms, clock)
    first = tokens.token(SCORE_SCOPE)
    assert lms.tokens[first] == {SCORE_SCOPE}  # the platform checked the assertion and granted one scope
    assert tokens.token(SCORE_SCOPE) == first and len(lms.token_requests) == 1  # kept until it expires
    roster = tokens.token(MEMBERSHIP_SCOPE)
    assert roster != first and lms.tokens[roster] == {MEMBERSHIP_SCOPE}
    clock.now += 3600
    assert tokens.token(SCORE_SCOPE) != first and len(lms.token_requests) == 3
    assert len({request["client_assertion"] for request in lms.token_requests}) == 3  # a fresh jti each


def test_an_assertion_signed_with_another_key_is_refused_and_says_so(lms):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenRefused, match="invalid_client"):
        tokens_for(lms, key=other).token(SCORE_SCOPE)


def test_a_token_refused_by_the_platform_names_its_answer(lms):
    lms.refuse_tokens = "invalid_scope"
    with pytest.raises(TokenRefused, match="invalid_scope.*the platform says no"):
        tokens_for(lms).token(SCORE_SCOPE)


# ------------------------------------------------------------------ bounded answers

def test_an_answer_too_large_is_not_read(lms):
    lms.huge_answer = True
    with pytest.raises(LmsUnavailable, match="bytes"):
        tokens_for(lms).token(SCORE_SCOPE)


def test_an_answer_that_trickles_is_given_up_on_at_its_deadline(lms):
    """Each 16 bytes come well within the read timeout (a per-read limit alone would wait for ever); the whole
    answer, about a kilobyte, would take seconds: the exchange stops at its deadline."""
    lms.delay = 0.05
    lms.refuse_tokens = "slow" * 250
    with pytest.raises(LmsUnavailable, match="within 1 s"):
        bounded_http.exchange("POST", lms.token_url, data={"grant_type": "client_credentials"}, timeout=1.0)


# ------------------------------------------------------------------ grades

def scores(*entries):
    return [GradebookScore("assignment-a", student, score, 10.0, pending) for student, score, pending in entries]


def test_a_released_score_is_posted_once_to_the_line_item_made_for_its_assignment(lms, outbox):
    service = GradeService(tokens_for(lms))
    outbox.note_release("assignment-a", "ada")
    assert queue_scores(outbox, scores(("ada", 7.5, False), ("bob", 9.0, False)), set()) == 1  # bob: not released
    assert deliver(outbox, service, lms.line_items_url, now=lambda: WHEN) == {"sent": 1, "retrying": 0, "refused": 0}
    [(item_url, item)] = lms.line_items.items()
    assert (item["resourceId"], item["scoreMaximum"]) == ("assignment-a", 10.0)
    [posted] = lms.scores[item_url]
    assert (posted["userId"], posted["scoreGiven"], posted["scoreMaximum"], posted["gradingProgress"]) == (
        "ada", 7.5, 10.0, "FullyGraded")
    # the same score again: nothing queued, nothing posted
    assert queue_scores(outbox, scores(("ada", 7.5, False)), set()) == 0
    assert deliver(outbox, service, lms.line_items_url)["sent"] == 0 and len(lms.scores[item_url]) == 1
    # a TA's manual grade changes it: posted again, to the same line item
    assert queue_scores(outbox, scores(("ada", 9.5, False)), set()) == 1
    deliver(outbox, service, lms.line_items_url)
    assert [s["scoreGiven"] for s in lms.scores[item_url]] == [7.5, 9.5] and len(lms.line_items) == 1


def test_a_score_counted_on_submit_is_pending_manual_until_graded(lms, outbox):
    service = GradeService(tokens_for(lms))
    queue_scores(outbox, scores(("ada", 6.0, True)), {("assignment-a", "ada")})
    deliver(outbox, service, lms.line_items_url)
    [posted] = next(iter(lms.scores.values()))
    assert posted["gradingProgress"] == "PendingManual"


def test_the_lms_down_is_retried_with_growing_pauses_and_grading_goes_on(lms, outbox):
    service = GradeService(tokens_for(lms))
    outbox.note_release("assignment-a", "ada")
    outbox.note_release("assignment-a", "bob")
    queue_scores(outbox, scores(("ada", 7.0, False), ("bob", 8.0, False)), set())
    lms.status_override = 503
    assert deliver(outbox, service, lms.line_items_url)["retrying"] == 2
    rows = {row["student"]: row for row in outbox.rows()}
    assert rows["ada"]["state"] == "retrying" and "503" in rows["ada"]["answer"]
    assert rows["ada"]["next_try"] == outbox.clock_.now + 30
    assert deliver(outbox, service, lms.line_items_url)["retrying"] == 0  # not due yet
    outbox.clock_.now += 30
    deliver(outbox, service, lms.line_items_url)
    assert outbox.rows()[0]["next_try"] == outbox.clock_.now + 60  # the pause doubles
    lms.status_override = 0
    outbox.clock_.now += 60
    assert deliver(outbox, service, lms.line_items_url)["sent"] == 2
    assert sorted(s["userId"] for s in next(iter(lms.scores.values()))) == ["ada", "bob"]


def test_a_closed_port_is_retried_too(outbox, lms):
    service = GradeService(tokens_for(lms))
    lms.close()
    outbox.note_release("assignment-a", "ada")
    queue_scores(outbox, scores(("ada", 7.0, False)), set())
    assert deliver(outbox, service, lms.line_items_url)["retrying"] == 1
    assert "will retry" in outbox.rows()[0]["answer"]


def test_a_refused_token_is_shown_and_waits_for_resend(lms, outbox):
    service = GradeService(tokens_for(lms))
    outbox.note_release("assignment-a", "ada")
    queue_scores(outbox, scores(("ada", 7.0, False)), set())
    lms.refuse_tokens = "invalid_client"
    assert deliver(outbox, service, lms.line_items_url)["refused"] == 1
    row = outbox.rows()[0]
    assert row["state"] == "refused" and "invalid_client" in row["answer"]
    outbox.clock_.now += 7200
    assert deliver(outbox, service, lms.line_items_url)["refused"] == 0  # not retried on its own
    lms.refuse_tokens = ""
    assert outbox.resend("assignment-a", "ada")
    assert deliver(outbox, service, lms.line_items_url)["sent"] == 1


def test_a_revoked_token_is_replaced_once(lms, outbox):
    service = GradeService(tokens_for(lms))
    outbox.note_release("assignment-a", "ada")
    queue_scores(outbox, scores(("ada", 7.0, False)), set())
    deliver(outbox, service, lms.line_items_url)
    lms.revoke_all_tokens()
    queue_scores(outbox, scores(("ada", 8.0, False)), set())
    assert deliver(outbox, service, lms.line_items_url)["sent"] == 1


def test_another_deployments_context_is_refused_not_retried(lms, outbox):
    """A line items URL of a context this tool's deployment does not serve: the platform answers 404/403,
    which is shown to the instructor, not retried for ever."""
    service = GradeService(tokens_for(lms))
    outbox.note_release("assignment-a", "ada")
    queue_scores(outbox, scores(("ada", 7.0, False)), set())
    assert deliver(outbox, service, lms.url + "/course-99/lineitems")["refused"] == 1
    assert outbox.rows()[0]["state"] == "refused" and "404" in outbox.rows()[0]["answer"]


def test_no_token_is_sent_to_a_service_url_on_another_site(lms):
    seen = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        service = GradeService(tokens_for(lms))
        with pytest.raises(ServiceRefused, match="not on the LMS's site"):
            service.line_item(f"http://127.0.0.1:{other.server_address[1]}/lineitems", "assignment-a", 10)
        assert seen == [] and lms.token_requests == []
    finally:
        other.shutdown()


# ------------------------------------------------------------------ roster

def test_the_roster_is_read_across_pages(lms):
    lms.members = [{"user_id": f"u{i}", "roles": [LEARNER], "status": "Active"} for i in range(5)]
    lms.members.append({"user_id": "gone", "roles": [LEARNER], "status": "Inactive"})
    lms.page_size = 2
    found = members(GradeService(tokens_for(lms)), lms.memberships_url)
    assert sorted(m.user_id for m in found) == ["gone", "u0", "u1", "u2", "u3", "u4"]
    assert [m.active for m in found if m.user_id == "gone"] == [False]
    assert all(scope == {MEMBERSHIP_SCOPE} for scope in lms.tokens.values())


def test_the_roster_names_members_as_their_launches_do_whatever_the_username_claim(lms, tmp_path):
    from attention_platform.hub.lti import clean_username, default_role_groups, unix_account_name
    from attention_platform.hub.lti_roster import HubApi, RosterSync
    from attention_platform.lms.worker import RosterRefused

    lms.members = [{"user_id": "9f1c-uuid", "email": "Ada@School.example", "roles": [LEARNER]},
                   {"user_id": "2417", "roles": [LEARNER]}]  # an LMS that withholds an e-mail
    found = {m.user_id: m for m in members(GradeService(tokens_for(lms)), lms.memberships_url)}
    outbox = Outbox(tmp_path / "lms-outbox.sqlite")
    unreachable = HubApi("http://127.0.0.1:9/hub/api", "no-token")  # any call to it would fail

    def sync(key, unix=False):
        return RosterSync(unreachable, outbox, "https://lms.example", default_role_groups("c"),
                          unix_account_names=unix, username_key=key)

    try:
        for key in ("sub", ""):
            assert sync(key).hub_name(found["9f1c-uuid"]) == "9f1c-uuid"
        # a launch without the claim logs in by its sub (ltiauthenticator), so the roster does the same
        assert [sync("email").hub_name(found[i]) for i in ("9f1c-uuid", "2417")] == [
            clean_username("Ada@School.example"), "2417"]
        assert sync("email", unix=True).hub_name(found["9f1c-uuid"]) == \
            unix_account_name("https://lms.example", "Ada@School.example")
        for key in ("custom_login", "preferred_username"):
            with pytest.raises(RosterRefused, match=f"LTI_USERNAME_KEY={key}"):
                sync(key).apply(list(found.values()))
        assert outbox.members() == {}  # nothing was kept or changed
    finally:
        outbox.close()


def test_the_tools_configuration_asks_for_the_scopes_of_the_services_it_is_set_to_call():
    from traitlets.config import Config

    from attention_platform.hub.lti import CourseLTI13Authenticator, configure_lti
    from attention_platform.lms.service_tokens import RESULT_SCOPE

    base = {"LTI_ISSUER": "https://lms.example.test", "LTI_CLIENT_ID": CLIENT_ID, "LTI_AUTHORIZE_URL": "https://l/a",
            "LTI_JWKS_URL": "https://l/j", "LTI_DEPLOYMENT_IDS": "d1", "LTI_CONTEXT_IDS": "c1"}
    services = {"LTI_TOKEN_URL": "https://l/token", "LTI_LINE_ITEMS_URL": "https://l/c1/lineitems",
                "LTI_MEMBERSHIPS_URL": "https://l/c1/memberships"}
    for extra, scopes in (({}, set()),
                          # the line items URL comes from launches: the grade services are asked for
                          ({"LTI_TOKEN_URL": services["LTI_TOKEN_URL"]}, {LINE_ITEM_SCOPE, SCORE_SCOPE, RESULT_SCOPE}),
                          (dict(services, LTI_MEMBERSHIPS_URL=""), {LINE_ITEM_SCOPE, SCORE_SCOPE, RESULT_SCOPE}),
                          (dict(services, LTI_LINE_ITEMS_URL=""),
                           {LINE_ITEM_SCOPE, SCORE_SCOPE, RESULT_SCOPE, MEMBERSHIP_SCOPE}),
                          (services, {LINE_ITEM_SCOPE, SCORE_SCOPE, RESULT_SCOPE, MEMBERSHIP_SCOPE})):
        c = Config()
        configure_lti(c, dict(base, **extra))
        assert set(CourseLTI13Authenticator(config=c).service_scopes) == scopes, extra


LAUNCH_SETTINGS = {"LTI_ISSUER": "https://lms.example.test", "LTI_CLIENT_ID": CLIENT_ID,
                   "LTI_AUTHORIZE_URL": "https://lms.example.test/auth", "LTI_JWKS_URL": "https://lms.example.test/jwks",
                   "LTI_DEPLOYMENT_IDS": "d1", "LTI_CONTEXT_IDS": "c1", "LTI_TOKEN_URL": "https://lms.example.test/token"}


def launch_claims(line_items_url, scopes=(LINE_ITEM_SCOPE, SCORE_SCOPE), deployment="d1", context="c1") -> dict:
    from attention_platform.lms.launch_services import CONTEXT_CLAIM, DEPLOYMENT_CLAIM, ENDPOINT_CLAIM

    return {DEPLOYMENT_CLAIM: deployment, CONTEXT_CLAIM: {"id": context},
            ENDPOINT_CLAIM: {"lineitems": line_items_url, "scope": list(scopes)}}


def test_a_launch_names_the_line_items_only_on_the_lms_site_and_the_sync_reads_them_back(tmp_path):
    from attention_platform.lms import launch_services
    from attention_platform.settings import Settings

    env = Settings.from_environ(dict(LAUNCH_SETTINGS, HUB_STATE_DIR=str(tmp_path)))
    origins = launch_services.course_site_origins(env)
    assert launch_services.kept_line_items_url(env)[0] == ""  # no launch yet
    assert launch_services.from_launch({}, origins) is None  # a launch naming no grade service
    for elsewhere in ("https://attacker.example/c1/lineitems", "https://lms.example.test:444/c1/lineitems",
                      "http://lms.example.test/c1/lineitems", "javascript:alert(1)", 42):
        with pytest.raises(launch_services.UnusableEndpoint):
            launch_services.from_launch(launch_claims(elsewhere), origins)

    found = launch_services.from_launch(launch_claims("https://lms.example.test/api/c1/line_items"), origins)
    path = launch_services.kept_file(env)
    assert launch_services.record(path, found) and not launch_services.record(path, found)  # kept once
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert launch_services.kept_line_items_url(env) == ("https://lms.example.test/api/c1/line_items", "")

    # a kept URL of another context or deployment, or without the line item scope, is not used
    for claims in (launch_claims("https://lms.example.test/api/c9/line_items", context="c9"),
                   launch_claims("https://lms.example.test/api/c1/line_items", deployment="d9"),
                   launch_claims("https://lms.example.test/api/c1/line_items", scopes=(SCORE_SCOPE,))):
        launch_services.record(path, launch_services.from_launch(claims, origins))
        url, why = launch_services.kept_line_items_url(env)
        assert url == "" and why, claims
    # nor one a hand edit put on another site, nor a file too large or not what the hub writes
    for text in (json.dumps({"line_items_url": "https://attacker.example/li", "scopes": [LINE_ITEM_SCOPE],
                             "deployment_id": "d1", "context_id": "c1"}), "x" * 20_000, "[1]", "{"):
        path.write_text(text)
        assert launch_services.kept_line_items_url(env)[0] == "", text[:40]


def test_the_hub_keeps_what_an_accepted_launch_names_for_the_sync(tmp_path):
    from traitlets.config import Config

    from attention_platform.hub.lti import CourseLTI13Authenticator, configure_lti
    from attention_platform.lms import launch_services

    c = Config()
    configure_lti(c, dict(LAUNCH_SETTINGS, HUB_STATE_DIR=str(tmp_path),
                          LTI_SERVICE_ORIGINS="https://school.instructure.example"))
    authenticator = CourseLTI13Authenticator(config=c)
    assert authenticator.launch_services_file == str(tmp_path / launch_services.FILE_NAME)
    authenticator.keep_launch_services(launch_claims("https://attacker.example/c1/lineitems"))
    assert not (tmp_path / launch_services.FILE_NAME).exists()
    authenticator.keep_launch_services(launch_claims("https://school.instructure.example/api/lti/courses/1/line_items"))
    kept = launch_services.read(tmp_path / launch_services.FILE_NAME)
    assert kept.line_items_url == "https://school.instructure.example/api/lti/courses/1/line_items"


def test_the_hub_signs_with_the_key_file_the_operator_gives_else_its_own(tmp_path):
    from traitlets.config import Config

    from attention_platform.hub.lti import CourseLTI13Authenticator, configure_lti

    for extra, expected in (({}, tmp_path / "lti-tool-key.pem"),
                            ({"LTI_TOOL_KEY_FILE": "/run/secrets/lti_tool_key"}, Path("/run/secrets/lti_tool_key"))):
        c = Config()
        configure_lti(c, dict(LAUNCH_SETTINGS, HUB_STATE_DIR=str(tmp_path), **extra))
        assert Path(CourseLTI13Authenticator(config=c).tool_key_file) == expected


def test_the_hub_registers_the_lms_sync_only_with_lti_services_and_never_as_an_admin(monkeypatch, tmp_path):
    from hub_helpers import load_hub_config

    lti = {"HUB_AUTHENTICATOR": "lti", "LTI_ISSUER": "https://lms.example", "LTI_CLIENT_ID": "abc",
           "LTI_AUTHORIZE_URL": "https://lms.example/auth", "LTI_JWKS_URL": "https://lms.example/jwks",
           "LTI_DEPLOYMENT_IDS": "1:abc", "LTI_CONTEXT_IDS": "course-1"}
    for env, registered in (({}, False), (lti, False), (dict(lti, LTI_TOKEN_URL="https://lms.example/token"), True)):
        c = load_hub_config(monkeypatch, tmp_path, **env)
        services = {service["name"]: service for service in c.JupyterHub.services}
        roles = {role["name"]: role for role in c.JupyterHub.load_roles}
        assert ("lms-sync" in services) is registered and ("lms-sync" in roles) is registered, env
        if registered:
            assert not services["lms-sync"].get("admin") and roles["lms-sync"]["services"] == ["lms-sync"]
            assert set(roles["lms-sync"]["scopes"]) == {"list:users", "read:users", "admin:users", "read:groups",
                                                       "groups", "admin:groups", "read:servers", "delete:servers"}


def test_a_release_marks_the_score_only_where_the_course_sends_grades(tmp_path):
    from attention_platform.lms.worker import note_release, outbox_path

    note_release(tmp_path, "assignment-a", "ada")
    assert not outbox_path(tmp_path).exists()  # no LMS sync: the release makes no outbox
    Outbox(outbox_path(tmp_path)).close()
    assert oct(outbox_path(tmp_path).stat().st_mode & 0o777) == "0o600"
    note_release(tmp_path, "assignment-a", "ada")
    box = Outbox(outbox_path(tmp_path))
    assert box.released() == {("assignment-a", "ada")}
    box.close()
