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


def test_a_launch_inside_the_lms_page_offers_a_new_window_that_completes_it(lti_hub, lti_platform, chromium):
    """The LMS (on localhost, another site than the hub's 127.0.0.1) shows the tool in an iframe while the tool
    is set to open in a window of its own: the frame says so with a link, and the link's window logs in."""
    from lti_platform import PlannedLaunch

    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(120_000)
    course = context.new_page()
    course.goto(lti_platform.course_page(PlannedLaunch(user=str(uuid.uuid4()), roles=[LEARNER])))
    frame = course.frame_locator("#tool")
    link = frame.get_by_role("link", name="Open the course hub in a new window")
    link.wait_for()
    with course.expect_popup() as opened:
        link.click()
    window = opened.value
    window.wait_for_url(re.compile(LAB))
    assert hub_user(window)["groups"] == [f"nbgrader-{COURSE}"]


def test_an_instructor_adds_an_assignment_from_the_lms_picker_and_it_launches_into_that_assignment(
        lti_hub, lti_platform, chromium):
    from lti_platform import CLIENT_ID, DEPLOYMENT_ID

    picker = lti_platform.browser_launch(chromium, "prof-" + uuid.uuid4().hex[:8], [INSTRUCTOR],
                                         message_type="LtiDeepLinkingRequest", deep_link_data="opaque-42",
                                         lands_on=r".*/hub/lti13/deep_link/.*")
    choices = picker.get_by_role("radio")
    assert sorted(choices.nth(i).get_attribute("value") for i in range(choices.count())) == sorted(
        ["self_attention", "multi_head_attention"])
    picker_url = picker.url
    picker.get_by_role("radio", name="multi_head_attention").check()
    picker.get_by_role("button", name="Add to the LMS course").click()
    picker.wait_for_url(lti_platform.url + "/deep_link_return")
    response = lti_platform.deep_link_responses[-1]
    assert "error" not in response, response
    claims, (item,) = response["claims"], response["items"]
    assert claims["iss"] == CLIENT_ID and claims["aud"] == lti_platform.url
    assert claims["https://purl.imsglobal.org/spec/lti/claim/deployment_id"] == DEPLOYMENT_ID
    assert claims["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "opaque-42"
    assert item["type"] == "ltiResourceLink" and item["custom"] == {"assignment": "multi_head_attention"}

    student = lti_platform.browser_launch(chromium, str(uuid.uuid4()), [LEARNER], target_link_uri=item["url"],
                                          custom=item["custom"], lands_on=r".*/user/[^/]+/lab/tree/multi_head_attention.*")
    assert hub_user(student)["groups"] == [f"nbgrader-{COURSE}"]
    assert student.goto(picker_url).status in (403, 404), "a student never sees an instructor's picker"
    assert picker.goto(picker_url).status == 404, "each request to add an assignment is answered once"

    refused = lti_platform.browser_launch(chromium, str(uuid.uuid4()), [LEARNER], message_type="LtiDeepLinkingRequest",
                                          lands_on=r".*/hub/lti13/oauth_callback.*")
    assert "Only the course's instructors" in refused.content()
