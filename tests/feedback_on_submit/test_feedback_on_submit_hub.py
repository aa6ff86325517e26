"""Feedback on submit on the real hub (the README's `make start`): real servers, nbgrader's submit,
the grader account's feedback-on-submit grader, the sandbox broker, the formgrader and chromium.

One hub, students student1..student5, started with the policy "full feedback, 2 graded attempts per
24 hours, the best counts"; later tests change the policy in the course's nbgrader_config.py, as an
instructor would, and the grader follows. In order:

* two students submit at once and each sees their own result (and only theirs); a status request
  held by the student's server is answered when the grader writes the attempt;
* what they were shown equals the batch grader's grades of the same notebooks, and the course's
  gradebook (the attempt that counts) and the TA's own autograde agree with it;
* the attempt past the limit is refused at submit with the time of the next one; one handed in
  behind the submit's back is not graded, not counted, and the TA's collect keeps the one that counts;
* the formgrader shows the policy and every attempt, to the course staff only;
* a looping submission costs its owner their attempt and nobody else any time;
* a burst of 20 submits by five students is graded, all of it, in order, nothing lost;
* the Assignments tab shows the result in chromium;
* the panel reads as a student reads it: checks in the notebook's order, "not started" for a notebook
  left as released, the counting attempt unfolded, times in the student's zone, the refusal in a
  dialog and Submit off until the next graded attempt (its screenshot is the students' page's);
* under "best", a lower attempt's essay is what the TA grades, in the formgrader, and the panel says so.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import requests

from attention_platform.course.assignment_checks import as_students_see
from attention_platform.course.directory import check_scores
from grader_tests.self_attention.answers import release_notebook
from grader_tests.self_attention.answers import ASSIGNMENT, BUGGY, CORRECT, class_cell, with_methods
from hub_helpers import COURSE, REPO, launch_hub

pytestmark = [
    pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users and the sandbox broker need root (CI is root)"),
]

POLICY = {ASSIGNMENT: {"feedback": "full", "attempts": 2, "window_hours": 24, "counts": "best"}}
NO_SCALE = next(a for a in BUGGY if a.name == "no_scale")
CELL = class_cell(release_notebook()).source
WAIT = 300  # s: how long a test waits for the grader on a 2-core machine shared with others (never asserted)


@pytest.fixture(scope="module")
def hub():
    env = {"ATTENTION_FEEDBACK_ON_SUBMIT": json.dumps(POLICY), "HUB_DEMO_STUDENTS": "5",
           "NBGRADER_CELL_TIMEOUT": "15"}  # a looping cell is stopped after 15 s (the TA's autograde too)
    with launch_hub("feedback-on-submit-hub", env=env) as running:
        yield running


@pytest.fixture(scope="module")
def students(hub):
    return hub.students_with(ASSIGNMENT, 5)


def answer(session, code: str, marker: str = "") -> None:
    """Type ``code`` as the answer of the core notebook (and ``marker`` into its first cell), then save."""
    path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    nb = session.contents(path).json()["content"]
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "self_attention_class":
            cell["source"] = with_methods(CELL, code)
    if marker:
        nb["cells"][0]["source"] = nb["cells"][0]["source"].split("\n<!--")[0] + f"\n<!-- {marker} -->"
    session.save_notebook(path, nb)


def submit(session) -> dict:
    return session.assignment_action("submit", ASSIGNMENT)


def status(session) -> dict:
    reply = session.get(f"/user/{session.username}/attention/feedback-on-submit")
    assert reply.status_code == 200, reply.text
    return reply.json()["assignments"].get(ASSIGNMENT) or {"attempts": []}


def wait_for(session, done, what: str) -> dict:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        current = status(session)
        if done(current):
            return current
        time.sleep(0.2)
    raise AssertionError(f"{session.username}: {what} did not happen; status: {json.dumps(current)[:2000]}")


def graded(n: int, pages: bool = False):
    def done(current):
        attempts = current["attempts"]
        return len(attempts) >= n and attempts[n - 1]["state"] in ("graded", "error") and \
            (not pages or bool(attempts[n - 1].get("pages")))
    return done


def passed_checks(attempt: dict) -> dict:
    return {(c["notebook"], c["title"]): c["passed"] for c in attempt["checks"]}


# --------------------------------------------------------------------------- two students

def test_two_students_submit_at_once_and_each_sees_their_own_result(hub, students):
    s1, s2 = students["student1"], students["student2"]
    answer(s1, CORRECT[0].code)
    answer(s2, NO_SCALE.code)
    # student1's tab holds a status request, as the Assignments tab does: it is answered at the change
    url = "/user/student1/attention/feedback-on-submit"
    before = s1.get(url).json()["version"]
    held = {}
    waiter = threading.Thread(target=lambda: held.update(reply=requests.get(
        s1.base + f"{url}?since={before}&wait=30", cookies=s1.http.cookies.copy(), timeout=120)))
    waiter.start()
    time.sleep(0.5)  # the request is held before anything changes
    assert waiter.is_alive()
    replies = {}
    threads = [threading.Thread(target=lambda s=s: replies.__setitem__(s.username, submit(s))) for s in (s1, s2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(reply["success"] for reply in replies.values()), replies
    waiter.join()
    assert held["reply"].status_code == 200, held["reply"].text
    changed = held["reply"].json()
    assert changed["version"] != before and len(changed["assignments"][ASSIGNMENT]["attempts"]) == 1
    for query, why in (("since=nope&wait=5", "since must be the version"), (f"since={before}&wait=31", "wait must be"),
                       (f"since={before}&wait=soon", "wait must be a number")):
        refused = s1.get(f"{url}?{query}")
        assert refused.status_code == 400 and why in refused.json()["message"], (query, refused.text)
    one = wait_for(s1, graded(1, pages=True), "student1's first attempt graded with its pages")
    two = wait_for(s2, graded(1, pages=True), "student2's first attempt graded with its pages")
    a1, a2 = one["attempts"][0], two["attempts"][0]
    assert a1["state"] == a2["state"] == "graded", (a1, a2)
    core1 = {t: p for (nb, t), p in passed_checks(a1).items() if nb == ASSIGNMENT}
    core2 = {t: p for (nb, t), p in passed_checks(a2).items() if nb == ASSIGNMENT}
    assert core1 and all(core1.values()), core1  # the correct answer passes every check of the core notebook
    failed = {t for t, p in core2.items() if not p}
    assert failed == {"The scores are q·k divided by √D."}, failed  # exactly the bug's check
    assert a1["score"] > a2["score"] and a1["max_score"] == a2["max_score"] > 0
    assert a1["counted"] and a2["counted"]  # best of one

    # each status sits in its owner's feedback folder, which no other student can enter
    feedback = hub.state / "exchange" / COURSE / "feedback"
    for user in ("student1", "student2"):
        path = feedback / user / f"feedback-on-submit-{ASSIGNMENT}.json"
        info, folder = path.stat(), (feedback / user).stat()
        assert info.st_mode & 0o777 == 0o640 and info.st_gid == pwd.getpwnam(user).pw_gid
        assert folder.st_mode & 0o007 == 0 and folder.st_gid == pwd.getpwnam(user).pw_gid
    assert a2["submission"] not in json.dumps(status(s1))
    # the page is served by the student's own server, with no script allowed; another student gets nothing
    assert a2["pages"][ASSIGNMENT]
    page = f"/attention/feedback-on-submit/page/{ASSIGNMENT}/1/{ASSIGNMENT}.html"
    mine = s2.get("/user/student2" + page)
    policy = mine.headers["Content-Security-Policy"]
    assert mine.status_code == 200 and "default-src 'none'" in policy and "sandbox" in policy
    assert "script-src" not in policy and mine.headers["Content-Type"].startswith("text/html")
    assert "scores must be divided by √D" in mine.text and "BEGIN HIDDEN TESTS" not in mine.text  # message, no code
    assert s2.get(f"/user/student2/attention/feedback-on-submit/page/{ASSIGNMENT}/2/{ASSIGNMENT}.html").status_code == 404
    assert s1.get("/user/student2" + page).status_code == 403
    assert s1.get("/user/student2/attention/feedback-on-submit").status_code == 403


def test_what_the_students_saw_equals_the_batch_grader_the_gradebook_and_the_tas_autograde(hub, students, tmp_path):
    shown = {user: status(students[user])["attempts"][0] for user in ("student1", "student2")}
    # 1. the batch grader, on a copy of the course, grading the very files each attempt held
    copy = tmp_path / "course"
    course = hub.state / "course"
    shutil.copytree(course, copy, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback", "attempts"))
    for user in shown:
        archived = sorted((course / "attempts" / "archive" / user / ASSIGNMENT).iterdir(), key=lambda p: int(p.name))
        shutil.copytree(archived[0] / "submitted", copy / "submitted" / user / ASSIGNMENT)
    batch = subprocess.run([str(Path(sys.executable).parent / "attention-course"), "autograde-batch", ASSIGNMENT,
                            "--course", str(copy), "--no-progress"], capture_output=True, text=True, cwd=copy)
    assert batch.returncode == 0, batch.stdout[-2000:] + batch.stderr[-2000:]
    by_batch = check_scores(copy, notebook=None, assignment=ASSIGNMENT)

    for user, attempt in shown.items():
        score, checks = as_students_see(ASSIGNMENT, by_batch[user])
        assert checks == passed_checks(attempt), user
        assert score == attempt["score"], user
    # 2. the course's gradebook holds the attempt that counts, as shown
    in_course = check_scores(course, notebook=None, assignment=ASSIGNMENT)
    for user, attempt in shown.items():
        assert as_students_see(ASSIGNMENT, in_course[user]) == (attempt["score"], passed_checks(attempt)), user
    # 3. the TA's own autograde of that submission, from the formgrader, gives the same
    ta = hub.session("ta")
    for user, attempt in shown.items():
        reply = ta.formgrader("POST", f"submission/{ASSIGNMENT}/{user}/autograde")
        assert reply.status_code == 200 and reply.json()["success"], reply.text[-2000:]
        assert as_students_see(ASSIGNMENT, check_scores(course, notebook=None, assignment=ASSIGNMENT)[user]) == (
            attempt["score"], passed_checks(attempt)), user


# --------------------------------------------------------------------------- the policy

def test_the_attempt_past_the_limit_is_refused_with_when_the_next_is_possible(hub, students):
    s2 = students["student2"]
    answer(s2, CORRECT[1].code, "second")
    assert submit(s2)["success"]
    wait_for(s2, graded(2), "student2's second attempt graded")
    second = wait_for(s2, lambda s: s["attempts"][1]["counted"], "the better second attempt counting instead")
    first_received = second["attempts"][0]["received"]
    assert not second["attempts"][0]["counted"]  # the better one counts, and only that one
    assert second["next_graded_attempt"] is not None and "Your next graded attempt is possible at" in second["next_text"]

    answer(s2, CORRECT[2].code, "third")
    refused = submit(s2)
    assert refused["success"] is False
    said = refused["value"]
    assert "Not submitted: you have had 2 graded attempts in the last 24 hours, the most this assignment allows" in said
    import datetime as dt

    next_at = dt.datetime.fromisoformat(first_received.replace("Z", "+00:00")) + dt.timedelta(hours=24)
    assert f"Your next graded attempt is possible at {next_at.strftime('%Y-%m-%d %H:%M')} UTC" in said, said
    inbound = hub.state / "exchange" / COURSE / "inbound" / "student2"
    assert len([p for p in inbound.iterdir() if not p.name.startswith(".")]) == 2  # nothing was handed in


def test_an_attempt_handed_in_behind_the_submits_back_is_not_graded_and_does_not_count(hub, students):
    s2 = students["student2"]
    before = status(s2)
    counted = next(a for a in before["attempts"] if a["counted"])
    inbound = hub.state / "exchange" / COURSE / "inbound" / "student2"
    newest = sorted(p for p in inbound.iterdir() if not p.name.startswith("."))[-1]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S.000000 UTC", time.gmtime())
    forged = inbound / f"student2+{ASSIGNMENT}+{stamp}+bypass"
    entry = pwd.getpwnam("student2")
    # as the student's own Unix account, with plain cp: what a student who edited their submit could do
    subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                    "cp", "-r", str(newest), str(forged)], check=True)
    after = wait_for(s2, lambda s: any(a["submission"] == forged.name for a in s["attempts"]),
                     "the grader seeing the attempt handed in by hand")
    attempt = next(a for a in after["attempts"] if a["submission"] == forged.name)
    assert attempt["state"] == "refused" and "checks" not in attempt, attempt
    assert "2 graded attempts in the last 24 hours" in attempt["message"]
    assert len(list((hub.state / "course" / "attempts" / "archive" / "student2" / ASSIGNMENT).iterdir())) == 2
    assert next(a for a in after["attempts"] if a["counted"])["submission"] == counted["submission"]
    # the TA's collect keeps the attempt that counts as student2's submission
    ta = hub.session("ta")
    reply = ta.formgrader("POST", f"assignment/{ASSIGNMENT}/collect")
    assert reply.status_code == 200 and reply.json()["success"], reply.text[-2000:]
    collected = (hub.state / "course" / "submitted" / "student2" / ASSIGNMENT / "timestamp.txt").read_text()
    assert collected.startswith(counted["timestamp"][:19]), (collected, counted)


def test_the_formgrader_shows_the_policy_and_every_attempt_to_the_course_staff_only(hub, students):
    for user in ("ta", "instructor"):
        staff = hub.session(user)
        page = staff.get(f"/services/{COURSE}/formgrader/feedback_on_submit")
        assert page.status_code == 200
        assert "2 graded attempts per 24 hours. Your best graded attempt counts for the hidden checks" in page.text
        assert "the course staff grade the written answers of your latest graded attempt." in page.text
        assert page.text.count("data-student='student2'") == 3 and "data-state='refused'" in page.text
        nonce = re.search(r"script-src 'nonce-([\w-]+)'", page.headers["Content-Security-Policy"]).group(1)
        assert all(f'nonce="{nonce}"' in tag for tag in re.findall(r"<script\b[^>]*>", page.text))  # ours only
        api = staff.formgrader("GET", f"attention/attempts/{ASSIGNMENT}").json()
        assert {row["state"] for row in api["attempts"] if row["student"] == "student2"} == {"graded", "refused"}
    assert hub.session("student1").get(f"/services/{COURSE}/formgrader/feedback_on_submit").status_code == 403


# --------------------------------------------------------------------------- the browser

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def assignments_tab(chromium, hub, user: str, **context_options):
    """A new browser context (``context_options``: its viewport, zone, locale) logged in as ``user``,
    and its page on the user's Lab with the Assignments tab showing."""
    context = chromium.new_context(**context_options)
    context.set_default_timeout(120_000)
    page = context.new_page()
    page.goto(hub.url + "/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", hub.passwords[user])
    page.locator("input[name=password]").press("Enter")
    page.goto(f"{hub.url}/user/{user}/lab")
    page.locator(".jp-LabShell").wait_for()
    # a student's Lab opens on the Assignments tab; the Course menu brings it back (course_lab)
    if not page.locator("#nbgrader-assignment-list").is_visible():
        page.locator(".lm-MenuBar-item", has_text="Course").click()
        page.locator(".lm-Menu-item", has_text="Your assignments").first.click()
    return context, page


