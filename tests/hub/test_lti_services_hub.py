"""The native hub's LMS sync against an LTI 1.3 platform nobody here wrote (``lti1p3platform`` with the service
routes of tests/lti_platform_services.py): the launcher starts ``attention-course lms-sync`` as the grader account
with the hub's tool key on its standard input; the platform grants it tokens after checking its assertions
against the hub's published key set (/hub/lti13/jwks); a roster change in the platform reaches the hub's
groups (a Canvas-style UUID student and a Moodle-style number TA, under the names their launches will get);
with no LTI_LINE_ITEMS_URL, the line items URL a launch names carries a released score to the platform's
gradebook."""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from urllib.parse import quote

import pytest
import requests

from attention_platform.hub.lti import unix_account_name
from attention_platform.lms.outbox import note_release, outbox_path
from hub_helpers import COURSE, launch_hub
from lti_platform import LEARNER, TEACHING_ASSISTANT, chromium  # noqa: F401  (fixture)
from lti_platform_services import services_platform  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a Unix account per hub user needs root (CI is root)")]


def groups_when(api, name: str, wanted: list[str], timeout: float = 120) -> list[str] | None:
    """The hub user's groups once they are ``wanted`` (or what they are at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        reply = api(f"/users/{quote(name, safe='')}")
        groups = sorted(reply.json()["groups"]) if reply.status_code == 200 else None
        if groups == wanted or time.monotonic() > deadline:
            return groups
        time.sleep(0.5)


def test_a_roster_change_in_the_platform_reaches_the_native_hubs_groups(services_platform):  # noqa: F811
    student, ta = str(uuid.uuid4()), str(uuid.uuid4().int % 10**6)
    services_platform.members = [{"user_id": student, "roles": [LEARNER], "status": "Active"},
                                 {"user_id": ta, "roles": [TEACHING_ASSISTANT], "status": "Active"}]
    env = {**services_platform.services_environment(), "LTI_SYNC_SECONDS": "1"}
    with launch_hub("lti-services-hub", env=env) as hub:
        services_platform.register_tool(hub.url)  # its key set: the hub's /hub/lti13/jwks
        token = (hub.state / "lms-sync-api-token").read_text().strip()

        def api(path):
            return requests.get(hub.url + "/hub/api" + path, headers={"Authorization": "token " + token}, timeout=10)

        student_name, ta_name = (unix_account_name(services_platform.url, sub) for sub in (student, ta))
        assert groups_when(api, student_name, [f"nbgrader-{COURSE}"]) == [f"nbgrader-{COURSE}"], hub.log()[-3000:]
        assert groups_when(api, ta_name, [f"formgrade-{COURSE}"]) == [f"formgrade-{COURSE}"]
        assert 200 in services_platform.token_answers  # the platform checked the hub's key and granted a token

        services_platform.members = services_platform.members[1:]  # the student leaves the LMS course
        assert groups_when(api, student_name, []) == []
        assert groups_when(api, ta_name, [f"formgrade-{COURSE}"]) == [f"formgrade-{COURSE}"]
        outbox = hub.state / "course" / "lms-outbox.sqlite"
        assert oct(outbox.stat().st_mode & 0o777) == "0o600"
        with sqlite3.connect(outbox) as db:
            changes = [row[0] for row in db.execute("SELECT change FROM roster_changes WHERE user = ?",
                                                    (student_name,))]
        assert f"added to nbgrader-{COURSE}" in changes and f"removed from nbgrader-{COURSE}" in changes


def test_with_no_line_items_url_a_launch_names_them_and_a_released_score_reaches_the_platform(
        services_platform, chromium):  # noqa: F811
    from nbgrader.api import Gradebook

    from attention_platform.reporting.report import default_db_url

    student = str(uuid.uuid4())
    services_platform.members = [{"user_id": student, "roles": [LEARNER], "status": "Active"}]
    env = {**services_platform.services_environment(), "LTI_LINE_ITEMS_URL": "", "LTI_SYNC_SECONDS": "1"}
    with launch_hub("lti-launch-line-items-hub", env=env) as hub:
        services_platform.register_tool(hub.url)
        name = unix_account_name(services_platform.url, student)
        course, hub_log = hub.state / "course", hub.state / "jupyterhub.log"  # the sync's lines too
        deadline = time.monotonic() + 120
        while not outbox_path(course).exists() or \
                "no launch has named the course's line items" not in hub_log.read_text(errors="replace"):
            assert time.monotonic() < deadline, hub_log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        assignment = "self_attention"
        with Gradebook(default_db_url(course)) as gradebook:
            gradebook.update_or_create_student(name)
            submission = gradebook.add_submission(assignment, name)
            grade = submission.notebooks[0].grades[0]
            grade.auto_score = grade.max_score
            gradebook.db.commit()
            expected = gradebook.find_submission(assignment, name).score
        assert expected > 0
        note_release(course, assignment, name)  # the TA released the student's feedback
        time.sleep(3)
        assert not services_platform.gradebook  # nothing can be sent before a launch names the line items

        page = services_platform.browser_launch(chromium, student, [LEARNER])
        page.context.close()
        kept = hub.state / "lti-launch-services.json"
        assert oct(kept.stat().st_mode & 0o777) == "0o644" and kept.stat().st_uid == 0
        deadline = time.monotonic() + 120
        while True:
            items = [i for i in services_platform.line_items.values() if i["resourceId"] == assignment]
            sent = services_platform.gradebook.get(items[0]["id"], {}) if items else {}
            if student in sent or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert student in sent, hub_log.read_text(errors="replace")[-3000:]
        assert sent[student]["scoreGiven"] == pytest.approx(expected)
