"""A student's notebook that attacks whoever reads it, opened for real.

A student submits a notebook whose markdown, raw cells, outputs and cell metadata
carry script in every form we know (event handlers, <script>, SVG, iframes,
javascript: links, CSS imports, beacons). The TA collects and autogrades it, then
opens it in the formgrader in Debian's chromium; the student's feedback page is
opened too. Every payload would call a listener on 127.0.0.1 or set a flag in the
page: none may. The payloads' visible text must still be shown (as text).
"""

from __future__ import annotations

import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest

from grader_tests.self_attention.answers import release_notebook
from hub_helpers import COURSE

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.hub,
    pytest.mark.root,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"),
]

ASSIGNMENT = "self_attention"
STUDENT = "student2"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
MARKER = "HOSTILE-MARKDOWN-IS-SHOWN-AS-TEXT"


class Listener:
    """Counts every request any payload manages to send (scripts, beacons, CSS)."""

    def __init__(self):
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def payloads(sink: str) -> list[tuple[str, str, dict]]:
    """(cell type, source, metadata) of the attacks."""
    run = lambda tag: f"window.__pwned='{tag}';fetch('{sink}/{tag}')"  # noqa: E731
    markdown = [
        f"{MARKER}\n\n<img src=x onerror=\"{run('img-onerror')}\">",
        f"<script>{run('script-tag')}</script>",
        f"<svg onload=\"{run('svg-onload')}\"><circle r=4 /></svg>",
        f"<iframe srcdoc=\"<script>parent.{run('iframe')}</script>\"></iframe>",
        f"<details open ontoggle=\"{run('details')}\"><summary>s</summary></details>",
        f"<style>@import url({sink}/css-import);</style><p style=\"background:url({sink}/css-url)\">styled</p>",
        f"<img src=\"{sink}/beacon.png\">",
        f"[a link](javascript:{run('js-link')})",
        f"<a href=\"data:text/html,<script>{run('data-link')}</script>\">data link</a>",
        f"<form action=\"{sink}/form\"><button>go</button></form><object data=\"{sink}/object\"></object>",
    ]
    cells = [("markdown", source, {}) for source in markdown]
    cells.append(("raw", f"<img src=x onerror=\"{run('raw-cell')}\">", {"format": "text/html"}))
    cells.append(("code", f"print('<script>{run('printed')}</script>')", {}))
    # a cell claiming to be a graded answer whose id is markup (ids land in attributes)
    cells.append(("markdown", "claims to be graded", {"nbgrader": {
        "grade": False, "solution": True, "locked": False, "schema_version": 3,
        "grade_id": f"\"><img src=x onerror=\"{run('grade-id')}\">"}}))
    return cells


def hostile_notebook(sink: str) -> nbformat.NotebookNode:
    nb = release_notebook()
    for kind, source, metadata in payloads(sink):
        make = {"markdown": nbformat.v4.new_markdown_cell, "raw": nbformat.v4.new_raw_cell,
                "code": nbformat.v4.new_code_cell}[kind]
        nb.cells.insert(1, make(source, metadata=metadata))
    return nb


@pytest.fixture(scope="module")
def graded_hostile_submission(security_hub):
    listener = Listener()
    student = security_hub.session(STUDENT)
    student.spawn()
    assert student.assignment_action("fetch", ASSIGNMENT)["success"]
    student.save_notebook(f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb", hostile_notebook(listener.url))
    assert student.assignment_action("submit", ASSIGNMENT)["success"]
    ta = security_hub.session("ta")
    assert ta.formgrader("POST", f"assignment/{ASSIGNMENT}/collect").json()["success"]
    graded = ta.formgrader("POST", f"submission/{ASSIGNMENT}/{STUDENT}/autograde").json()
    assert graded["success"], graded
    rows = ta.formgrader("GET", f"submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}").json()
    (submission_id,) = [row["id"] for row in rows if row["student"] == STUDENT]
    feedback = ta.formgrader("POST", f"assignment/{ASSIGNMENT}/{STUDENT}/generate_feedback").json()
    assert feedback["success"], feedback
    return listener, submission_id


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


def login(browser, hub, user: str):
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(60_000)
    page.goto(hub.url + "/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", hub.passwords[user])
    page.locator("input[name=password]").press("Enter")
    page.wait_for_url(re.compile(r".*/(hub/|user/).*"))
    return page


def assert_nothing_ran(page, listener: Listener) -> None:
    page.wait_for_timeout(2000)  # give timers, lazy loads and CSS imports their chance
    assert page.evaluate("() => window.__pwned === undefined"), page.evaluate("() => window.__pwned")
    assert listener.hits == [], listener.hits


def test_the_ta_opens_a_hostile_submission_and_no_script_runs(security_hub, graded_hostile_submission, browser):
    listener, submission_id = graded_hostile_submission
    page = login(browser, security_hub, "ta")
    violations = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None)
    response = page.goto(f"{security_hub.url}/services/{COURSE}/formgrader/submissions/{submission_id}/")
    assert response.status == 200
    page.locator(f"text={MARKER}").first.wait_for()  # the student's markdown is there, as text
    assert_nothing_ran(page, listener)
    # the formgrader's own scripts did run (they carry the page's nonce)
    assert page.evaluate("() => typeof window.jQuery") == "function"


def test_the_feedback_page_runs_no_script_either(security_hub, graded_hostile_submission, browser):
    listener, _ = graded_hostile_submission
    (html,) = (security_hub.state / "course" / "feedback" / STUDENT / ASSIGNMENT).glob(f"{ASSIGNMENT}.html")
    text = html.read_text()
    assert 'http-equiv="Content-Security-Policy"' in text
    assert "onerror" not in text.replace("&quot;", '"').split(MARKER, 1)[1].split("<pre", 1)[0]
    page = browser.new_context().new_page()
    copy = Path(os.environ.get("TMPDIR", "/tmp")) / f"hostile-feedback-{os.getpid()}.html"
    copy.write_text(text)
    try:
        page.goto(copy.as_uri())
        page.locator(f"text={MARKER}").first.wait_for()
        assert_nothing_ran(page, listener)
    finally:
        copy.unlink()