@pytest.mark.browser
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps")
def test_the_assignments_tab_shows_the_result_in_a_real_browser(hub, students):
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = REPO / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    s3 = students["student3"]
    answer(s3, NO_SCALE.code, "browser")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        try:
            context, page = assignments_tab(chromium, hub, "student3", viewport={"width": 1400, "height": 1000})
            panel = page.locator("#feedback_on_submit_panel")
            panel.wait_for()
            panel.locator("text=No attempt yet").wait_for()
            page.locator("#nbgrader-assignment-list").get_by_role("button", name="Submit").first.click()
            # the submit's confirmation points to the panel, not to the stock "last submission counts"
            note = page.locator(".jp-toast-message", has_text="Submitted").first
            note.wait_for(timeout=WAIT * 1000)
            assert "Feedback on submit" in note.inner_text() and "last submission" not in note.inner_text()
            panel.locator("li.fos-attempt[data-state=graded]").first.wait_for(timeout=WAIT * 1000)
            attempt = panel.locator("li.fos-attempt[data-state=graded][data-counted=true]").first
            attempt.wait_for(timeout=WAIT * 1000)  # the pages and the gradebook follow the result
            page.screenshot(path=str(shots / "feedback-on-submit-assignments-tab.png"), full_page=True)
            text = attempt.inner_text()
            assert re.search(r"[0-9.]+ of 46 points from the hidden checks", text), text
            failed = attempt.locator("ul.fos-checks li[data-passed=false]").all_inner_texts()
            assert any("The scores are q·k divided by √D." in line for line in failed), failed
            assert "this attempt counts for your grade" in text
            assert panel.locator(".fos-policy").inner_text().startswith("On submit you see the full feedback page")
            # its feedback page opens from the tab
            link = attempt.locator(".fos-pages a", has_text="self_attention").first
            link.wait_for(timeout=WAIT * 1000)
            with context.expect_page() as opened:
                link.click()
            feedback = opened.value
            feedback.wait_for_load_state()
            assert "scores must be divided by √D" in feedback.locator("body").inner_text()
            feedback.screenshot(path=str(shots / "feedback-on-submit-page.png"))
        finally:
            chromium.close()


