"""What a student does in their Lab, in chromium, on a real hub with feedback on submit switched on
(full feedback, any number of attempts, the last counts):

* a feedback page opens from the panel rendered, and its links to the other notebooks open their pages;
* a Validate button in the Assignments list validates the notebook (the course's Validate dialog), and
  shows the public checks' verdicts (rows not summing to one fail the softmax check), never a hidden one;
* an unchanged resubmission says that nothing new was filed, and adds no row to the list;
* an edit not yet saved is saved by Submit: the submitted file holds it;
* "Fetch Feedback" with no feedback released (the second assignment, without feedback on submit) says so;
* the Assignments list's submission times are in the student's zone, in the panel's one format;
* each student's deadline beside the assignment, before it, with an extension an instructor grants on the
  formgrader's Extensions page, and after it under "penalty", "closed" and "late days" (one used, then
  more than the budget, and a late submission in the TA's Deadline column); a TA refused that page;
* under a cooldown set in the instructor's policy form, a submit is graded, Submit is then off with a
  title saying until when, and a submit from a page that had not heard of the cooldown is refused in the
  course's dialog with the next time in the student's zone.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from accessibility import assert_accessible

from grader_tests.self_attention.answers import release_notebook
from grader_tests.self_attention.answers import ASSIGNMENT, BUGGY, class_cell, with_methods
from hub_helpers import COURSE, launch_hub

pytestmark = [
    pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
    pytest.mark.browser,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users and the sandbox broker need root (CI is root)"),
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"),
]

POLICY = {ASSIGNMENT: {"feedback": "full", "attempts": None, "counts": "last"}}
NO_SCALE = next(a for a in BUGGY if a.name == "no_scale")
SECOND = "multi_head_attention"  # released beside the first, without feedback on submit
WAIT = 300  # s: how long a test waits for the grader on a 2-core machine shared with others (never asserted)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def hub():
    env = {"ATTENTION_FEEDBACK_ON_SUBMIT": json.dumps(POLICY), "HUB_DEMO_STUDENTS": "3"}
    with launch_hub("student-lab-browser-hub", env=env) as running:
        yield running


@pytest.fixture(scope="module")
def students(hub):
    sessions = {}
    for user in ("student1", "student2"):
        sessions[user] = hub.session(user)
        sessions[user].spawn()
        fetched = sessions[user].assignment_action("fetch", ASSIGNMENT)
        assert fetched["success"], fetched
    return sessions


@pytest.fixture
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        try:
            context = chromium.new_context(viewport={"width": 1400, "height": 1000})
            context.set_default_timeout(120_000)
            yield context
        finally:
            chromium.close()


def open_lab(context, hub, user: str, path: str = ""):
    page = context.new_page()
    page.goto(hub.url + "/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", hub.passwords[user])
    page.locator("input[name=password]").press("Enter")
    page.goto(f"{hub.url}/user/{user}/lab" + (f"/tree/{path}" if path else ""))
    page.locator(".jp-LabShell").wait_for()
    return page


def assignments_tab(page):
    if not page.locator("#nbgrader-assignment-list").is_visible():
        page.locator(".lm-MenuBar-item", has_text="Course").click()
        page.locator(".lm-Menu-item", has_text="Your assignments").first.click()
    listing = page.locator("#nbgrader-assignment-list")
    listing.get_by_role("button", name="Submit").first.wait_for()
    return listing


def answer(session, code: str) -> None:
    path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    nb = session.contents(path).json()["content"]
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "self_attention_class":
            cell["source"] = with_methods(class_cell(release_notebook()).source, code)
    session.save_notebook(path, nb)


def status(session) -> dict:
    reply = session.get(f"/user/{session.username}/attention/feedback-on-submit")
    assert reply.status_code == 200, reply.text
    return reply.json()["assignments"].get(ASSIGNMENT) or {"attempts": []}


def wait_for_pages(session) -> dict:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        attempts = status(session)["attempts"]
        if attempts and attempts[-1]["state"] in ("graded", "error") and attempts[-1].get("pages"):
            return attempts[-1]
        time.sleep(0.3)
    raise AssertionError(f"{session.username}'s attempt was not graded with its pages: {status(session)}")


def submissions(session) -> list[str]:
    """The times of the submissions the student's Assignments list shows."""
    return [s["timestamp"] for a in session.assignments() if a["assignment_id"] == ASSIGNMENT
            and a["status"] == "submitted" for s in a["submissions"]]


