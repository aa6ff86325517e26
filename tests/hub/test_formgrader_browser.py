"""Grading from the formgrader's pages alone, in a real browser (Debian's chromium driven by
Playwright) on a live hub, for the second assignment (multi_head_attention; the first is walked in
tests/e2e/test_browser_e2e.py).

A student submits with a written answer. The TA collects (told how many submissions came in),
clicks Autograde all and sees its progress, then its summary with the written answer waiting for a
TA; from Manual Grading the assignment's name leads to the notebooks, the submission, the rubric
above the score box; the TA saves a score. The instructor's Preview opens the student version.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urljoin

import pytest

from grader_tests.registry import assignment
from hub_helpers import COURSE

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)"),
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"),
]

ASSIGNMENT = "multi_head_attention"
STUDENT = "student3"  # on the shared security hub, the other tests submit self_attention only
WRITTEN = assignment(ASSIGNMENT).written[0]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
T = 120_000  # ms: a 2-core machine shared with others


@pytest.fixture(scope="module")
def submitted(security_hub):
    """STUDENT's submission: the release, with the first written answer written."""
    student = security_hub.session(STUDENT)
    student.spawn()
    assert student.assignment_action("fetch", ASSIGNMENT)["success"]
    path = f"{ASSIGNMENT}/{WRITTEN.notebook}.ipynb"
    nb = student.contents(path).json()["content"]
    (answer,) = [cell for cell in nb["cells"] if cell["metadata"].get("nbgrader", {}).get("grade_id") == WRITTEN.grade_id]
    answer["source"] = "Each head attends with its own projections, so the heads can look at different positions."
    student.save_notebook(path, nb)
    assert student.assignment_action("submit", ASSIGNMENT)["success"]
    return security_hub


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


def login(browser, hub, user: str):
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(T)
    page.goto(hub.url + "/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", hub.passwords[user])
    page.locator("input[name=password]").press("Enter")
    page.wait_for_url(re.compile(r".*/(hub/|user/).*"))
    return page


def close_modal(page) -> str:
    modal = page.locator(".modal.show, .modal.in")
    modal.first.wait_for(state="visible", timeout=300_000)
    text = modal.first.inner_text()
    modal.first.locator(".modal-footer button").first.click()
    modal.first.wait_for(state="hidden")
    return text


def test_a_ta_collects_autogrades_all_and_grades_a_written_answer_by_hand(submitted, browser):
    hub = submitted
    formgrader = f"{hub.url}/services/{COURSE}/formgrader"
    ta = login(browser, hub, "ta")

    # collect: the dialog says what came in, never "Successfully" over "No submissions to collect"
    ta.goto(f"{formgrader}/manage_assignments")
    ta.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}')) td.collect a").first.click()
    said = close_modal(ta)
    assert re.search(rf"Collected the submissions of '{ASSIGNMENT}': \d+ students? ha(s|ve) a submission to grade",
                     said) and "Successfully" not in said, said

    # Autograde all: progress while it runs, then the summary with what needs a TA
    ta.goto(f"{formgrader}/manage_submissions/{ASSIGNMENT}")
    ta.get_by_role("button", name="Autograde all").click()
    assert ta.get_by_role("button", name="Autograde all").is_disabled()  # one run at a time
    status = ta.locator("#attention-autograde-all-status")
    status.filter(has_text=re.compile(r"Autograding all submissions: (starting the sandbox|\d+ of \d+ done)")).wait_for()
    status.filter(has_text=re.compile("finished|stopped|Nothing was graded")).wait_for(timeout=600_000)
    assert status.inner_text() == "Autograde all finished.", status.inner_text()
    summary = ta.locator("#attention-autograde-all-summary").inner_text()
    assert re.search(r"Graded (\d+) of \1 submissions?", summary), summary
    assert re.search(rf"Written answers to grade by hand: .*{STUDENT} \(\d+ points?\)", summary), summary
    ta.locator(f"tr:has-text('{STUDENT}') td.status .attention-state", has_text="needs manual grading").wait_for()

    # Manual Grading: the assignment's name leads to its notebooks, then to the submission
    ta.goto(f"{formgrader}/gradebook")
    ta.locator("#main-table a", has_text=ASSIGNMENT).first.click()
    ta.wait_for_url(f"{formgrader}/gradebook/{ASSIGNMENT}")
    ta.locator("#main-table a", has_text=WRITTEN.notebook).first.click()
    ta.wait_for_url(f"{formgrader}/gradebook/{ASSIGNMENT}/{WRITTEN.notebook}")
    ta.locator("#main-table a[href*='/formgrader/submissions/']:visible").first.click()
    score = ta.locator(f"input.score#{WRITTEN.grade_id}")
    score.wait_for()
    rubric = ta.locator(f"aside.attention-rubric[aria-labelledby='rubric-{WRITTEN.grade_id}']")
    assert "Rubric for" in rubric.inner_text()
    assert rubric.bounding_box()["y"] < score.bounding_box()["y"], "the rubric is above the score box"
    assert "MARK SCHEME" not in ta.content()
    submission_id = ta.url.rstrip("/").split("/")[-1]
    score.fill("1")
    score.press("Tab")  # nbgrader saves a score when the box loses focus
    saved = f"{formgrader}/api/grades?submission_id={submission_id}"  # what the gradebook holds, as the page reads it
    manual_score = ("async () => { const xsrf = (document.cookie.match(/\\b_xsrf=([^;]*)/) || [])[1] || '';"
                    f" const grades = await (await fetch({saved!r}, {{headers: {{'X-XSRFToken': xsrf}}}})).json();"
                    f" return grades.find(g => g.name === {WRITTEN.grade_id!r}).manual_score; }}")
    for _ in range(60):
        if ta.evaluate(manual_score) == 1:
            break
        ta.wait_for_timeout(500)
    assert ta.evaluate(manual_score) == 1


def test_the_instructors_preview_opens_the_student_version(submitted, browser):
    hub = submitted
    instructor = login(browser, hub, "instructor")
    instructor.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_assignments")
    row = instructor.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}'))")
    with instructor.context.expect_page() as opened:
        row.locator("td.preview a").first.click()
    preview = opened.value
    preview.wait_for_load_state()
    listed = preview.locator("a.attention-preview-notebook")
    assert listed.all_inner_texts() == [f"{notebook}.ipynb" for notebook in assignment(ASSIGNMENT).notebooks]
    response = preview.goto(urljoin(preview.url, listed.nth(0).get_attribute("href")))
    assert response.status == 200
    text = preview.locator("body").inner_text()
    assert "BEGIN HIDDEN TESTS" not in text and "MARK SCHEME" not in text
    assert preview.locator(".jp-Cell, .cell").count() > 3  # the notebook, rendered
