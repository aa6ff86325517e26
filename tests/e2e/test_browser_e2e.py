"""A whole assignment in a real browser (Debian's chromium driven by Playwright) against the
README's first command: real hub, proxy, single-user servers, formgrader and nbgrader.

The instructor releases self_attention from the formgrader (a service that serves the
formgrader and nothing else). Two students log in at 1280 px: their Lab opens on their
assignments, with the course's own tools only; they fetch (and are told so), Validate the
untouched notebook (which names the answer still to write), type their answers (one correct, one
without √D), Validate again (which says the hidden checks run after submitting, never "Success")
and submit (told when, to the second). The TA sees only what a TA may do, is refused an
instructor's action in so many words, collects, autogrades, sees each student's state move,
reads the per-check summary of a submission, generates and releases feedback. Each student
fetches feedback, opens it as a page and reads one row per check with the right mark — and only
their own. The same views are checked at 390 px. Screenshots of every step: build/screenshots/.

Checked by what a person sees: text, and geometry (nothing scrolls sideways inside a message,
every check title fits), not by the presence of elements alone.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from grader_tests.self_attention.answers import release_notebook
from grader_tests.self_attention.answers import BUGGY, CORRECT, class_cell, with_methods
from grader_tests.registry import assignment
from hub_helpers import COURSE, REPO

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)"),
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"),
]

SHOTS = REPO / "build" / "screenshots"
# Steps whose screenshots the documentation shows (docs/_static/screenshots/): taken from this live hub
# at every run, so the pictures in the pages stay true.
DOCS_SHOTS = REPO / "docs" / "_static" / "screenshots"
PUBLISHED = {"student1-jupyterlab-opens-on-assignments": "student-assignments", "student1-validated": "student-validate",
             "ta-manage-assignments": "formgrader-manage-assignments", "ta-autograded": "formgrader-autograded",
             "student2-feedback-page": "feedback-page"}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ASSIGNMENT = "self_attention"
NO_SCALE = next(a for a in BUGGY if a.name == "no_scale")
ANSWERS = {"student1": CORRECT[0], "student2": NO_SCALE}
CORE_CHECKS = NOTEBOOK_CHECKS["self_attention"]
T = 60_000  # ms: a 2-core machine shared with others
WIDE, NARROW = 1280, 390

# Elements that hold a message a person reads: none may scroll sideways, or be cut at the window's edge.
SIDEWAYS = """(selector) => {
  const view = document.documentElement.clientWidth;
  return [...document.querySelectorAll(selector)].filter(el => el.offsetParent !== null).filter(el =>
    el.scrollWidth > el.clientWidth + 1 || el.getBoundingClientRect().right > view + 1 || el.getBoundingClientRect().left < -1
  ).map(el => el.textContent.slice(0, 80));
}"""


@pytest.fixture
def hub(native_hub):
    return native_hub  # tests/conftest.py: one hub for the session's hub tests


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class Shots:
    def __init__(self):
        SHOTS.mkdir(parents=True, exist_ok=True)
        for old in SHOTS.glob("*.png"):
            old.unlink()
        self.n = 0

    def __call__(self, page, name: str) -> None:
        self.n += 1
        print(f"{time.strftime('%H:%M:%S')} step {self.n:02d} {name}", flush=True)
        page.screenshot(path=str(SHOTS / f"{self.n:02d}-{name}.png"))
        publish(SHOTS / f"{self.n:02d}-{name}.png", name)


def publish(path: Path, name: str) -> None:
    """The documentation's copy of a step's screenshot, if the pages show that step."""
    if name in PUBLISHED:
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_SHOTS / f"{PUBLISHED[name]}.png")


def login(browser, hub, user: str, width: int = WIDE):
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(T)
    page = context.new_page()
    page.goto(hub.url + "/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", hub.passwords[user])
    page.locator("input[name=password]").press("Enter")
    page.wait_for_url(re.compile(r".*/(hub/(home|spawn|spawn-pending).*|user/.*)"))
    return page


def no_sideways(page, selector: str) -> None:
    assert page.evaluate(SIDEWAYS, selector) == [], f"{selector} scrolls sideways or is cut off"


def close_modal(page, timeout: float = 300_000) -> str:
    """Wait for the formgrader's result dialog, close it, return what it said (its folded log too)."""
    modal = page.locator(".modal.show, .modal.in")
    modal.first.wait_for(state="visible", timeout=timeout)
    no_sideways(page, ".modal.in .modal-body p, .modal.in .modal-title")
    text = modal.first.inner_text()
    modal.first.locator(".modal-footer button").first.click()
    modal.first.wait_for(state="hidden")
    page.locator(".modal-backdrop").wait_for(state="detached")
    return text