def newest_inbound(hub, user: str) -> Path:
    found = [p for p in (hub.state / "exchange" / COURSE / "inbound").rglob(f"{user}+{ASSIGNMENT}+*") if p.is_dir()]
    assert found, f"no submission of {user} in the inbound"
    return max(found, key=lambda p: p.name.split("+")[2])


def test_a_feedback_page_opens_rendered_and_links_to_the_other_notebooks(hub, students, browser):
    s1 = students["student1"]
    answer(s1, NO_SCALE.code)
    assert s1.assignment_action("submit", ASSIGNMENT)["success"]
    attempt = wait_for_pages(s1)
    others = sorted(set(attempt["pages"]) - {ASSIGNMENT})
    assert others, attempt["pages"]
    page = open_lab(browser, hub, "student1")
    assignments_tab(page)
    link = page.locator("#feedback_on_submit_panel .fos-pages a", has_text=ASSIGNMENT).first
    with browser.expect_page() as opened:
        link.click()
    feedback = opened.value
    feedback.wait_for_load_state()
    # rendered as a page (served as JSON it shows its source as text: no heading at all)
    assert feedback.locator("h1").first.inner_text() == f"Feedback on {ASSIGNMENT}.ipynb"
    assert "scores must be divided by √D" in feedback.locator("body").inner_text()
    other = feedback.locator("#notebook-scores a", has_text=others[0])
    with feedback.expect_navigation() as went:
        other.click()
    assert went.value is not None and went.value.status == 200, went.value and went.value.status
    assert feedback.locator("h1").first.inner_text() == f"Feedback on {others[0]}.ipynb"


def test_a_validate_button_in_the_assignments_list_validates(hub, students, browser):
    page = open_lab(browser, hub, "student1")
    listing = assignments_tab(page)
    listing.locator(".assignment-notebooks-link", has_text=ASSIGNMENT).first.click()
    row = listing.locator(".nested_list_item", has=page.locator(".item_name a", has_text=re.compile(f"^{ASSIGNMENT}$")))
    row.get_by_role("button", name="Validate").click()
    dialog = page.locator(".jp-Dialog .attention-validate")
    dialog.wait_for(timeout=WAIT * 1000)
    assert page.locator(".jp-Dialog-header").inner_text() == f"Validate: {ASSIGNMENT}.ipynb"
    assert "Error validating" not in listing.inner_text()


def test_validate_shows_the_public_checks_and_never_a_hidden_one(hub, students, browser):
    """A layer without a softmax prints weights whose rows visibly do not sum to 1: Validate, pressed in the
    Assignments list, shows the public softmax check failing with its catalogue message and the public
    shapes check passing; no hidden check's title appears."""
    from grader_tests.registry import ALL_CHECKS, CHECKS

    answer(students["student1"], next(a for a in BUGGY if a.name == "no_softmax").code)
    page = open_lab(browser, hub, "student1")
    listing = assignments_tab(page)
    listing.locator(".assignment-notebooks-link", has_text=ASSIGNMENT).first.click()
    row = listing.locator(".nested_list_item", has=page.locator(".item_name a", has_text=re.compile(f"^{ASSIGNMENT}$")))
    row.get_by_role("button", name="Validate").click()
    checks = page.locator(".jp-Dialog .attention-validate ul.attention-validate-checks")
    checks.wait_for(timeout=WAIT * 1000)
    failing = checks.locator("li[data-passed=false]").all_inner_texts()
    passing = checks.locator("li[data-passed=true]").all_inner_texts()
    assert len(failing) == 1 and CHECKS["softmax_dim"].title in failing[0], failing
    assert "softmax" in failing[0].split(CHECKS["softmax_dim"].title, 1)[1], failing  # what to fix, after the title
    assert len(passing) == 1 and CHECKS["shapes"].title in passing[0], passing
    said = page.locator(".jp-Dialog").inner_text()
    assert not [c.title for c in ALL_CHECKS if not c.definition.public and c.title in said], said


