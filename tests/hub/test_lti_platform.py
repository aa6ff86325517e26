"""LMS launches from an LTI 1.3 platform nobody here wrote (``lti1p3platform`` on loopback, tests/lti_platform.py)
into the native hub, in a real browser: the OIDC login, the signed launch, the role's groups, the user's server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid

import pytest
import requests

from hub_helpers import COURSE, launch_hub
from lti_platform import (  # noqa: F401  (fixtures)
    INSTRUCTOR, LEARNER, TEACHING_ASSISTANT, chromium, hub_user, lti_platform,
)

pytestmark = [pytest.mark.slow, pytest.mark.hub, pytest.mark.browser, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a Unix account per hub user needs root (CI is root)")]

LAB = r".*/user/[^/]+/lab.*"


@pytest.fixture(scope="module")
def lti_hub(lti_platform):
    with launch_hub("lti-platform-hub", env=lti_platform.hub_environment()) as hub:
        lti_platform.register_tool(hub.url)
        yield hub
    try:
        made = json.loads((hub.state / "lti-users.json").read_text())
    except FileNotFoundError:
        made = {}
    for name in made:
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def test_a_student_and_a_ta_launch_from_the_platform_into_their_server_and_the_formgrader(
        lti_hub, lti_platform, chromium):
    canvas_sub, moodle_sub = str(uuid.uuid4()), str(uuid.uuid4().int % 10**6)
    student = lti_platform.browser_launch(chromium, canvas_sub, [LEARNER], name="Ada Student", lands_on=LAB)
    model = hub_user(student)
    assert model["name"].startswith("lti-") and model["groups"] == [f"nbgrader-{COURSE}"], model
    assert re.search(rf"/user/{model['name']}/lab", student.url)
    assert json.loads((lti_hub.state / "lti-users.json").read_text())[model["name"]]["id"] == canvas_sub

    ta = lti_platform.browser_launch(chromium, moodle_sub, [INSTRUCTOR, TEACHING_ASSISTANT], lands_on=LAB)
    model = hub_user(ta)
    assert model["groups"] == [f"formgrade-{COURSE}"], model
    formgrader = ta.goto(f"{lti_hub.url}/services/{COURSE}/formgrader")
    assert formgrader.status == 200 and "/formgrader" in ta.url, ta.url
    refused = student.goto(f"{lti_hub.url}/services/{COURSE}/formgrader")
    assert refused.status == 403 or "/formgrader" not in student.url, "a student has no formgrader"


def test_the_platform_verifies_with_the_tools_published_key_set(lti_hub, lti_platform):
    served = requests.get(lti_hub.url + "/hub/lti13/jwks", timeout=10).json()
    assert lti_platform.configuration().get_tool_key_set()["keys"] == served["keys"]

