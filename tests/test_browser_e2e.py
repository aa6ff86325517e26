"""A whole assignment in a real browser (Debian's chromium driven by Playwright)
against the README's first command: real hub, proxy, single-user servers,
formgrader and nbgrader.

The instructor releases self_attention from the formgrader (a service that serves
the formgrader and nothing else); two students log in, fetch it
in the Assignments tab, type their answers into the notebook (one correct, one
with a bug), validate and submit; the TA collects, autogrades, generates and
releases feedback from the formgrader; each student fetches feedback and sees
their own score, never the other's. Screenshots of every step: build/screenshots/.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from attention_platform.course.notebooks import class_cell, release_notebook, with_methods
from grader_tests.answers import BUGGY, CORRECT
from hub_helpers import COURSE, REPO

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)"),
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"),
]

SHOTS = REPO / "build" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ASSIGNMENT = "self_attention"
ANSWERS = {"student1": CORRECT[0].code, "student2": next(a for a in BUGGY if a.name == "no_scale").code}
T = 60_000  # ms: a 2-core machine shared with others


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


def login(browser, hub, user: str):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(T)
    page = context.new_page()
    page.goto(hub.url + "/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", hub.passwords[user])
    page.locator("input[name=password]").press("Enter")
    page.wait_for_url(re.compile(r".*/(hub/(home|spawn|spawn-pending).*|user/.*)"))
    return page


def close_modal(page, timeout: float = 300_000) -> str:
    """Wait for the formgrader's result dialog, close it, return what it said."""
    modal = page.locator(".modal.show, .modal.in")
    modal.first.wait_for(state="visible", timeout=timeout)
    text = modal.first.inner_text()
    modal.first.locator(".modal-footer button").first.click()
    modal.first.wait_for(state="hidden")
    page.locator(".modal-backdrop").wait_for(state="detached")
    return text


def formgrader_click(page, hub, column: str, *, modal: bool = True) -> None:
    page.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_assignments")
    row = page.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}'))")
    row.locator(f"td.{column} a").first.click()
    if modal:
        said = close_modal(page)
        assert "Successfully" in said, said


def open_lab(page, hub, user: str) -> float:
    started = time.monotonic()
    page.goto(f"{hub.url}/hub/spawn")
    page.wait_for_url(re.compile(rf".*/user/{user}/lab.*"), timeout=180_000)
    page.locator(".jp-LabShell").wait_for()
    page.locator(".jp-Launcher, .jp-DirListing").first.wait_for()
    return time.monotonic() - started


def assignments_tab(page):
    page.get_by_role("menuitem", name="Nbgrader").click()
    page.get_by_role("menuitem", name="Assignment List").click()
    panel = page.locator(".nbgrader-assignment-list, #nbgrader-assignment-list, [id*=assignment-list]").first
    panel.wait_for()
    return panel


def test_a_whole_assignment_in_the_browser(hub, browser, record_property):
    shot = Shots()
    timings = {"hub_start_seconds": hub.start_seconds}

    # instructor: release from the formgrader; the formgrader also renders inside the grader's JupyterLab
    prof = login(browser, hub, "instructor")
    formgrader_click(prof, hub, "release", modal=False)
    prof.locator(f"tr:has(td.name:has-text('{ASSIGNMENT}')) td.status:has-text('released')").wait_for()
    shot(prof, "instructor-released")
    # the service is the formgrader and nothing else: its front door leads there, JupyterLab is not served
    prof.goto(f"{hub.url}/services/{COURSE}/")
    prof.locator("text=Manage Assignments").first.wait_for()
    assert prof.goto(f"{hub.url}/services/{COURSE}/lab").status == 404
    shot(prof, "instructor-formgrader-only")

    # students: fetch in the Assignments tab, type the answer, validate, submit
    pages = {}
    cell_source = class_cell(release_notebook()).source
    for user, answer in ANSWERS.items():
        page = login(browser, hub, user)
        seconds = open_lab(page, hub, user)
        timings.setdefault("first_jupyterlab_load_seconds", seconds)
        shot(page, f"{user}-jupyterlab")
        panel = assignments_tab(page)
        panel.get_by_role("button", name="Fetch").click()
        panel.get_by_role("button", name="Submit").wait_for()
        shot(page, f"{user}-fetched")

        page.goto(f"{hub.url}/user/{user}/lab/tree/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
        cell = page.locator(".jp-Notebook .jp-Cell", has_text="class SelfAttention").first
        cell.scroll_into_view_if_needed()
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(with_methods(cell_source, answer))
        page.keyboard.press("Control+s")
        page.locator(".jp-Notebook").first.click()
        shot(page, f"{user}-answered")
        page.get_by_role("button", name=re.compile("Validate")).first.click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=180_000)
        dialog.locator(".jp-Dialog-content").wait_for()
        shot(page, f"{user}-validated")
        page.keyboard.press("Escape")

        panel = assignments_tab(page)
        panel.get_by_role("button", name="Submit").first.click()
        panel.locator("text=/\\d{4}-\\d{2}-\\d{2}/").first.wait_for()
        shot(page, f"{user}-submitted")
        pages[user] = page

    # protections seen from a student's browser
    s1 = pages["student1"]
    for url in (f"{hub.url}/services/{COURSE}/formgrader", f"{hub.url}/user/student2/lab"):
        response = s1.goto(url)
        assert response.status == 403, (url, response.status)
        shot(s1, "student1-403")

    # TA: collect, autograde, generate and release feedback in the formgrader
    ta = login(browser, hub, "ta")
    formgrader_click(ta, hub, "collect")
    ta.goto(f"{hub.url}/services/{COURSE}/formgrader/manage_submissions/{ASSIGNMENT}")
    for user in ANSWERS:
        row = ta.locator(f"tr:has-text('{user}')")
        row.locator("td.autograde a").click()
        said = close_modal(ta)
        assert "Successfully autograded" in said, said
    shot(ta, "ta-autograded")
    formgrader_click(ta, hub, "generate-feedback")
    formgrader_click(ta, hub, "release-feedback")
    shot(ta, "ta-feedback-released")

    # students: fetch feedback and read their own score, and only their own
    scores = {}
    for user, page in pages.items():
        page.goto(f"{hub.url}/user/{user}/lab")
        panel = assignments_tab(page)
        panel.get_by_role("button", name=re.compile("Fetch Feedback")).first.click()
        panel.locator("text=view feedback").first.wait_for()
        shot(page, f"{user}-feedback-fetched")
        listing = page.request.get(f"{hub.url}/user/{user}/api/contents/{ASSIGNMENT}/feedback").json()
        (stamp,) = [e["name"] for e in listing["content"]]
        feedback_url = f"{hub.url}/user/{user}/files/{ASSIGNMENT}/feedback/{stamp}/{ASSIGNMENT}.html"
        page.goto(feedback_url)
        text = page.locator("body").inner_text()
        got, out_of = map(float, re.search(r"Score:\s*([0-9.]+)\s*/\s*([0-9.]+)", text).groups())
        scores[user] = (got, out_of, feedback_url)
        shot(page, f"{user}-feedback")
    assert scores["student1"][0] == scores["student1"][1] > 0, scores
    assert scores["student2"][0] < scores["student2"][1], scores
    other = pages["student1"].goto(scores["student2"][2])
    assert other.status == 403
    shot(pages["student1"], "student1-403-on-student2-feedback")

    for name, value in timings.items():
        record_property(name, round(value, 1))
    print("timings:", {k: round(v, 1) for k, v in timings.items()})