def test_an_unchanged_resubmission_says_nothing_new_was_filed(hub, students, browser):
    s2 = students["student2"]
    answer(s2, NO_SCALE.code)
    assert s2.assignment_action("submit", ASSIGNMENT)["success"]
    before = submissions(s2)
    page = open_lab(browser, hub, "student2")
    assignments_tab(page).get_by_role("button", name="Submit").first.click()
    note = page.locator(".jp-toast-message", has_text="Nothing new was filed").first
    note.wait_for(timeout=WAIT * 1000)
    # the newest submission's time, in the browser's zone and the Lab's one format for times
    shown = page.evaluate("""stamp => new Intl.DateTimeFormat(undefined, {day: 'numeric', month: 'short',
        hour: '2-digit', minute: '2-digit', timeZoneName: 'short'}).format(new Date(stamp.replace(' UTC', 'Z')
        .replace(' ', 'T')))""", before[-1])
    assert shown in note.inner_text(), (shown, note.inner_text())
    assert page.locator(".jp-toast-message", has_text="within seconds").count() == 0
    assert submissions(s2) == before  # no new row for a submission that was not filed


def test_an_unsaved_edit_is_saved_before_the_submit(hub, students, browser):
    marker = "# an edit made just before submitting"
    page = open_lab(browser, hub, "student2", f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
    page.locator(".jp-NotebookPanel .jp-Cell").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # a new cell below, then type into it
    page.keyboard.press("Enter")
    page.keyboard.type(marker)
    page.keyboard.press("Escape")
    page.locator(".jp-NotebookPanel .jp-mod-dirty, .jp-DocumentWidget.jp-mod-dirty, .lm-TabBar-tab.jp-mod-dirty").first.wait_for()
    known = len(status(students["student2"])["attempts"])
    assignments_tab(page).get_by_role("button", name="Submit").first.click()
    page.locator(".jp-toast-message", has_text="Submitted").first.wait_for(timeout=WAIT * 1000)
    submitted = (newest_inbound(hub, "student2") / f"{ASSIGNMENT}.ipynb").read_text()
    assert marker in submitted
    # the panel follows the new attempt until it is graded
    page.locator(f"#feedback_on_submit_panel li.fos-attempt:nth-last-child({known + 1})[data-state=graded]").wait_for(
        timeout=WAIT * 1000)


def submitted_once(session) -> list[str]:
    """The student's submission times, after handing in one if there was none."""
    if not submissions(session):
        answer(session, NO_SCALE.code)
        assert session.assignment_action("submit", ASSIGNMENT)["success"]
    return submissions(session)


ZONE = "Asia/Kolkata"  # UTC+5:30: a time left in UTC, or in the machine's zone, cannot pass for it


def in_zone(stamp: str) -> str:
    """``HH:MM`` of an ISO time or nbgrader's "2026-01-31 10:32:11.123456 UTC", as a browser in ZONE shows it."""
    at = dt.datetime.fromisoformat(stamp.replace(" UTC", "+00:00").replace("Z", "+00:00"))
    return at.astimezone(ZoneInfo(ZONE)).strftime("%H:%M")


def submit_button(page, listing):
    """nbgrader's Submit of the assignment (found again at each use: nbgrader draws its list anew at will)."""
    return listing.locator("#fetched_assignments_list .list_item",
                           has=page.locator(".item_name", has_text=ASSIGNMENT)).locator(".item_status button", has_text="Submit")


def zoned_lab(browser, hub, user: str):
    """``user``'s Lab with the Assignments tab showing, in a browser set to ZONE."""
    page = hub.browser_page(browser.browser, user, timezone_id=ZONE, locale="en-GB")
    page.context.set_default_timeout(120_000)
    page.goto(f"{hub.url}/user/{user}/lab")
    page.locator(".jp-LabShell").wait_for()
    return page, assignments_tab(page)


def test_fetch_feedback_with_nothing_to_fetch_says_so(hub, students, browser):
    """The second assignment has no feedback on submit: its submission has no feedback until the staff
    release some. (The first one's graded attempts bring their feedback pages to fetch.)"""
    s1 = students["student1"]
    if not [a for a in s1.assignments() if a["assignment_id"] == SECOND and a["status"] == "submitted"]:
        assert s1.assignment_action("fetch", SECOND)["success"]
        assert s1.assignment_action("submit", SECOND)["success"]
    page = open_lab(browser, hub, "student1")
    listing = assignments_tab(page)
    listing.locator("#submitted_assignments_list .list_item", has=page.locator(".item_name", has_text=SECOND)
                    ).get_by_role("button", name="Fetch Feedback").click()
    note = page.locator(".jp-toast-message", has_text=re.compile("feedback", re.I)).first
    note.wait_for(timeout=WAIT * 1000)
    said = note.inner_text()
    assert said.startswith(f"No feedback to fetch for “{SECOND}” yet") and "released" in said, said
    # nbgrader answers with the whole list: the other assignment, not asked about, is not spoken of
    told = page.locator(".jp-toast-message").all_inner_texts()
    assert not [t for t in told if ASSIGNMENT in t], told


def test_the_assignments_list_shows_submission_times_in_the_students_zone(hub, students, browser):
    stamps = submitted_once(students["student1"])
    page, listing = zoned_lab(browser, hub, "student1")
    container = re.sub(r"[^A-Za-z0-9_-]", "", f"nbgrader-{COURSE}-{ASSIGNMENT}-submissions".replace(" ", "_"))
    rows = listing.locator(f"[id='{container}'] .nested_list_item .item_name")  # nbgrader's id for its submissions
    rows.first.wait_for()
    page.wait_for_function("() => ![...document.querySelectorAll("
                           "'#submitted_assignments_list .nested_list_item .item_name')].some(r => /UTC/.test(r.textContent))",
                           timeout=10_000)
    shown = rows.all_inner_texts()
    assert len(shown) == len(stamps), (shown, stamps)
    for stamp, text in zip(stamps, shown):
        iso = stamp.replace(" UTC", "").replace(" ", "T") + "+00:00"
        assert in_zone(stamp) in text and "UTC" not in text, (stamp, text)
        assert text.startswith(page.evaluate(LAB_CLOCK, iso)), (iso, text)  # the panel's one format


# --------------------------------------------------------------------------- deadlines
# Last in this file: they move the assignment's due date and late policy, and put both back at the end.

FORMGRADER = f"/services/{COURSE}/formgrader"
LAB_CLOCK = """iso => new Intl.DateTimeFormat(undefined, {day: 'numeric', month: 'short', hour: '2-digit',
    minute: '2-digit', timeZoneName: 'short'}).format(new Date(iso))"""


def set_due(instructor, due) -> None:
    """The gradebook's due date, through nbgrader's own API (Manage Assignments' edit); None: no due date."""
    body = {} if due is None else {"duedate_notimezone": due.strftime("%Y-%m-%d %H:%M:%S"), "duedate_timezone": "UTC"}
    reply = instructor.formgrader("PUT", f"assignment/{ASSIGNMENT}", json=body)
    assert reply.status_code == 200, reply.text


def set_late_policy(instructor, **fields) -> None:
    """The late policy's form on the policy page, as an instructor posts it (the students' files follow)."""
    action = "late-reset" if not fields else "late-save"
    reply = instructor.post(f"{FORMGRADER}/policy/{ASSIGNMENT}", data={"action": action, **fields},
                            allow_redirects=False)
    assert reply.status_code == 303, reply.text


def deadline_line(page):
    row = page.locator("#fetched_assignments_list .list_item", has=page.locator(".item_name", has_text=ASSIGNMENT))
    return row.locator(".attention-deadline")


# A student who handed in earlier in this file: the deadline line goes on about that submission
EARLIER_SUBMISSION = r"(?: Your submission, received [^.]+\.)?"


def lab_time(page, when) -> str:
    return page.evaluate(LAB_CLOCK, when.astimezone(dt.timezone.utc).isoformat())


def test_the_deadline_beside_the_assignment_before_with_an_extension_and_after(hub, students, browser):
    """Each student's deadline in their Assignments tab, in their own zone and on the server's clock:
    before it (the time left and the policy), with an extension an instructor grants on the Extensions
    page (the change log keeps who and why), and after it under "penalty" (what a submission now costs)
    and under "closed", and under "late days" (the days a submission now uses and those left, then closed
    when more are needed than are left; a submission then shows in the TA's Manage Submissions as late by
    how much and the late day it uses); a TA is refused the Extensions page, which the course has not allowed them."""
    instructor, chromium = hub.session("instructor"), browser.browser
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    try:
        # before the deadline: the time left, then the policy in the grader's words
        due = now + dt.timedelta(hours=50)
        set_due(instructor, due)
        set_late_policy(instructor, kind="penalty", penalty_percent="10", per="hour", max_penalty_percent="50",
                        cutoff_hours="24")
        student1 = hub.browser_page(chromium, "student1")
        student1.goto(f"{hub.url}/user/student1/lab")
        student1.locator(".jp-LabShell").wait_for()
        assignments_tab(student1)
        line = deadline_line(student1)
        line.filter(has_text=f"Due {lab_time(student1, due)}: 2 days").wait_for()
        assert line.get_attribute("data-state") == "open"
        assert re.search(r": 2 days [12] h left\. Late submissions are accepted until 24 hours after the deadline, "
                         r"with 10% of the score taken for each hour begun \(at most 50%\)\. For you that is until "
                         + re.escape(lab_time(student1, due + dt.timedelta(hours=24))) + r"\.", line.inner_text()), \
            line.inner_text()

        # after it, under "penalty": late by 2 h 30 min, three hours begun
        due = now - dt.timedelta(hours=2, minutes=30)
        set_due(instructor, due)
        set_late_policy(instructor, kind="penalty", penalty_percent="10", per="hour", max_penalty_percent="50",
                        cutoff_hours="24")
        line.filter(has_text="The deadline passed").wait_for()
        assert line.get_attribute("data-state") == "late"
        said = line.inner_text()
        assert re.search(r"The deadline passed 2 h 3\d min ago \(" + re.escape(lab_time(student1, due)) +
                         r"\)\. A submission now is late: 30% of its score is taken \(10% for each hour begun, at most "
                         r"50%\)\. Late submissions count until " + re.escape(lab_time(student1, due + dt.timedelta(hours=24)))
                         + r" \(21 h [0-9]{2} min left\)\.", said), said

        # an instructor grants student2 26 more hours on the Extensions page; student2 sees them
        page = hub.browser_page(chromium, "instructor", bypass_csp=True)  # axe's script is not one of the page's
        page.goto(f"{hub.url}{FORMGRADER}/extensions")
        page.locator("table.attention-extensions-index a", has_text=ASSIGNMENT).click()
        page.wait_for_url(f"**/formgrader/extensions/{ASSIGNMENT}")
        assert "The class's deadline: " + due.strftime("%Y-%m-%d %H:%M UTC") in page.locator("#extensions-class-due").inner_text()
        page.get_by_label("Student", exact=True).fill("student2")
        page.get_by_label("Extra hours").fill("26")
        page.get_by_label("Reason, kept for the record").fill("a documented illness")
        page.get_by_role("button", name="Grant the extension").click()
        page.locator("#extensions-done", has_text="Granted").wait_for()
        extended = due + dt.timedelta(hours=26)
        row = page.locator("table.attention-extensions tr[data-student=student2]")
        assert extended.strftime("%Y-%m-%d %H:%M UTC") in row.inner_text() and "a documented illness" in row.inner_text()
        log = page.locator("table.attention-extensions-log tbody tr").first.inner_text()
        assert "instructor" in log and "student2" in log and "granted until" in log and "a documented illness" in log
        assert_accessible(page)
        page.context.close()

        student2 = hub.browser_page(chromium, "student2", bypass_csp=True)
        student2.goto(f"{hub.url}/user/student2/lab")
        student2.locator(".jp-LabShell").wait_for()
        assignments_tab(student2)
        mine = deadline_line(student2)
        mine.filter(has_text="with your extension").wait_for()
        assert mine.inner_text().startswith(f"Due {lab_time(student2, extended)} with your extension (the deadline for "
                                            f"the class: {lab_time(student2, due)}): 23 h "), mine.inner_text()
        assert "documented illness" not in mine.inner_text()  # the reason is the staff's record
        assert_accessible(student2, {"include": [["#nbgrader-assignment-list"]]})

        # under "closed": closed for student1, still open for student2 with the extension
        set_late_policy(instructor, kind="closed")
        line.filter(has_text="This assignment is closed to you").wait_for()
        assert line.get_attribute("data-state") == "closed"
        # student1 may have handed in earlier in this file: the line then goes on about that submission
        said = line.inner_text()
        assert "This assignment is closed to you: a submission now would not count, so Submit is off." in said, said
        submit = student1.locator("#fetched_assignments_list .list_item", has=student1.locator(
            ".item_name", has_text=ASSIGNMENT)).get_by_role("button", name="Submit")
        assert submit.is_disabled() and "closed to you" in submit.get_attribute("title")
        mine.filter(has_text="Submissions after the deadline are not accepted.").wait_for()
        assert mine.get_attribute("data-state") == "open"

        # under "late days", a budget of 2 for the course: 2 h 30 min late uses one, one is left
        set_late_policy(instructor, kind="late_days", late_days_budget="2")
        line.filter(has_text="late day").wait_for()
        assert line.get_attribute("data-state") == "late"
        said = line.inner_text()
        assert re.fullmatch(r"The deadline passed 2 h 3\d min ago \(" + re.escape(lab_time(student1, due)) +
                            r"\)\. A submission now uses 1 late day, without penalty: you would have 1 late day left\."
                            + EARLIER_SUBMISSION,
                            said), said
        student1.locator("#fetched_assignments_list .list_item", has=student1.locator(".item_name", has_text=ASSIGNMENT)
                         ).locator(".item_status button:enabled", has_text="Submit").wait_for()  # on again
        # 50 h late needs three late days of the two: closed to student1, Submit off
        due = now - dt.timedelta(hours=50)
        set_due(instructor, due)
        set_late_policy(instructor, kind="late_days", late_days_budget="2")
        line.filter(has_text="ask your instructor for an extension").wait_for()
        assert line.get_attribute("data-state") == "closed"
        said = line.inner_text()
        assert re.fullmatch(r"The deadline passed 2 days [12] h ago \(" + re.escape(lab_time(student1, due)) +
                            r"\)\. You have 2 late days left for this assignment, enough for work handed in up to 2 "
                            r"days after its deadline; later work is not accepted\. If you need more time, ask your "
                            r"instructor for an extension\. Submit is off\." + EARLIER_SUBMISSION, said), said
        assert submit.is_disabled() and "closed to you" in submit.get_attribute("title")

        # back to 2 h 30 min late: student1 submits, which uses one of their late days
        due = now - dt.timedelta(hours=2, minutes=30)
        set_due(instructor, due)
        set_late_policy(instructor, kind="late_days", late_days_budget="2")
        line.filter(has_text="A submission now uses 1 late day").wait_for()
        student1.locator("#fetched_assignments_list .list_item", has=student1.locator(".item_name", has_text=ASSIGNMENT)
                         ).locator(".item_status button:enabled", has_text="Submit").click()
        student1.locator(".jp-toast-message", has_text="Submitted").first.wait_for(timeout=WAIT * 1000)
        wait_for_pages(students["student1"])
        line.filter(has_text="it uses 1 late day, without penalty.").wait_for()

        # a TA: the submission late in Manage Submissions' Deadline column; no Extensions link, and the page
        # refused on the server
        ta = hub.browser_page(chromium, "ta")
        ta.goto(f"{hub.url}{FORMGRADER}/manage_submissions/{ASSIGNMENT}")
        deadline_cell = ta.locator("#main-table tr", has_text="student1").locator("td.attention-deadline")
        deadline_cell.filter(has_text="late by").wait_for()
        assert deadline_cell.get_attribute("data-state") == "late"
        assert re.fullmatch(r"late by 2 h \d+ min: 1 late day; late days used in the course: 1",
                            deadline_cell.inner_text()), deadline_cell.inner_text()
        reply = ta.goto(f"{hub.url}{FORMGRADER}/extensions/{ASSIGNMENT}")
        assert reply.status == 403 and "instructors only" in ta.locator("body").inner_text()
        ta.goto(f"{hub.url}{FORMGRADER}/manage_assignments")
        ta.locator("a.attention-reports").first.wait_for()
        assert ta.locator("a.attention-extensions").count() == 0
        ta.context.close()
    finally:
        set_due(instructor, None)
        set_late_policy(instructor)


# --------------------------------------------------------------------------- the cooldown
# After the deadlines: it sets a cooldown in the feedback-on-submit policy, and puts the policy back at the end.

COOLDOWN = {"feedback": "full", "attempts": "", "window_hours": "24", "cooldown_minutes": "10", "counts": "last"}


def test_under_a_cooldown_submit_is_off_and_a_refused_submit_says_until_when(hub, students, browser):
    instructor = hub.session("instructor")
    saved = instructor.post(f"{FORMGRADER}/policy/{ASSIGNMENT}", data=COOLDOWN, allow_redirects=False)
    assert saved.status_code == 303, saved.text[-2000:]
    try:
        cooldown_walk(hub, browser)
    finally:
        reset = instructor.post(f"{FORMGRADER}/policy/{ASSIGNMENT}", data={"action": "reset"}, allow_redirects=False)
        assert reset.status_code == 303, reset.text[-2000:]


def cooldown_walk(hub, browser) -> None:
    s3 = hub.session("student3")  # no attempt yet: the first is graded at once
    s3.spawn()
    assert s3.assignment_action("fetch", ASSIGNMENT)["success"]
    deadline = time.monotonic() + WAIT
    while status(s3).get("policy", {}).get("cooldown_minutes") != 10:
        assert time.monotonic() < deadline, f"the grader did not take up the cooldown: {status(s3)}"
        time.sleep(0.3)
    answer(s3, NO_SCALE.code)
    page, listing = zoned_lab(browser, hub, "student3")
    submit_button(page, listing).click()
    page.locator(".jp-toast-message", has_text="Submitted").first.wait_for(timeout=WAIT * 1000)
    # the panel shows the attempt; Submit is off until the cooldown ends, and its title says when
    page.locator("#feedback_on_submit_panel li.fos-attempt").first.wait_for(timeout=WAIT * 1000)
    locked = listing.locator("#fetched_assignments_list button[data-attention-locked=true]", has_text="Submit")
    locked.wait_for(timeout=WAIT * 1000)
    assert locked.is_disabled()
    next_at = status(s3)["next_graded_attempt"]
    assert next_at, status(s3)
    title = locked.get_attribute("title")
    assert in_zone(next_at) in title and "UTC" not in title, (next_at, title)
    assert in_zone(next_at) in page.locator("#feedback_on_submit_panel .fos-next").inner_text()

    # a page that had not heard of the cooldown submits a changed notebook: refused in the course's dialog
    answer(s3, next(a for a in BUGGY if a.name == "no_softmax").code)
    inbound = hub.state / "exchange" / COURSE / "inbound" / "student3"
    handed_in = sorted(p.name for p in inbound.iterdir() if not p.name.startswith("."))
    locked.evaluate("button => { button.disabled = false; button.click(); }")
    dialog = page.locator(".jp-Dialog .attention-refusal")
    dialog.wait_for(timeout=WAIT * 1000)
    assert page.locator(".jp-Dialog-header").inner_text() == f"Not submitted: “{ASSIGNMENT}”"
    said = dialog.inner_text()
    assert "Graded attempts must be at least 10 minutes apart." in said, said
    assert "Your next graded attempt is possible at" in said and in_zone(next_at) in said and "UTC" not in said, said
    assert page.locator(".nbgrader-ErrorDialog").count() == 0
    page.locator(".jp-Dialog").get_by_role("button", name="OK").click()
    locked.wait_for()
    assert locked.is_disabled()
    assert sorted(p.name for p in inbound.iterdir() if not p.name.startswith(".")) == handed_in  # nothing handed in