def formgrader_click(page, hub, column: str) -> str:
    page.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_assignments")
    row = page.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}'))")
    row.locator(f"td.{column} a").first.click()
    return close_modal(page)


def open_lab(page, hub, user: str) -> float:
    started = time.monotonic()
    page.goto(f"{hub.url}/hub/spawn")
    page.wait_for_url(re.compile(rf".*/user/{user}/lab.*"), timeout=180_000)
    page.locator(".jp-LabShell").wait_for()
    return time.monotonic() - started


def course_menu(page, item: str) -> None:
    page.locator(".lm-MenuBar-item", has_text="Course").click()
    page.locator(".lm-Menu-item", has_text=item).first.click()


def assignments_panel(page):
    panel = page.locator("#nbgrader-assignment-list")
    if not panel.is_visible():
        course_menu(page, "Your assignments")
    panel.wait_for()
    return panel


def toast(page, text: str) -> str:
    """The Lab's notification that contains ``text`` (it stays readable: no sideways scroll)."""
    note = page.locator(".jp-toast-message", has_text=text).first
    note.wait_for()
    # measured once it has slid in (react-toastify's entering class is gone)
    page.wait_for_function("() => !document.querySelector('.Toastify__toast[class*=\"enter\"]')")
    no_sideways(page, ".jp-toast-message")
    return note.inner_text()


def validate(page, shot, name: str, *, from_menu: bool = False) -> dict:
    if from_menu:  # a phone-wide toolbar folds its buttons away: the Course menu has Validate too
        course_menu(page, "Validate this notebook")
    else:
        page.locator(".attention-validate-button").first.click()
    dialog = page.locator(".jp-Dialog .attention-validate")
    dialog.wait_for(timeout=180_000)
    no_sideways(page, ".attention-validate p, .attention-validate li")
    shot(page, name)
    found = {"ok": dialog.get_attribute("data-ok") == "true", "text": dialog.inner_text(),
             "problems": page.locator(".attention-validate li").all_inner_texts()}
    page.locator(".jp-Dialog").get_by_role("button", name="OK").click()
    page.locator(".jp-Dialog").wait_for(state="detached")
    return found


def type_answer(page, user: str, answer: str) -> None:
    cell = page.locator(".jp-Notebook .jp-Cell", has_text="class SelfAttention").first
    cell.scroll_into_view_if_needed()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(with_methods(class_cell(release_notebook()).source, answer))
    page.keyboard.press("Control+s")
    page.locator(".jp-Notebook").first.click()


