"""What the course staff and the students see of deadlines, without a hub: the formgrader's extensions
page (the new deadline from its form, the change log), the late policy's form, the submissions list's
deadline column, the gate's ``extensions`` role under the course's setting, and the Lab's reading of
the student's deadline files (bounded, never through a link). The pages themselves are tested in a
browser on a live hub (tests/hub/test_student_lab_browser.py)."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from nbgrader.api import Gradebook

import gradebooks  # noqa: F401 - asks alembic for the schema once per session

from attention_platform.attempts import deadline_file
from attention_platform.deadlines import late_policy
from attention_platform.deadlines.extensions import ExtensionError, ExtensionStore
from attention_platform.deadlines.late_policy import LatePolicyError
from attention_platform.formgrader import formgrader_gate, late_policy_form, submission_deadlines
from attention_platform.formgrader.extensions_page import change_log, new_deadline
from attention_platform.lab.feedback_on_submit import deadlines

UTC = dt.timezone.utc
DUE = dt.datetime(2030, 5, 6, 12, 0, tzinfo=UTC)
COURSE = "dl-attention"
STUDENTS = ["ada", "bo", "cy"]


def hours(n: float) -> dt.datetime:
    return DUE + dt.timedelta(hours=n)


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course directory (gradebook: self_attention due at DUE; ada, bo and cy) and an exchange whose
    feedback folder has a folder for each student, as the hub makes them."""
    folder = tmp_path / "course"
    folder.mkdir()
    with Gradebook(db_url(folder)) as gb:
        gb.update_or_create_assignment("self_attention", duedate=DUE.replace(tzinfo=None))
        for student in STUDENTS:
            gb.add_student(student)
            (tmp_path / "exchange" / COURSE / "feedback" / student).mkdir(parents=True)
    monkeypatch.setenv("NBGRADER_EXCHANGE_ROOT", str(tmp_path / "exchange"))
    monkeypatch.setenv("NBGRADER_COURSE_ID", COURSE)
    monkeypatch.delenv("NBGRADER_DB_URL", raising=False)
    return folder


def db_url(folder) -> str:
    return f"sqlite:///{folder / 'gradebook.db'}"


def submit(course, student: str, when: dt.datetime) -> None:
    with Gradebook(db_url(course)) as gb:
        gb.add_submission("self_attention", student, timestamp=when.replace(tzinfo=None))


# --------------------------------------------------------------------------- the extensions page

def test_the_new_deadline_is_a_utc_time_or_hours_added_to_the_class_deadline():
    assert new_deadline("2030-05-08T09:30", "", DUE) == dt.datetime(2030, 5, 8, 9, 30, tzinfo=UTC)
    assert new_deadline("2030-05-08T09:30+02:00", "", DUE) == dt.datetime(2030, 5, 8, 7, 30, tzinfo=UTC)
    assert new_deadline("", "48", DUE) == hours(48)
    assert new_deadline("", "1.5", DUE) == hours(1.5)
    for due, extra, said in [("", "", "one of the two"), ("2030-05-08T09:30", "2", "one of the two"),
                             ("", "two days", "must be a number"), ("", "-3", "more than 0"),
                             ("8 May", "", "is not a date and time")]:
        with pytest.raises(ExtensionError, match=said):
            new_deadline(due, extra, DUE)
    with pytest.raises(ExtensionError, match="no due date to add hours to"):
        new_deadline("", "48", None)


def test_the_change_log_says_who_when_what_and_why_newest_first(course):
    store = ExtensionStore(course)
    store.grant("self_attention", "ada", hours(48), "illness, note from the office", "instructor", hours(-30))
    store.grant("multi_head_attention", "bo", hours(24), "another assignment's", "instructor", hours(-20))
    store.revoke("self_attention", "ada", "ta", hours(-10))
    rows = change_log(store.history(), "self_attention")
    assert rows == [
        {"at": "2030-05-06 02:00 UTC", "by": "ta", "student": "ada", "what": "revoked", "why": ""},
        {"at": "2030-05-05 06:00 UTC", "by": "instructor", "student": "ada", "what": "granted until 2030-05-08 12:00 UTC",
         "why": "illness, note from the office"},
    ]


# --------------------------------------------------------------------------- the late policy's form

def test_the_late_policy_form_saves_what_the_grader_reads_and_rewrites_every_students_file(course, tmp_path):
    done = late_policy_form.apply(str(course), "self_attention", "late-save",
                                  {"kind": "penalty", "penalty_percent": "10", "per": "hour",
                                   "max_penalty_percent": "30", "cutoff_hours": "", "late_days_budget": ""}, hours(2))
    assert done == "late-saved"
    policy = late_policy.policy_for(course, "self_attention")
    assert (policy.kind, policy.penalty_percent, policy.per, policy.max_penalty_percent, policy.cutoff_hours) == \
        ("penalty", 10, "hour", 30, None)
    for student in STUDENTS:
        written = deadline_file.read(str(tmp_path / "exchange" / COURSE / "feedback" / student), "self_attention")
        assert written["now"]["policy"]["kind"] == "penalty" and written["now"]["state"] == "late", written
    assert late_policy_form.form_values(policy)["cutoff_hours"] == ""
    assert late_policy_form.form_values(policy)["penalty_percent"] == "10"

    assert late_policy_form.apply(str(course), "self_attention", "late-reset", {}, hours(2)) == "late-reset"
    assert late_policy.policy_for(course, "self_attention") is None
    written = deadline_file.read(str(tmp_path / "exchange" / COURSE / "feedback" / "ada"), "self_attention")
    assert written["now"]["policy"] is None