SHOT_ZONE = "Asia/Kolkata"  # UTC+5:30: a time left in UTC, or in the machine's zone, cannot pass for it
DOCS_SHOTS = REPO / "docs" / "_static" / "screenshots"
# The students' page's picture of the panel (docs/students/index.md), taken here at every run.
PANEL_SHOT = DOCS_SHOTS / "feedback-on-submit-panel.png"
# Elements that hold a message a person reads: none may scroll sideways or be cut at the window's edge.
CUT_OFF = """(selector) => [...document.querySelectorAll(selector)].filter(el => el.offsetParent !== null).filter(el =>
  el.scrollWidth > el.clientWidth + 1 || el.getBoundingClientRect().right > document.documentElement.clientWidth + 1
).map(el => el.textContent.slice(0, 80))"""


# nbgrader's Submit of an assignment, found again at each call (nbgrader draws its list anew at will)
SUBMIT = """name => [...document.querySelectorAll('#fetched_assignments_list .list_item')].filter(row =>
  ((row.querySelector('.item_name') || {}).textContent || '').trim() === name).map(row =>
  row.querySelector('.item_status button')).filter(Boolean)[0]"""
SUBMIT_OFF = f"name => {{ const b = ({SUBMIT})(name); return !!b && b.disabled && b.textContent.trim() === 'Submit'; }}"
SUBMIT_ON = f"name => {{ const b = ({SUBMIT})(name); return !!b && !b.disabled && !b.title; }}"


