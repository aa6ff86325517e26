"""Scores and the roster against an LTI 1.3 platform nobody here wrote (``lti1p3platform`` with the service
routes of tests/lti_platform_services.py): the token it grants after checking the tool's client assertion
against the tool's published key set, a line item per assignment, a released student's score read back
from the platform's gradebook equal to the gradebook's (what the formgrader shows), for both assignments."""

from __future__ import annotations

import json

import pytest
import tornado.httpserver
import tornado.web
from nbgrader.api import Gradebook

from attention_platform.hub.lti_tool_keys import ToolKey
from attention_platform.lms.ags import GradeService
from attention_platform.lms.nrps import members
from attention_platform.lms.outbox import Outbox
from attention_platform.lms.service_tokens import ServiceTokens, ToolCredentials
from attention_platform.lms.worker import Worker
from gradebooks import build_assignment
from grader_tests.registry import ASSIGNMENTS, assignment
from hub_helpers import serve_in_threads
from lti_platform import CLIENT_ID, LEARNER, TEACHING_ASSISTANT
from lti_platform_services import services_platform  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def tool_key(tmp_path_factory, services_platform):  # noqa: F811
    """The tool's key pair (attention_platform/hub/lti_tool_keys.py) and its key set where the platform fetches it."""
    key = ToolKey.load_or_create(tmp_path_factory.mktemp("tool") / "lti-tool-key.pem")

    class KeySet(tornado.web.RequestHandler):
        def get(self):
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps(key.jwks()))

    with serve_in_threads() as start:
        url = start(tornado.httpserver.HTTPServer, tornado.web.Application([(r"/hub/lti13/jwks", KeySet)]))
        services_platform.register_tool_key_set(url.rstrip("/") + "/hub/lti13/jwks")
        yield key


def service_for(platform, key) -> GradeService:
    return GradeService(ServiceTokens(ToolCredentials(CLIENT_ID, platform.token_url, key.private_key, key.kid)))


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_a_released_score_reaches_the_platforms_gradebook_equal_to_the_gradebooks(
        tmp_path, services_platform, tool_key, name):  # noqa: F811
    some_check = next(iter(assignment(name).notebook_checks.values()))[0].id
    db_url = build_assignment(tmp_path / "gradebook.db", name, {"ada": {some_check}, "bob": set()})
    with Gradebook(db_url) as gradebook:
        expected = gradebook.find_submission(name, "ada").score
        maximum = gradebook.find_assignment(name).max_score
    assert 0 < expected < maximum
    outbox = Outbox(tmp_path / "lms-outbox.sqlite")
    try:
        outbox.keep_member("ada", f"lms-uuid-ada-{name}", ["nbgrader-dl-attention"], True)
        outbox.note_release(name, "ada")  # the TA released ada's feedback; bob's is not released
        worker = Worker(outbox, service_for(services_platform, tool_key), db_url, services_platform.line_items_url)
        assert worker.one_pass() == {"queued": 1, "sent": 1, "retrying": 0, "refused": 0}
        [item] = [i for i in services_platform.line_items.values() if i["resourceId"] == name]
        assert item["scoreMaximum"] == maximum
        in_the_lms = services_platform.gradebook[item["id"]]
        assert set(in_the_lms) == {f"lms-uuid-ada-{name}"}
        assert in_the_lms[f"lms-uuid-ada-{name}"]["scoreGiven"] == pytest.approx(expected)
        [result] = worker.service.results(item["id"], f"lms-uuid-ada-{name}")
        assert result["resultScore"] == pytest.approx(expected)
        assert worker.one_pass()["queued"] == 0  # nothing new: nothing sent again
    finally:
        outbox.close()


def test_the_platform_refuses_an_assertion_signed_with_another_key(tmp_path, services_platform, tool_key):  # noqa: F811
    other = ToolKey.load_or_create(tmp_path / "other-key.pem")
    outbox = Outbox(tmp_path / "lms-outbox.sqlite")
    try:
        outbox.queue("any-assignment", "ada", "lms-ada", 1.0, 2.0, False)
        worker = Worker(outbox, service_for(services_platform, other), "sqlite://", services_platform.line_items_url)
        from attention_platform.lms.passback import deliver

        assert deliver(outbox, worker.service, services_platform.line_items_url)["refused"] == 1
        assert "invalid_client" in outbox.rows()[0]["answer"] and 400 in services_platform.token_answers
    finally:
        outbox.close()


def test_the_platforms_roster_is_read(services_platform, tool_key):  # noqa: F811
    services_platform.members = [
        {"user_id": "uuid-ada", "roles": [LEARNER], "status": "Active", "name": "Ada"},
        {"user_id": "2417", "roles": [TEACHING_ASSISTANT], "status": "Active"},
        {"user_id": "uuid-bob", "roles": [LEARNER], "status": "Deleted"}]
    found = {m.user_id: m for m in members(service_for(services_platform, tool_key), services_platform.memberships_url)}
    assert set(found) == {"uuid-ada", "2417", "uuid-bob"}
    assert found["2417"].roles == (TEACHING_ASSISTANT,) and not found["uuid-bob"].active


def test_the_lms_sync_command_sends_a_released_score_with_the_key_on_its_standard_input(
        tmp_path, services_platform, tool_key):  # noqa: F811
    import os
    import subprocess
    import sys
    from pathlib import Path

    from cryptography.hazmat.primitives import serialization

    name = sorted(ASSIGNMENTS)[0]
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    build_assignment(course / "gradebook.db", name, {"cy": set()})
    outbox = Outbox(course / "lms-outbox.sqlite")
    outbox.note_release(name, "cy")
    outbox.close()
    pem = tool_key.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption())
    env = {**os.environ, **services_platform.services_environment(), "LTI_MEMBERSHIPS_URL": "",
           "NBGRADER_DB_URL": ""}
    done = subprocess.run([str(Path(sys.executable).parent / "attention-course"), "lms-sync", "--course", str(course),
                           "--key-file", "-", "--once"], input=pem, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    [item] = [i for i in services_platform.line_items.values() if i["resourceId"] == name and
              "cy" in services_platform.gradebook.get(i["id"], {})]
    assert services_platform.gradebook[item["id"]]["cy"]["scoreGiven"] == item["scoreMaximum"]


def test_an_attempt_counted_on_submit_is_sent_only_under_a_counting_policy(tmp_path, services_platform, tool_key):  # noqa: F811
    import datetime as dt

    from attention_platform.attempts.ledger import Ledger

    name = sorted(ASSIGNMENTS)[-1]
    db_url = build_assignment(tmp_path / "gradebook.db", name, {"dee": set(), "eve": set()})
    ledger = Ledger(db_url)
    now = dt.datetime.now(dt.timezone.utc)
    for student in ("dee", "eve"):
        attempt = ledger.add(assignment=name, student=student, submission=f"{student}+1", received_at=now,
                             state="graded", feedback="checks")
        if student == "dee":  # the grader installed dee's attempt as the one that counts
            ledger.set_counted(name, student, attempt)
    ledger.close()
    outbox = Outbox(tmp_path / "lms-outbox.sqlite")
    try:
        collected = Worker(outbox, service_for(services_platform, tool_key), db_url, services_platform.line_items_url,
                           counts_on_submit=lambda assignment: False)
        assert collected.one_pass()["queued"] == 0  # policy "collected": the TA's release decides
        counting = Worker(outbox, collected.service, db_url, services_platform.line_items_url,
                          counts_on_submit=lambda assignment: assignment == name)
        assert counting.one_pass()["sent"] == 1
        assert [row["student"] for row in outbox.rows()] == ["dee"]
    finally:
        outbox.close()