def test_a_late_policy_the_grader_could_not_use_is_named_and_nothing_is_saved(course):
    late_policy_form.apply(str(course), "self_attention", "late-save", {"kind": "closed"}, hours(0))
    with pytest.raises(LatePolicyError, match="penalty_percent"):
        late_policy_form.apply(str(course), "self_attention", "late-save",
                               {"kind": "penalty", "penalty_percent": "ten", "per": "hour"}, hours(0))
    assert late_policy.policy_for(course, "self_attention").kind == "closed"


# --------------------------------------------------------------------------- the submissions list

def test_the_submissions_list_shows_each_students_standing_sortable(course):
    """Two students with different extensions in one list: on time with an extension, late by how much
    with the penalty, and a student without a submission; sorted by lateness."""
    late_policy.save(course, "self_attention", {"kind": "penalty", "penalty_percent": 10, "per": "hour",
                                                "max_penalty_percent": 50, "cutoff_hours": 24})
    ExtensionStore(course).grant("self_attention", "ada", hours(48), "accommodation", "instructor", hours(-100))
    ExtensionStore(course).grant("self_attention", "bo", hours(1), "late start", "instructor", hours(-100))
    submit(course, "ada", hours(30))
    submit(course, "bo", hours(3.5))
    found = submission_deadlines.cells(str(course), db_url(course), "self_attention", ["ada", "bo", "cy"], hours(50))
    assert found["ada"]["text"] == "on time; extension to 2030-05-08 12:00 UTC"
    assert found["bo"]["text"] == "late by 2 h 30 min: 30% taken; extension to 2030-05-06 13:00 UTC"
    assert found["cy"]["text"] == "no submission"
    assert found["cy"]["order"] < found["ada"]["order"] < found["bo"]["order"]


def test_the_submissions_list_shows_late_days_and_what_does_not_count(course):
    late_policy.save(course, "self_attention", {"kind": "late_days", "late_days_budget": 2})
    submit(course, "ada", hours(30))
    submit(course, "bo", hours(80))
    found = submission_deadlines.cells(str(course), db_url(course), "self_attention", ["ada", "bo"], hours(100))
    assert found["ada"]["text"] == "late by 1 d 6 h: 2 late days; late days used in the course: 2"
    assert found["bo"]["text"].startswith("late by 3 d 8 h: after the cut-off, does not count")
    assert found["bo"]["order"] > found["ada"]["order"]


# --------------------------------------------------------------------------- the gate's extensions role

def test_extensions_are_the_instructors_and_the_tas_only_where_the_course_allows_it(monkeypatch):
    route, needed = formgrader_gate.route_for("POST", "formgrader/extensions/self_attention")
    assert needed == formgrader_gate.EXTENSIONS
    assert formgrader_gate.route_for("GET", "formgrader/extensions")[1] == formgrader_gate.EXTENSIONS
    assert formgrader_gate.route_for("GET", "formgrader/api/attention/deadlines/self_attention")[1] == \
        formgrader_gate.GRADER
    monkeypatch.delenv("COURSE_TAS_GRANT_EXTENSIONS", raising=False)
    assert formgrader_gate.allowed(needed, formgrader_gate.INSTRUCTOR)
    assert not formgrader_gate.allowed(needed, formgrader_gate.GRADER)
    assert not formgrader_gate.allowed(needed, None)
    assert "COURSE_TAS_GRANT_EXTENSIONS" in formgrader_gate.refusal(needed)
    monkeypatch.setenv("COURSE_TAS_GRANT_EXTENSIONS", "1")
    assert formgrader_gate.allowed(needed, formgrader_gate.GRADER)
    assert not formgrader_gate.allowed(needed, None)
    assert formgrader_gate.refusal(needed) == formgrader_gate.REFUSALS[formgrader_gate.GRADER]


# --------------------------------------------------------------------------- the Lab's reading side

def test_the_lab_reads_each_deadline_file_bounded_and_never_through_a_link(tmp_path):
    folder = tmp_path / "feedback"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline_file.write(fd, "self_attention", {"now": {"state": "open", "effective_due": "2030-05-06T12:00:00Z"},
                                                   "submission": None})
    finally:
        os.close(fd)
    secret = tmp_path / "someone-elses.json"
    secret.write_text('{"version": 1, "now": {"state": "open"}}')
    (folder / "deadline-multi_head_attention.json").symlink_to(secret)
    (folder / "deadline-huge.json").write_bytes(b"{" + b" " * (deadline_file.MAX_BYTES + 10) + b"}")
    (folder / "deadline-..json").write_text("{}")
    (folder / "feedback-on-submit-self_attention.json").write_text("{}")
    found = deadlines(str(folder))
    assert set(found) == {"self_attention", "multi_head_attention", "huge"}
    assert found["self_attention"]["now"]["state"] == "open"
    assert "error" in found["multi_head_attention"] and "now" not in found["multi_head_attention"]
    assert "error" in found["huge"]
    assert deadlines(str(tmp_path / "no-such-folder")) == {}


def test_the_accommodations_list_the_instructors_guide_shows_imports(course):
    """docs/instructors/index.md's example, as an instructor would save it from there."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "instructors" / "index.md").read_text()
    example = page.split("```text\n", 1)[1].split("```", 1)[0]
    report = ExtensionStore(course).import_csv(example, "instructor", hours(-1), {"self_attention": DUE})
    assert report.ok, report.errors
    assert {(e.student, e.due) for e in report.granted} == {("ada", dt.datetime(2026, 12, 4, 22, 59, tzinfo=UTC)),
                                                            ("bo", hours(48))}