def local_clock(iso: str, seconds: float = 0) -> str:
    """``HH:MM`` of an ISO time (``seconds`` later) in SHOT_ZONE, as the student's browser there shows it."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    at = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")) + dt.timedelta(seconds=seconds)
    return at.astimezone(ZoneInfo(SHOT_ZONE)).strftime("%H:%M")


@pytest.mark.browser
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps")
def test_the_panel_reads_as_a_student_reads_it(hub, students):
    from grader_tests.registry import assignment as registered

    s3 = students["student3"]
    # two graded attempts of the core notebook with the √D bug; every other notebook left as fetched
    while len(status(s3)["attempts"]) < 2:
        n = len(status(s3)["attempts"]) + 1
        answer(s3, NO_SCALE.code, f"panel {n}")
        assert submit(s3)["success"]
        wait_for(s3, graded(n, pages=True), f"student3's attempt {n} graded with its pages")
    now = wait_for(s3, lambda s: any(a["counted"] for a in s["attempts"]), "student3's counting attempt")
    assert now["next_graded_attempt"], now  # 2 graded attempts per 24 hours: the next is tomorrow
    counted = next(i for i, a in enumerate(now["attempts"]) if a["counted"])
    catalogue = registered(ASSIGNMENT).notebook_checks
    # the status lists each notebook's checks in the catalogue's order (the notebook's), part 1 first
    shown = now["attempts"][counted]["checks"]
    assert [c["notebook"] for c in shown] == [nb for nb, checks in catalogue.items() for _ in checks]
    assert [c["title"] for c in shown] == [c.title for checks in catalogue.values() for c in checks]
    assert {c["notebook"] for c in shown if not c["started"]} == set(catalogue) - {ASSIGNMENT}

    sync_api = pytest.importorskip("playwright.sync_api")
    shots = REPO / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        try:
            context, page = assignments_tab(chromium, hub, "student3", viewport={"width": 1280, "height": 1000},
                                            timezone_id=SHOT_ZONE, locale="en-GB")
            panel = page.locator("#feedback_on_submit_panel")
            attempts = panel.locator("li.fos-attempt")
            attempts.nth(1).wait_for()

            # numbered from the newest down; the one that counts unfolded, the others folded
            numbers = [attempts.nth(i).get_attribute("data-number") for i in range(attempts.count())]
            assert numbers == ["2", "1"], numbers
            markers = attempts.evaluate_all("ls => ls.map(l => getComputedStyle(l).display === 'list-item' && "
                                            "getComputedStyle(l).listStyleType !== 'none')")
            assert not any(markers), markers  # no list number beside "Attempt N" to contradict it
            summaries = panel.locator("li.fos-attempt > details > summary").all_inner_texts()
            assert [t.split(",")[0] for t in summaries] == ["Attempt 2", "Attempt 1"], summaries
            unfolded = panel.locator("li.fos-attempt > details").evaluate_all("ds => ds.map(d => d.open)")
            assert unfolded == [i == counted for i in (1, 0)], (unfolded, counted)
            attempt = panel.locator("li.fos-attempt[data-counted=true]")

            # the checks in the notebook's order; a notebook left as fetched reads "not started", no crosses
            rows = attempt.locator("ul.fos-checks > li").evaluate_all(
                "ls => ls.map(l => [l.className, l.getAttribute('data-notebook') || '', l.textContent])")
            notebooks = [nb for kind, nb, _ in rows if kind == "fos-notebook"]
            assert notebooks == list(catalogue), notebooks
            core = [text[1:] for kind, _, text in rows if kind == ""]  # a check row: its mark, title, points
            assert [t.rsplit(" (", 1)[0] for t in core] == [c.title for c in catalogue[ASSIGNMENT]], core
            not_started = [kind for kind, _, _ in rows].count("fos-not-started")
            assert not_started == len(catalogue) - 1, rows
            assert attempt.locator("ul.fos-checks li[data-passed=false]").count() == 1  # the √D check alone
            pages = attempt.locator(".fos-pages a").all_inner_texts()
            assert pages[0] == ASSIGNMENT, pages  # part 1 first

            # every time in the student's zone, in one format; none in UTC
            text = panel.inner_text()
            assert "UTC" not in text, text
            for a, summary in zip(reversed(now["attempts"]), summaries):
                assert local_clock(a["received"]) in summary, (a["received"], summary)
            next_line = panel.locator(".fos-next").inner_text()
            assert local_clock(now["next_graded_attempt"]) in next_line, (now["next_graded_attempt"], next_line)

            # Submit is off while the policy refuses, and says until when
            page.wait_for_function(SUBMIT_OFF, arg=ASSIGNMENT)
            title = page.evaluate(f"name => ({SUBMIT})(name).title", ASSIGNMENT)
            assert local_clock(now["next_graded_attempt"]) in title, title
            PANEL_SHOT.parent.mkdir(parents=True, exist_ok=True)
            panel.screenshot(path=str(PANEL_SHOT))
            shutil.copyfile(PANEL_SHOT, shots / PANEL_SHOT.name)

            # a submit from a page that had not yet heard of the refusal: the reason in a readable dialog
            page.evaluate(f"name => {{ const b = ({SUBMIT})(name); b.disabled = false; b.click(); }}", ASSIGNMENT)
            dialog = page.locator(".jp-Dialog .attention-refusal")
            dialog.wait_for()
            assert page.locator(".jp-Dialog-header").inner_text() == f"Not submitted: “{ASSIGNMENT}”"
            said = dialog.inner_text()
            assert "You have had 2 graded attempts in the last 24 hours, the most this assignment allows." in said
            assert "Your next graded attempt is possible at" in said and "UTC" not in said, said
            assert local_clock(now["next_graded_attempt"]) in said, said
            assert page.locator(".nbgrader-ErrorDialog").count() == 0  # nbgrader's "Invalid Submission" is not shown
            assert page.evaluate(CUT_OFF, ".attention-refusal p") == []
            page.screenshot(path=str(shots / "feedback-on-submit-refusal.png"))
            page.locator(".jp-Dialog").get_by_role("button", name="OK").click()
            page.wait_for_function(SUBMIT_OFF, arg=ASSIGNMENT)
            inbound = hub.state / "exchange" / COURSE / "inbound" / "student3"
            assert len([p for p in inbound.iterdir() if not p.name.startswith(".")]) == 2  # nothing handed in

            # the policy lets the next attempt be graded now: Submit is on again, without a reload
            set_policy(hub, {ASSIGNMENT: {"feedback": "full", "attempts": None, "counts": "best"}})
            page.wait_for_function(SUBMIT_ON, arg=ASSIGNMENT, timeout=WAIT * 1000)
            # an unchanged submit says so in a toast that is shown whole, with the time in the student's zone
            page.locator("#fetched_assignments_list .list_item", has=page.locator(".item_name", has_text=ASSIGNMENT)
                         ).locator(".item_status button").first.click()
            note = page.locator(".jp-toast-message", has_text="Nothing new was filed").first
            note.wait_for(timeout=WAIT * 1000)
            page.wait_for_function("() => !document.querySelector('.Toastify__toast[class*=\"enter\"]')")
            told = note.inner_text()
            assert told.endswith("Save changes, then submit.") and "UTC" not in told, told
            received = now["attempts"][-1]["received"]  # the exchange's stamp is within a second of it
            assert any(local_clock(received, later) in told for later in (-1, 0, 1)), (received, told)
            assert page.evaluate(CUT_OFF, ".jp-toast-message") == []
        finally:
            chromium.close()


ESSAY = "Token 5 takes 30 % of its output from token 10's value: the weight is how much query 5 attends to key 10."
WRITTEN = ("04_shapes_and_cost", "meaning_answer")  # a written answer of the assignment, graded by a TA


def write_essay(session, text: str) -> None:
    notebook, grade_id = WRITTEN
    path = f"{ASSIGNMENT}/{notebook}.ipynb"
    nb = session.contents(path).json()["content"]
    (cell,) = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id]
    cell["source"] = text
    session.save_notebook(path, nb)


@pytest.mark.browser
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps")
def test_under_best_the_ta_grades_the_written_answers_of_the_newest_attempt(hub, students):
    """Under "best", a later attempt that scores lower on the hidden checks but adds an essay keeps it: the
    student's panel says whose written answers are graded, and the TA's grading view of the counting
    submission shows the essay (it used to show the best attempt's empty answer)."""
    set_policy(hub, {ASSIGNMENT: {"feedback": "full", "attempts": None, "counts": "best"}})
    s3 = students["student3"]
    known = len(status(s3)["attempts"])
    answer(s3, CORRECT[0].code, "best, right layer")
    assert submit(s3)["success"]
    wait_for(s3, graded(known + 1), "student3's right layer graded")
    answer(s3, NO_SCALE.code, "best, the bug and an essay")
    write_essay(s3, ESSAY)
    assert submit(s3)["success"]
    now = wait_for(s3, lambda s: graded(known + 2)(s) and s["attempts"][known]["counted"],
                   "student3's lower attempt graded, the right one still counting")
    assert not now["attempts"][known + 1]["counted"]
    notebook = hub.state / "course" / "autograded" / "student3" / ASSIGNMENT / f"{WRITTEN[0]}.ipynb"
    deadline = time.monotonic() + WAIT
    while ESSAY not in (notebook.read_text() if notebook.exists() else ""):
        assert time.monotonic() < deadline, "the newer attempt's essay never reached the TA's graded copy"
        time.sleep(0.3)

    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
        try:
            _, page = assignments_tab(chromium, hub, "student3", viewport={"width": 1280, "height": 1000})
            panel = page.locator("#feedback_on_submit_panel")
            panel.locator("li.fos-attempt[data-counted=true]").wait_for()
            assert "grade the written answers of your latest graded attempt" in panel.inner_text()

            ta = hub.browser_page(chromium, "ta")
            formgrader = f"{hub.url}/services/{COURSE}/formgrader"
            ta.goto(f"{formgrader}/gradebook/{ASSIGNMENT}/{WRITTEN[0]}")
            ta.locator("#main-table").wait_for()
            listed = ("async () => { const xsrf = (document.cookie.match(/\\b_xsrf=([^;]*)/) || [])[1] || '';"
                      f" const url = {formgrader + '/api/submitted_notebooks/' + ASSIGNMENT + '/' + WRITTEN[0]!r};"
                      " return await (await fetch(url, {headers: {'X-XSRFToken': xsrf}})).json(); }")
            (mine,) = [s for s in ta.evaluate(listed) if s["student"] == "student3"]
            ta.goto(f"{formgrader}/submissions/{mine['id']}")
            ta.locator(f"input.score#{WRITTEN[1]}").wait_for()
            assert ESSAY in ta.locator("body").inner_text()
        finally:
            chromium.close()


# --------------------------------------------------------------------------- load and hostility

def set_policy(hub, policy: dict) -> None:
    """What an instructor does: edit the course's nbgrader_config.py; the grader follows within a second."""
    if getattr(hub, "policy", None) == policy:
        return
    hub.policy = policy
    config = hub.state / "course" / "nbgrader_config.py"
    log = hub.state / "jupyterhub.log"  # where the hub's processes write
    offset = len(log.read_text(errors="replace"))
    with open(config, "a") as fh:
        fh.write(f"\nc.FeedbackOnSubmit.policies = {policy!r}\n")
    described = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.findall(r"feedback-on-submit\] policy of " + ASSIGNMENT + r": (.*)", log.read_text(errors="replace")[offset:])
        if found:
            described = found[-1]
            break
        time.sleep(0.2)
    assert described, "the grader did not pick up the new policy"


def test_a_looping_submission_costs_only_its_owner_and_only_their_attempt(hub, students):
    set_policy(hub, {ASSIGNMENT: {"feedback": "checks", "attempts": None, "counts": "last"}})
    s4, s5 = students["student4"], students["student5"]
    path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    nb = s4.contents(path).json()["content"]
    nb["cells"].insert(1, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": "while True:\n    pass"})
    s4.save_notebook(path, nb)
    answer(s5, CORRECT[0].code)
    assert submit(s4)["success"]
    wait_for(s4, lambda s: s["attempts"] and s["attempts"][-1]["state"] == "grading", "student4's attempt in grading")
    assert submit(s5)["success"]
    done = wait_for(s5, graded(1), "student5's attempt graded")
    assert done["attempts"][0]["state"] == "graded"
    assert status(s4)["attempts"][-1]["state"] == "grading"  # still stuck in its loop: it held one worker only
    looped = wait_for(s4, graded(1), "student4's looping attempt graded")["attempts"][0]
    assert looped["state"] == "graded" and "longer than the 15 s allowed per cell" in looped["message"], looped
    core = {t: p for (nb_, t), p in passed_checks(looped).items() if nb_ == ASSIGNMENT}
    assert core and not any(core.values())  # its own checks fail, with the reason
    assert "not graded in this attempt" not in looped["message"]  # and every other notebook was graded
    assert {nb_ for nb_, _t in passed_checks(looped)} == {nb_ for nb_, _t in passed_checks(done["attempts"][0])}


PER_STUDENT = 4


def test_a_burst_of_submits_is_all_graded_in_order_none_lost(hub, students):
    """Five students submit PER_STUDENT times each at once. Four each is what the property needs: the
    grader takes one attempt per student at a time on its three workers, so every student has attempts
    queued behind their own in grading, and two students wait even for their first; their order and
    that none is lost or graded twice are checked on each student's sequence. What a far larger flood
    does to the queue's order and fairness is the fair queue's own test (a flood of 50,
    tests/feedback_on_submit/test_feedback_on_submit_units.py)."""
    set_policy(hub, {ASSIGNMENT: {"feedback": "checks", "attempts": None, "counts": "last"}})
    users = [f"student{n}" for n in range(1, 6)]
    before = {user: len(status(students[user])["attempts"]) for user in users}
    replies: dict[str, list] = {user: [] for user in users}

    def burst(user):
        session = students[user]
        for k in range(PER_STUDENT):
            answer(session, CORRECT[k % len(CORRECT)].code if k % 2 else NO_SCALE.code, f"burst {k}")
            replies[user].append(submit(session))

    threads = [threading.Thread(target=burst, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(reply["success"] for user in users for reply in replies[user]), replies
    for user in users:
        wait_for(students[user], graded(before[user] + PER_STUDENT), f"{user}'s attempts of the burst graded")
    final = {user: wait_for(students[user], lambda s: s["attempts"][-1]["counted"], f"{user}'s last attempt counting")
             for user in users}
    from attention_platform.attempts.ledger import Ledger

    ledger = Ledger(f"sqlite:///{hub.state / 'course' / 'gradebook.db'}")
    try:
        rows = [r for r in ledger.attempts(ASSIGNMENT) if r["student"] in users]
    finally:
        ledger.close()
    burst = {user: [r for r in rows if r["student"] == user][before[user]:] for user in users}
    for user in users:
        mine = burst[user]
        assert len(mine) == PER_STUDENT and all(r["state"] == "graded" for r in mine), [(r["id"], r["state"]) for r in mine]
        assert len({r["submission"] for r in mine}) == PER_STUDENT  # each submission once
        # in the order the exchange received them
        assert [r["graded_at"] for r in mine] == sorted(r["graded_at"] for r in mine)
        assert [r["received_at"] for r in mine] == sorted(r["received_at"] for r in mine)
        assert final[user]["attempts"][-1]["counted"]  # last: the newest counts
    # fair: no student's last attempt started grading before every student's first had started (a start is
    # its result's time less its grading's length: a student whose own attempts are slow, as student4's
    # looping notebook is, ends later but is taken in turn)
    def started(row):
        return row["graded_at"] - dt.timedelta(seconds=row["seconds"])

    assert max(started(burst[u][0]) for u in users) < min(started(burst[u][-1]) for u in users), \
        [(r["student"], str(r["received_at"]), str(started(r)), str(r["graded_at"])) for r in rows]
    # and what each student was last shown is their submission in the course (policy: the last counts)
    in_course = check_scores(hub.state / "course", notebook=None, assignment=ASSIGNMENT)
    for user in users:
        last = final[user]["attempts"][-1]
        shown = sum(c["points"] for c in last["checks"] if c["passed"])
        assert shown == last["score"]
        from grader_tests.registry import check_for_grade_id

        assert sum(v or 0 for k, v in in_course[user].items() if check_for_grade_id(k.split("/")[1])) == last["score"]




def test_a_flood_of_hand_made_folders_costs_nobody_else_any_time(hub, students):
    """About 1,500 empty folders (and a few holding no notebook) made by a student in their own inbound
    folder, a twentieth of a second of their time, became as many gradebook rows on the grader's one scan
    thread, and another student's result waited 37 s instead of 1.2 s. They are not submissions: skipped
    at intake without a row, the flooder told so in their status, and an honest submit made right after
    the flood is graded about as fast as the same submit alone, measured here first."""
    set_policy(hub, {ASSIGNMENT: {"feedback": "checks", "attempts": None, "counts": "last"}})
    honest, flooder = students["student1"], students["student3"]

    def timed_submit(marker: str) -> float:
        answer(honest, CORRECT[0].code, marker)
        n = len(status(honest)["attempts"]) + 1
        started = time.monotonic()
        assert submit(honest)["success"]
        wait_for(honest, graded(n), f"student1's attempt {marker}")
        return time.monotonic() - started

    alone = timed_submit("alone")
    rows_before = len(status(flooder)["attempts"])
    inbound = hub.state / "exchange" / COURSE / "inbound" / "student3"
    entry = pwd.getpwnam("student3")
    flood = textwrap.dedent(f"""
        import os, time
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        for k in range(1500):
            os.mkdir(f"{inbound}/student3+{ASSIGNMENT}+{{stamp}}.{{k:06d}} UTC+flood")
        for k in range(20):  # a file, but no notebook
            folder = f"{inbound}/student3+{ASSIGNMENT}+{{stamp}}.{{k:06d}} UTC+nonotebook"
            os.mkdir(folder)
            open(folder + "/timestamp.txt", "w").write(stamp)
    """)
    subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                    sys.executable, "-c", flood], check=True)
    beside = timed_submit("beside the flood")
    assert beside < 3 * alone + 2, (beside, alone)
    told = wait_for(flooder, lambda s: "not submissions" in (s.get("notice") or ""), "student3 told of the flood")
    assert len(told["attempts"]) == rows_before, told["attempts"][rows_before:][:3]  # no row for the flood
    assert "1,520 folders in your inbound folder are not submissions" in told["notice"], told["notice"]
    from attention_platform.attempts.ledger import Ledger

    ledger = Ledger(f"sqlite:///{hub.state / 'course' / 'gradebook.db'}")
    try:
        assert not [r for r in ledger.attempts(ASSIGNMENT, "student3") if "flood" in r["submission"]
                    or "nonotebook" in r["submission"]]
    finally:
        ledger.close()