def test_a_whole_assignment_in_the_browser(hub, browser, record_property):
    shot = Shots()
    timings = {"hub_start_seconds": hub.start_seconds}

    # instructor: release from the formgrader, where every instructor's action is shown
    prof = login(browser, hub, "instructor")
    prof.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_assignments")
    headers = prof.locator("thead th:visible").all_inner_texts()
    assert {"Edit", "Generate", "Release"} <= {h.strip() for h in headers}, headers
    prof.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}')) td.release a").click()
    prof.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}')) td.status:has-text('released')").wait_for()
    shot(prof, "instructor-released")
    # the service is the formgrader and nothing else: its front door leads there, JupyterLab is not served
    prof.goto(f"{hub.url}/services/{COURSE}/")
    prof.locator("text=Manage Assignments").first.wait_for()
    assert prof.goto(f"{hub.url}/services/{COURSE}/lab").status == 404

    # students: the Lab opens on their assignments, with nothing of the instructors' tools
    pages = {}
    for user, answer in ANSWERS.items():
        page = login(browser, hub, user)
        seconds = open_lab(page, hub, user)
        timings.setdefault("first_jupyterlab_load_seconds", seconds)
        panel = page.locator("#nbgrader-assignment-list")
        panel.wait_for()  # open without a click
        menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        assert "Course" in menus and "Nbgrader" not in menus, menus
        assert page.get_by_text("Create Assignment").count() == 0 and page.get_by_text("Formgrader").count() == 0
        shot(page, f"{user}-jupyterlab-opens-on-assignments")
        panel.get_by_role("button", name="Fetch").click()
        said = toast(page, "Fetched")
        assert f"Fetched “{ASSIGNMENT}”" in said and "Start with self_attention.ipynb (part 1)" in said, said
        panel.get_by_role("button", name="Submit").wait_for()
        shot(page, f"{user}-fetched")

        page.goto(f"{hub.url}/user/{user}/lab/tree/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
        page.locator(".jp-Notebook .jp-Cell", has_text="class SelfAttention").first.wait_for()
        untouched = validate(page, shot, f"{user}-validate-untouched")
        assert not untouched["ok"] and "Not ready yet" in untouched["text"] and "Success" not in untouched["text"]
        assert any("SelfAttention.forward and SelfAttention.attention_weights still raise NotImplementedError" in p
                   for p in untouched["problems"]), untouched
        assert "does not run the hidden checks" in untouched["text"]

        type_answer(page, user, answer.code)
        shot(page, f"{user}-answered")
        answered = validate(page, shot, f"{user}-validated")
        assert answered["ok"] and "runs without errors — hidden checks run after you submit" in answered["text"]
        assert "passes all the tests" not in answered["text"]  # true of the correct answer and the one without √D

        panel = assignments_panel(page)
        panel.get_by_role("button", name="Submit").first.click()
        said = toast(page, "Submitted")
        # the Submitted list gives the exchange's time (to the second) in the student's zone
        listed = panel.locator("#submitted_assignments_list .nested_list_item .item_name time[datetime]").first
        listed.wait_for()
        at = listed.get_attribute("datetime")
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.000Z", at), at
        # the toast gives the same time in the Lab's one format for times
        shown = page.evaluate("""iso => new Intl.DateTimeFormat(undefined, {day: 'numeric', month: 'short',
            hour: '2-digit', minute: '2-digit', timeZoneName: 'short'}).format(new Date(iso))""", at)
        assert listed.inner_text().startswith(shown), (shown, listed.inner_text())
        assert f"at {shown}" in said, (shown, said)
        shot(page, f"{user}-submitted")
        pages[user] = page

    # protections seen from a student's browser
    s1 = pages["student1"]
    for url in (f"{hub.url}/services/{COURSE}/formgrader", f"{hub.url}/user/student2/lab"):
        response = s1.goto(url)
        assert response.status == 403, (url, response.status)
        shot(s1, "student1-403")

    # TA: only a TA's actions are shown; an instructor's, sent anyway, is refused in words
    ta = login(browser, hub, "ta")
    ta.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_assignments")
    ta.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}'))").wait_for()
    headers = {h.strip() for h in ta.locator("thead th:visible").all_inner_texts()}
    assert not {"Edit", "Generate", "Preview", "Release"} & headers and "Collect" in headers, headers
    assert ta.locator("tfoot a", has_text="Add new assignment").is_hidden()
    shot(ta, "ta-manage-assignments")
    ta.evaluate(f"() => {{ $.post(base_url + '/formgrader/api/assignment/{ASSIGNMENT}/release'); }}")  # as a button would
    said = close_modal(ta)
    assert "Instructors only: ask one of the course's instructors to do this" in said, said

    # collect, autograde with progress and each student's state
    said = formgrader_click(ta, hub, "collect")
    assert f"Collected the submissions of '{ASSIGNMENT}': 2 students have a submission to grade." in said, said
    assert "Successfully" not in said, said
    ta.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_submissions/{ASSIGNMENT}")
    for user in ANSWERS:
        state = ta.locator(f"tr:has-text('{user}') td.status .attention-state")
        state.wait_for()
        assert state.inner_text() == "needs autograding"
    # releasing feedback that does not exist yet says so, and why
    ta.locator("tr:has-text('student1') td.release-feedback a").click()
    said = close_modal(ta)
    assert "Nothing was done for student1: the submission has not been autograded yet." in said, said
    assert "Successfully" not in said
    for user in ANSWERS:
        row = ta.locator(f"tr:has-text('{user}')")
        row.locator("td.autograde a").click()
        said = close_modal(ta)
        assert f"Successfully autograded '{ASSIGNMENT}' for student '{user}'" in said, said
        assert "checksum" not in said  # expected events raise no alarm; the log is folded anyway
        ta.locator(f"tr:has-text('{user}') td.status .attention-state:text-is('autograded')").wait_for()
    shot(ta, "ta-autograded")

    # the submission view: one row per check, with the right mark, titles whole
    ta.goto(f"{hub.url}/services/{COURSE}/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}")
    student2_link = ta.locator("tr:has-text('student2') a[href*='/formgrader/submissions/']").first
    student2_link.wait_for()
    submission_url = hub.url + student2_link.get_attribute("href")
    check_summary(ta, submission_url, shot, "ta-submission-view")

    said = formgrader_click(ta, hub, "generate-feedback")
    assert "Feedback generated for 2 of 2 submissions: student1, student2." in said, said
    said = formgrader_click(ta, hub, "release-feedback")
    assert "Feedback released to 2 of 2 students: student1, student2." in said, said
    ta.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_submissions/{ASSIGNMENT}")
    for user in ANSWERS:
        ta.locator(f"tr:has-text('{user}') td.status .attention-state:text-is('feedback released')").wait_for()
    shot(ta, "ta-feedback-released")

    # the TA's own Lab: no assignments (not enrolled), a working way to the course's formgrader
    ta_lab = login(browser, hub, "ta")
    open_lab(ta_lab, hub, "ta")
    ta_lab.locator(".lm-MenuBar-item", has_text="Course").click()
    entries = ta_lab.locator(".lm-Menu-item").all_inner_texts()
    assert any("Formgrader (dl-attention)" in e for e in entries) and not any("assignments" in e for e in entries)
    with ta_lab.context.expect_page() as opened:
        ta_lab.locator(".lm-Menu-item", has_text="Formgrader").first.click()
    formgrader = opened.value
    formgrader.locator("text=Manage Assignments").first.wait_for()
    assert formgrader.url.startswith(f"{hub.url}/services/{COURSE}/formgrader")
    assert ta_lab.locator("#nbgrader-assignment-list").count() == 0
    shot(ta_lab, "ta-lab-course-menu")
    formgrader.close()

    # students: fetch feedback, open it as a page of its own, read one row per check — their own only
    feedback_urls = {}
    for user, page in pages.items():
        page.goto(f"{hub.url}/user/{user}/lab")
        panel = assignments_panel(page)
        panel.get_by_role("button", name=re.compile("Fetch Feedback")).first.click()
        toast(page, "Feedback for")
        shot(page, f"{user}-feedback-fetched")
        with page.context.expect_page() as opened:
            page.locator(".jp-toast-message", has_text="Feedback for").first.locator(
                "xpath=ancestor::*[contains(@class,'Toastify__toast')][1]").get_by_role("button", name="Open feedback").click()
        feedback = opened.value
        feedback.wait_for_load_state()
        feedback_urls[user] = feedback.url
        rows = feedback.locator("#check-summary tbody tr")
        assert rows.count() == len(CORE_CHECKS)
        for i, check in enumerate(CORE_CHECKS):
            failed = user == "student2" and check.id in NO_SCALE.fails
            assert rows.nth(i).get_attribute("data-grade-id") == "check_" + check.id
            assert rows.nth(i).locator("td").first.inner_text() == ("✗ failed" if failed else "✓ passed")
        no_sideways(feedback, "#check-summary td a, .check-message")
        total = feedback.locator("#assignment-total").inner_text()
        assert re.search(rf"{ASSIGNMENT}: [0-9.]+ of [0-9.]+ points", total), total
        feedback.screenshot(path=str(SHOTS / f"{user}-feedback-page.png"))
        publish(SHOTS / f"{user}-feedback-page.png", f"{user}-feedback-page")
        feedback.close()
    other = pages["student1"].goto(feedback_urls["student2"])
    assert other.status == 403
    shot(pages["student1"], "student1-403-on-student2-feedback")

    # the same views on a phone-sized screen
    phone = login(browser, hub, "student2", width=NARROW)
    open_lab(phone, hub, "student2")
    phone.goto(f"{hub.url}/user/student2/lab/tree/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
    phone.locator(".jp-Notebook .jp-Cell", has_text="class SelfAttention").first.wait_for()
    assert validate(phone, shot, "student2-390-validate", from_menu=True)["ok"]
    phone.goto(f"{hub.url}/user/student2/lab")
    panel = assignments_panel(phone)
    no_sideways(phone, "#nbgrader-assignment-list .item_name")
    shot(phone, "student2-390-assignments")
    ta_phone = login(browser, hub, "ta", width=NARROW)
    check_summary(ta_phone, submission_url, shot, "ta-390-submission-view")

    for name, value in timings.items():
        record_property(name, round(value, 1))
    print("timings:", {k: round(v, 1) for k, v in timings.items()})


def check_summary(page, submission_url: str, shot, name: str) -> None:
    """student2's submission (no √D) in the formgrader: one row per check of the notebook, the right
    mark as a word, every title whole and every message wrapped."""
    page.goto(submission_url)
    rows = page.locator("#check-summary tbody tr")
    rows.first.wait_for()
    assert rows.count() == len(CORE_CHECKS)
    for i, check in enumerate(CORE_CHECKS):
        failed = check.id in NO_SCALE.fails
        assert rows.nth(i).get_attribute("data-grade-id") == "check_" + check.id
        assert rows.nth(i).locator("td.result").inner_text() == ("✗ failed" if failed else "✓ passed")
        assert rows.nth(i).locator("td a").inner_text() == check.title
    no_sideways(page, "#check-summary td a, #check-summary .check-message")
    shot(page, name)
