"""Every page a person uses on the hub, checked by axe-core in chromium (tests/accessibility.py): no
serious or critical violation, and the keyboard reaches each control of the student's panel and of the
formgrader's actions.

A page is one row of PAGES: who opens it, where, and which part of it is ours to check (the whole
page, or our panels inside JupyterLab's own markup). A violation in markup we do not make is excused
only in KNOWN, by rule and target, with the reason.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from accessibility import NotOurs, assert_accessible, assert_keyboard_reaches
from grader_tests.self_attention.answers import ASSIGNMENT
from hub_helpers import COURSE, launch_hub

pytestmark = [
    pytest.mark.slow, pytest.mark.hub, pytest.mark.root, pytest.mark.browser,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users and the sandbox broker need root (CI is root)"),
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"),
]

POLICY = {ASSIGNMENT: {"feedback": "full", "attempts": None, "counts": "last"}}
WAIT = 300  # s: how long the test waits for the grader on a shared 2-core machine (never asserted)
FORMGRADER = f"/services/{COURSE}/formgrader"
# The student's Assignments tab: nbgrader's list with the course's additions, and the feedback panel.
STUDENT_PANELS = {"include": [["#feedback_on_submit_panel"], ["#nbgrader-assignment-list"]]}
KNOWN: tuple[NotOurs, ...] = ()


def lab_assignments(page, hub, user):
    page.goto(f"{hub.url}/user/{user}/lab")
    page.locator(".jp-LabShell").wait_for()
    if not page.locator("#nbgrader-assignment-list").is_visible():
        page.locator(".lm-MenuBar-item", has_text="Course").click()
        page.locator(".lm-Menu-item", has_text="Your assignments").first.click()
    page.locator("#feedback_on_submit_panel li.fos-attempt").first.wait_for(timeout=WAIT * 1000)


def validate_dialog(page, hub, user):
    lab_assignments(page, hub, user)
    listing = page.locator("#nbgrader-assignment-list")
    listing.locator(".assignment-notebooks-link", has_text=ASSIGNMENT).first.click()
    row = listing.locator(".nested_list_item", has=page.locator(".item_name a", has_text=re.compile(f"^{ASSIGNMENT}$")))
    row.get_by_role("button", name="Validate").click()
    page.locator(".jp-Dialog .attention-validate").wait_for(timeout=WAIT * 1000)


def feedback_page(page, hub, user):
    page.goto(f"{hub.url}/user/{user}/attention/feedback-on-submit/page/{ASSIGNMENT}/1/{ASSIGNMENT}.html")
    page.wait_for_load_state("networkidle")


def formgrader(path):
    def open_formgrader(page, hub, user):
        page.goto(hub.url + FORMGRADER + path)
        page.wait_for_load_state("networkidle")
    return open_formgrader


# (what, who, how to open it, the part to check: None for the whole page). Each opener returns once its
# page is ready: by an element of ours inside the Lab, whose Assignments tab always holds one status
# request open (so the network is never idle there), and by an idle network elsewhere.
PAGES = [
    ("the student's Assignments tab and feedback panel", "student1", lab_assignments, STUDENT_PANELS),
    ("the Validate dialog", "student1", validate_dialog, {"include": [[".jp-Dialog"]]}),
    ("a feedback page", "student1", feedback_page, None),
    ("manage assignments", "instructor", formgrader("/manage_assignments"), None),
    ("manage submissions", "instructor", formgrader(f"/manage_submissions/{ASSIGNMENT}"), None),
    ("manual grading", "instructor", formgrader("/gradebook"), None),
    ("manual grading of the assignment", "instructor", formgrader(f"/gradebook/{ASSIGNMENT}"), None),
    ("manage students", "instructor", formgrader("/manage_students"), None),
    ("the attempts page", "instructor", formgrader("/feedback_on_submit"), None),
    ("manage assignments as a TA", "ta", formgrader("/manage_assignments"), None),
    ("the policy form", "instructor", formgrader(f"/policy/{ASSIGNMENT}"), None),
    ("the Extensions page", "instructor", formgrader("/extensions"), None),
    ("the extensions of an assignment", "instructor", formgrader(f"/extensions/{ASSIGNMENT}"), None),
    ("the Reports page", "ta", formgrader("/reports"), None),
    ("the misconception report", "ta", formgrader(f"/reports/{ASSIGNMENT}/misconceptions.html"), None),
    ("the similarity report", "ta", formgrader(f"/similarity/{ASSIGNMENT}"), None),
    ("Preview", "instructor", formgrader(f"/attention/preview/{ASSIGNMENT}"), None),
    ("Preview of a notebook", "instructor", formgrader(f"/attention/preview/{ASSIGNMENT}/{ASSIGNMENT}"), None),
]


@pytest.fixture(scope="module")
def hub():
    env = {"ATTENTION_FEEDBACK_ON_SUBMIT": json.dumps(POLICY), "HUB_DEMO_STUDENTS": "1"}
    with launch_hub("accessibility-hub", env=env) as running:
        student = running.session("student1")
        student.spawn()
        assert student.assignment_action("fetch", ASSIGNMENT)["success"]
        assert student.assignment_action("submit", ASSIGNMENT)["success"]
        deadline = time.monotonic() + WAIT
        while not _graded(student):
            assert time.monotonic() < deadline, "the submission was not graded with its pages"
            time.sleep(0.5)
        yield running


def _graded(session) -> bool:
    reply = session.get(f"/user/{session.username}/attention/feedback-on-submit").json()
    attempts = (reply["assignments"].get(ASSIGNMENT) or {}).get("attempts") or []
    return bool(attempts) and attempts[-1]["state"] in ("graded", "error") and bool(attempts[-1].get("pages"))


@pytest.fixture(scope="module")
def chromium():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def logged_in(hub, chromium):
    """A browser context per user, logged in once (axe's script needs the pages' CSP bypassed)."""
    contexts = {}

    def context_of(user):
        if user not in contexts:
            context = chromium.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
            context.set_default_timeout(120_000)
            page = context.new_page()
            page.goto(hub.url + "/hub/login")
            page.fill("input[name=username]", user)
            page.fill("input[name=password]", hub.passwords[user])
            page.locator("input[name=password]").press("Enter")
            page.wait_for_load_state()
            page.close()
            contexts[user] = context
        return contexts[user]

    yield context_of
    for context in contexts.values():
        context.close()


@pytest.mark.parametrize("what, user, open_page, part", PAGES, ids=[row[0] for row in PAGES])
def test_no_serious_accessibility_violation(logged_in, hub, what, user, open_page, part):
    page = logged_in(user).new_page()
    try:
        open_page(page, hub, user)
        assert_accessible(page, part, KNOWN)
    finally:
        page.close()


def test_the_keyboard_reaches_every_control_of_the_students_panel(logged_in, hub):
    page = logged_in("student1").new_page()
    try:
        lab_assignments(page, hub, "student1")
        assert_keyboard_reaches(page, "#feedback_on_submit_panel")
        assert_keyboard_reaches(page, "#nbgrader-assignment-list")
    finally:
        page.close()


def test_the_keyboard_reaches_every_action_of_the_formgrader(logged_in, hub):
    page = logged_in("instructor").new_page()
    try:
        page.goto(hub.url + FORMGRADER + "/manage_assignments")
        page.wait_for_load_state("networkidle")
        assert_keyboard_reaches(page, "body")
    finally:
        page.close()
