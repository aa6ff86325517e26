"""The course staff's feedback-on-submit and report pages in chromium, on the README's hub.

One hub, started with "full feedback, no limit, the best attempt counts"; student1 has a failing
attempt and a better one (the one that counts). Then, each as the person would:

* the instructor sets a limit in the policy's form (a value the grader could not use first: the
  form says what to change and nothing is saved), and the grader follows: student1, past the new
  limit, is refused at submit; student2 is graded;
* a TA reads the policy but may not change it, opens the Reports page from the sidebar, reads the
  misconception report (its screenshot is the one docs/tas/formgrader.md shows), downloads every
  export and the attempts CSV, and opens student1's attempt that does not count;
* a student gets 403 from every one of these pages.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from attention_platform.attempts import policy_store
from grader_tests.self_attention.answers import ASSIGNMENT, CORRECT
from hub_helpers import COURSE, REPO, launch_hub
from test_feedback_on_submit_hub import CHROMIUM_ARGS, NO_SCALE, WAIT, answer, graded, submit, wait_for

pytestmark = [
    pytest.mark.slow, pytest.mark.hub, pytest.mark.root, pytest.mark.browser,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users and the sandbox broker need root (CI is root)"),
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"),
]

POLICY = {ASSIGNMENT: {"feedback": "full", "counts": "best"}}
FORMGRADER = f"/services/{COURSE}/formgrader"
SHOTS = REPO / "build" / "screenshots"
DOCS_SHOTS = REPO / "docs" / "_static" / "screenshots"  # refreshed at every run, so the docs show what is


@pytest.fixture(scope="module")
def hub():
    env = {"ATTENTION_FEEDBACK_ON_SUBMIT": json.dumps(POLICY), "HUB_DEMO_STUDENTS": "2"}
    with launch_hub("formgrader-pages-hub", env=env) as running:
        yield running


@pytest.fixture(scope="module")
def students(hub):
    students = hub.students_with(ASSIGNMENT, 2)
    s1 = students["student1"]
    wait_for(s1, lambda s: s.get("enabled_since"), "the grader watching")  # what came before it is not graded
    answer(s1, NO_SCALE.code, "first")
    assert submit(s1)["success"]
    wait_for(s1, graded(1), "student1's first attempt graded")
    answer(s1, CORRECT[0].code, "second")
    assert submit(s1)["success"]
    wait_for(s1, lambda s: len(s["attempts"]) == 2 and s["attempts"][1]["counted"], "the better second attempt counting")
    return students


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def processes_log(hub) -> str:
    return (hub.state / "jupyterhub.log").read_text(errors="replace")  # where the hub's processes write


def grader_follows(hub, offset: int, words: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.findall(r"feedback-on-submit\] policy of " + ASSIGNMENT + r": (.*)", processes_log(hub)[offset:])
        if found and words in found[-1]:
            return found[-1]
        time.sleep(0.2)
    raise AssertionError(f"the grader did not take up the policy saved in the form ({words!r})")


def test_the_instructor_sets_the_policy_in_the_form_and_the_grader_applies_it(hub, students, browser):
    page = hub.browser_page(browser, "instructor")
    page.goto(hub.url + FORMGRADER + "/feedback_on_submit")
    page.locator(f"h2#{ASSIGNMENT}").wait_for()
    page.get_by_role("link", name=f"Change the policy of {ASSIGNMENT}").click()
    form = page.locator("form.attention-policy-form")
    # a value the grader could not use: said on the form, nothing saved
    page.fill("#policy-attempts", "0")
    form.get_by_role("button", name="Save the policy").click()
    assert "'attempts' must be at least 1, not 0" in page.locator("#policy-error").inner_text()
    assert not policy_store.path(hub.state / "course").exists()
    offset = len(processes_log(hub))
    page.select_option("#policy-feedback", "full")
    page.fill("#policy-attempts", "2")
    page.fill("#policy-window", "24")
    page.fill("#policy-cooldown", "0")
    page.select_option("#policy-counts", "best")
    form.get_by_role("button", name="Save the policy").click()
    page.locator("[role=status]", has_text="Saved").wait_for()
    assert "2 graded attempts per 24 hours" in page.locator("#policy-in-force").inner_text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "formgrader-policy-form.png"), full_page=True)
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SHOTS / "formgrader-policy-form.png", DOCS_SHOTS / "formgrader-policy-form.png")
    grader_follows(hub, offset, "2 graded attempts per 24 hours")

    s1, s2 = students["student1"], students["student2"]
    wait_for(s1, lambda s: s.get("next_graded_attempt") is not None, "student1's status telling the new limit")
    answer(s1, CORRECT[1].code, "third")
    refused = submit(s1)
    assert refused["success"] is False
    assert "you have had 2 graded attempts in the last 24 hours, the most this assignment allows" in refused["value"]
    answer(s2, NO_SCALE.code, "first")  # a misconception for the report to show
    assert submit(s2)["success"]
    assert wait_for(s2, graded(1), "student2's attempt graded under the new policy")["attempts"][0]["state"] == "graded"
    wait_for(s2, lambda s: s["attempts"][0]["counted"], "student2's attempt counting (in the gradebook, for the report)")
    page.context.close()


def test_a_ta_reads_the_policy_downloads_the_reports_and_opens_an_attempt_that_does_not_count(hub, students, browser):
    ta = hub.session("ta")
    refused = ta.post(f"{FORMGRADER}/policy/{ASSIGNMENT}", data={"feedback": "off", "window_hours": "24",
                                                                  "cooldown_minutes": "0", "counts": "last"})
    assert refused.status_code == 403 and "instructors only" in refused.text
    page = hub.browser_page(browser, "ta", accept_downloads=True)
    page.goto(hub.url + FORMGRADER + f"/policy/{ASSIGNMENT}")
    assert "2 graded attempts per 24 hours" in page.locator("#policy-in-force").inner_text()
    for field in ("#policy-feedback", "#policy-attempts", "#policy-window", "#policy-cooldown", "#policy-counts"):
        assert page.locator(field).is_disabled(), field
    assert page.get_by_role("button", name="Save the policy").count() == 0

    page.get_by_role("link", name="Reports").click()
    reports = page.locator(f"ul.attention-reports-list[data-assignment={ASSIGNMENT}]")
    downloads = {}
    for link in ("report-check-breakdown", "report-canvas", "report-attempts", "report-misconceptions-download"):
        with page.expect_download() as started:
            reports.locator(f"a.{link}").click()
        downloads[link] = Path(started.value.path()).read_text(encoding="utf-8")
    breakdown = list(csv.DictReader(io.StringIO(downloads["report-check-breakdown"])))
    assert {row["student_id"] for row in breakdown} >= {"student1", "student2"}
    assert any(row["status"] == "passed" for row in breakdown)
    assert downloads["report-canvas"].startswith("Student,ID,SIS User ID,SIS Login ID,Section," + ASSIGNMENT)
    attempts = list(csv.DictReader(io.StringIO(downloads["report-attempts"])))
    assert [(row["student"], row["attempt"], row["counted"]) for row in attempts if row["student"] == "student1"] == \
        [("student1", "1", "0"), ("student1", "2", "1")]
    assert f"Misconception report: {ASSIGNMENT}" in downloads["report-misconceptions-download"]

    reports.locator("a.report-misconceptions").click()
    page.locator("h1", has_text=f"Misconception report: {ASSIGNMENT}").wait_for()
    assert "student2" in page.locator("table#checks tr[data-grade-id=check_sqrt_d_scale] td").nth(6).inner_text()
    shot = SHOTS / "formgrader-misconception-report.png"
    page.screenshot(path=str(shot))  # its top: the numbers, the scores and the misconceptions
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, DOCS_SHOTS / "formgrader-misconception-report.png")

    page.goto(hub.url + FORMGRADER + "/feedback_on_submit")
    first = page.locator(f"table.attempts[data-assignment={ASSIGNMENT}] tr[data-student=student1][data-attempt='1']")
    assert first.get_attribute("class") == ""  # not the counting attempt
    first.locator("a.attention-open-attempt", has_text=ASSIGNMENT).click()
    page.wait_for_load_state()
    shown = page.locator("body").inner_text()
    assert "divided by √D" in shown, shown[:3000]
    page.context.close()


def test_a_student_gets_403_from_every_staff_page(hub, students, browser):
    page = hub.browser_page(browser, "student1")
    for path in ("/feedback_on_submit", "/reports", f"/reports/{ASSIGNMENT}/misconceptions.html",
                 f"/reports/{ASSIGNMENT}/check_breakdown.csv", f"/reports/{ASSIGNMENT}/canvas_grades.csv",
                 f"/reports/{ASSIGNMENT}/attempts.csv", f"/policy/{ASSIGNMENT}",
                 f"/attempts/{ASSIGNMENT}/student1/1/{ASSIGNMENT}"):
        reply = page.goto(hub.url + FORMGRADER + path)
        assert reply.status == 403, (path, reply.status)
    page.context.close()
    s1 = students["student1"]
    assert s1.post(f"{FORMGRADER}/policy/{ASSIGNMENT}", data={"feedback": "off"}).status_code == 403


def test_the_instructor_switches_each_students_own_numbers_on_the_policy_page(hub, browser):
    """Variants (docs/instructors/variants.md) are switched beside the policy: on writes each student's
    own copy into the exchange, off removes it; a TA reads the state but has no buttons."""
    from attention_platform.course import variants

    course, marks = hub.state / "course", hub.state / "exchange" / COURSE / "outbound" / ".variants"
    page = hub.browser_page(browser, "instructor")
    page.goto(hub.url + FORMGRADER + f"/policy/{ASSIGNMENT}")
    assert page.locator("#variants-state").inner_text().startswith("Off:")
    form = page.locator("form.attention-variants-form")
    form.get_by_role("button", name="Give each student their own numbers").click()
    page.locator("[role=status]", has_text="Variants on: own copies written for").wait_for()
    assert variants.is_on(course, ASSIGNMENT) and (marks / ASSIGNMENT).exists()
    assert page.locator("#variants-state").inner_text().startswith("On:")
    page.locator("form.attention-variants-form").get_by_role("button", name="Give everyone the release's numbers").click()
    page.locator("[role=status]", has_text="Variants off").wait_for()
    assert not variants.is_on(course, ASSIGNMENT) and not (marks / ASSIGNMENT).exists()
    page.context.close()
    ta = hub.browser_page(browser, "ta")
    ta.goto(hub.url + FORMGRADER + f"/policy/{ASSIGNMENT}")
    assert ta.locator("#variants-state").inner_text().startswith("Off:")
    assert ta.locator("form.attention-variants-form").count() == 0
    ta.context.close()
