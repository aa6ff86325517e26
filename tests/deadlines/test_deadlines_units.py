"""Deadlines without a hub: each late policy before, at and after the deadline on a fake clock, an
extension granted after the deadline passed, late days running out across assignments, the
accommodations CSV, the stores' files, and the deadline file a student's submit reads."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

import gradebooks  # noqa: F401 - asks alembic for the schema once per session

from attention_platform.attempts import deadline_file
from attention_platform.attempts.refusal import refused_submit
from attention_platform.deadlines import late_policy
from attention_platform.deadlines.extensions import ExtensionError, ExtensionStore
from attention_platform.deadlines.late_policy import LatePolicyError, parse
from attention_platform.deadlines.standing import Deadlines, standing
from attention_platform.deadlines.student_file import publish, publish_all
from grader_helpers import refused_saying

UTC = dt.timezone.utc
DUE = dt.datetime(2030, 5, 6, 12, 0, tzinfo=UTC)
ASSIGNMENTS = ("self_attention", "multi_head_attention")


def hours(n: float) -> dt.datetime:
    return DUE + dt.timedelta(hours=n)


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course directory whose gradebook has both assignments due at DUE."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))  # alembic
    folder = tmp_path / "course"
    folder.mkdir()
    with Gradebook(db_url(folder)) as gb:
        for name in ASSIGNMENTS:
            gb.update_or_create_assignment(name, duedate=DUE.replace(tzinfo=None))
        for student in ("ada", "bo"):
            gb.add_student(student)
    return folder


def db_url(folder) -> str:
    return f"sqlite:///{folder / 'gradebook.db'}"


def at(course, when, assignment="self_attention", student="ada", now=None):
    return standing(course, assignment, student, now or when, when, db_url=db_url(course))


# --------------------------------------------------------------------------- the policies on a fake clock

def test_without_a_policy_the_deadline_is_nbgraders_late_but_accepted(course):
    assert at(course, hours(-1)).state == "open"
    assert at(course, DUE).state == "open"
    late = at(course, hours(5))
    assert late.state == "late" and late.counts and late.policy is None and late.penalty_percent == 0
    assert late.late_by == dt.timedelta(hours=5)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_closed_accepts_until_the_deadline_itself_and_nothing_after(course, assignment):
    late_policy.save(course, assignment, {"kind": "closed"})
    assert at(course, hours(-0.5), assignment).state == "open"
    assert at(course, DUE, assignment).state == "open"
    after = at(course, DUE + dt.timedelta(seconds=1), assignment)
    assert after.state == "closed" and not after.counts and after.cutoff == DUE
    assert "does not count" in after.describe()


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_penalty_per_hour_begun_is_capped_and_stops_at_the_cutoff(course, assignment):
    late_policy.save(course, assignment, {"kind": "penalty", "penalty_percent": 10, "per": "hour",
                                          "max_penalty_percent": 30, "cutoff_hours": 48})
    assert at(course, DUE, assignment).penalty_percent == 0
    assert at(course, hours(0.1), assignment).penalty_percent == 10  # an hour begun
    assert at(course, hours(1.5), assignment).penalty_percent == 20
    capped = at(course, hours(47), assignment)
    assert capped.state == "late" and capped.penalty_percent == 30
    assert at(course, hours(48), assignment).state == "late"
    closed = at(course, hours(48.01), assignment)
    assert closed.state == "closed" and closed.cutoff == hours(48)


def test_a_penalty_per_day_without_cutoff_is_always_accepted(course):
    late_policy.save(course, "self_attention", {"kind": "penalty", "penalty_percent": 5, "per": "day",
                                                "max_penalty_percent": 50})
    assert at(course, hours(23)).penalty_percent == 5
    assert at(course, hours(25)).penalty_percent == 10
    far = at(course, hours(24 * 40))
    assert far.state == "late" and far.penalty_percent == 50 and far.cutoff is None


def test_an_extension_granted_after_the_deadline_passed_moves_that_students_deadline_only(course):
    late_policy.save(course, "self_attention", {"kind": "closed"})
    submitted = hours(20)
    assert at(course, submitted, now=hours(30)).state == "closed"
    ExtensionStore(course).grant("self_attention", "ada", hours(24), "illness", "prof", now=hours(30))
    mine = at(course, submitted, now=hours(30))
    assert mine.state == "open" and mine.effective_due == hours(24) and mine.extension.reason == "illness"
    assert at(course, submitted, student="bo", now=hours(30)).state == "closed"
    assert at(course, hours(24.5), now=hours(30)).state == "closed"


def test_an_extension_never_moves_a_deadline_earlier(course):
    ExtensionStore(course).grant("self_attention", "ada", hours(-10), "typo", "prof", now=hours(-20))
    assert at(course, hours(-1)).effective_due == DUE


def test_late_days_are_spent_across_the_course_until_they_run_out(course):
    for name in ASSIGNMENTS:
        late_policy.save(course, name, {"kind": "late_days", "late_days_budget": 3})
    first = at(course, hours(30), "self_attention")  # two days begun
    assert first.state == "late" and first.penalty_percent == 0
    assert (first.late_days_used, first.late_days_left) == (2, 1)
    with Gradebook(db_url(course)) as gb:  # that submission is the one the gradebook holds
        gb.add_submission("self_attention", "ada", timestamp=hours(30).replace(tzinfo=None))
    second = at(course, hours(10), "multi_head_attention")
    assert second.state == "late" and (second.late_days_used, second.late_days_left) == (3, 0)
    assert second.cutoff == DUE + dt.timedelta(days=1)
    beyond = at(course, hours(25), "multi_head_attention")
    assert beyond.state == "closed" and beyond.late_days_left == 1 and not beyond.counts
    other = at(course, hours(25), "multi_head_attention", student="bo")  # bo spent none
    assert other.state == "late" and other.late_days_left == 1


def test_work_the_late_days_do_not_cover_is_refused_in_words_that_say_how_late_how_many_and_whom_to_ask(course):
    late_policy.save(course, "self_attention", {"kind": "late_days", "late_days_budget": 1})
    beyond = at(course, hours(25))  # two days begun, one late day
    shared = beyond.to_json()["late_days_text"]  # the Lab's words for it are the grader's
    assert shared == ("You have 1 late day left for this assignment, enough for work handed in up to 1 day after "
                      "its deadline; later work is not accepted. If you need more time, ask your instructor for an "
                      "extension.")
    assert beyond.describe() == f"Closed: 1 d 1 h after the deadline. {shared}"
    assert beyond.refusal() == (f"Not counted: received 2030-05-07 13:00 UTC, 1 d 1 h after your deadline "
                                f"2030-05-06 12:00 UTC. {shared} This submission is kept for the record.")
    with Gradebook(db_url(course)) as gb:  # ada's other late-day assignment spent three days
        gb.add_submission("multi_head_attention", "ada", timestamp=hours(49).replace(tzinfo=None))
    late_policy.save(course, "multi_head_attention", {"kind": "late_days", "late_days_budget": 1})
    spent = at(course, hours(1))
    assert spent.state == "closed" and spent.late_days_left == 0 == spent.to_json()["late_days_before"]
    assert spent.describe() == ("Closed: 1 h after the deadline. You have no late days left for this assignment, so "
                                "work handed in after its deadline is not accepted. If you need more time, ask your "
                                "instructor for an extension.")
    assert at(course, hours(1), student="bo").to_json()["late_days_text"].startswith("You have 1 late day left")


def test_no_due_date_means_no_deadline_whatever_the_policy(course):
    with Gradebook(db_url(course)) as gb:
        gb.update_or_create_assignment("self_attention", duedate=None)
    late_policy.save(course, "self_attention", {"kind": "closed"})
    assert at(course, hours(1000)).state == "no deadline"


# --------------------------------------------------------------------------- the policy form's errors

@pytest.mark.parametrize("raw, says", [
    ({"kind": "lenient"}, "'kind' must be one of closed, penalty, late_days"),
    ({"kind": "penalty"}, "'penalty_percent' must be a number"),
    ({"kind": "penalty", "penalty_percent": 120}, "'penalty_percent' must be between 0 and 100"),
    ({"kind": "penalty", "penalty_percent": 5, "per": "week"}, "'per' must be hour or day"),
    ({"kind": "penalty", "penalty_percent": 5, "cutoff_hours": 0}, "'cutoff_hours' must be between"),
    ({"kind": "late_days", "late_days_budget": 2.5}, "'late_days_budget' must be a whole number"),
    ({"kind": "late_days"}, "'late_days_budget' must be a whole number"),
    ({"kind": "closed", "grace": 5}, "unknown setting 'grace'"),
    ("closed", "must be a dict"),
])
def test_a_broken_late_policy_says_what_to_change(raw, says):
    refused_saying(parse, LatePolicyError, raw, says)


def test_the_policy_file_is_written_whole_for_the_grader_and_a_link_is_refused(course):
    late_policy.save(course, "self_attention", {"kind": "late_days", "late_days_budget": 4})
    saved = course / late_policy.POLICY_FILE
    assert os.stat(saved).st_mode & 0o777 == 0o640
    assert json.loads(saved.read_text())["self_attention"]["late_days_budget"] == 4
    with pytest.raises(LatePolicyError):
        late_policy.save(course, "self_attention", {"kind": "penalty"})
    assert late_policy.policy_for(course, "self_attention").late_days_budget == 4  # nothing lost
    saved.unlink()
    (course / "elsewhere.json").write_text("{}")
    saved.symlink_to(course / "elsewhere.json")
    with pytest.raises(LatePolicyError, match="cannot be read"):
        late_policy.read(course)
    saved.unlink()
    saved.write_bytes(b" " * (late_policy.MAX_BYTES + 1))
    with pytest.raises(LatePolicyError, match="larger than"):
        late_policy.read(course)


# --------------------------------------------------------------------------- extensions and their record

def test_every_change_is_logged_with_who_when_and_why(course):
    store = ExtensionStore(course)
    store.grant("self_attention", "ada", hours(48), "  medical\n note ", "prof", now=hours(-5))
    store.grant("self_attention", "ada", hours(72), "more time", "ta1", now=hours(-4))
    assert store.revoke("self_attention", "ada", "prof", now=hours(-3)).due == hours(72)
    assert store.revoke("self_attention", "ada", "prof", now=hours(-2)) is None
    assert store.get("self_attention", "ada") is None
    assert [(e["action"], e["by"], e["at"], e.get("reason")) for e in store.history()] == [
        ("grant", "prof", "2030-05-06T07:00:00Z", "medical note"),
        ("grant", "ta1", "2030-05-06T08:00:00Z", "more time"),
        ("revoke", "prof", "2030-05-06T09:00:00Z", None)]
    assert os.stat(course / "extensions.log").st_mode & 0o777 == 0o640


@pytest.mark.parametrize("student, due, reason, says", [
    ("ada", hours(1), "  ", "give a reason"),
    ("../bo", hours(1), "x", "is not a student name"),
    ("ada", hours(1).replace(tzinfo=None), "x", "time zone"),
    ("ada", hours(1), "x" * 501, "at most 500"),
])
def test_a_bad_grant_is_refused_and_nothing_is_written(course, student, due, reason, says):
    with pytest.raises(ExtensionError, match=says):
        ExtensionStore(course).grant("self_attention", student, due, reason, "prof", now=DUE)
    assert ExtensionStore(course).history() == [] and ExtensionStore(course).all("self_attention") == []


def test_an_accommodations_csv_grants_every_row(course):
    text = ("student,assignment,due,extra_hours,reason\n"
            "ada,self_attention,2030-05-08T12:00:00+02:00,,accommodation\n"
            "bo,multi_head_attention,,36,accommodation\n")
    report = ExtensionStore(course).import_csv(text.encode(), "prof", now=DUE,
                                               due_dates=Deadlines(course, db_url=db_url(course)).due_dates)
    assert report.ok and len(report.granted) == 2
    assert ExtensionStore(course).get("self_attention", "ada").due == dt.datetime(2030, 5, 8, 10, tzinfo=UTC)
    assert ExtensionStore(course).get("multi_head_attention", "bo").due == hours(36)
    assert len(ExtensionStore(course).history()) == 2


def test_a_csv_with_any_bad_row_names_each_by_line_and_grants_nothing(course):
    text = ("student,assignment,due,reason\n"
            "ada,self_attention,2030-05-08T12:00:00Z,fine\n"
            "bo,self_attention,next friday,flu\n"
            "\n"
            "ada,self_attention,2030-05-09T12:00:00Z,again\n"
            "cy,linear_regression,2030-05-08T12:00:00Z,x\n"
            "dee,self_attention,2030-05-08T12:00:00,x\n"
            "eve,self_attention,2030-05-08T12:00:00Z,\n"
            "fay,self_attention\n")
    report = ExtensionStore(course).import_csv(text, "prof", now=DUE,
                                               due_dates=Deadlines(course, db_url=db_url(course)).due_dates)
    assert not report.ok and report.granted == []
    assert [e.split(":")[0] for e in report.errors] == ["line 3", "line 5", "line 6", "line 7", "line 8", "line 9"]
    assert "is not a date and time" in report.errors[0] and "already on line 2" in report.errors[1]
    assert "no assignment 'linear_regression'" in report.errors[2] and "no time zone" in report.errors[3]
    assert "give a reason" in report.errors[4] and "one value for each column" in report.errors[5]
    assert ExtensionStore(course).all("self_attention") == [] and ExtensionStore(course).history() == []


@pytest.mark.parametrize("text, says", [
    ("", "the file is empty"),
    ("name,assignment,due,reason\n", "missing: student"),
    ("student,assignment,reason\n", "missing: due or extra_hours"),
    ("student,assignment,due,reason\n", "no rows below its header"),
    (b"\xff\xfe", "not UTF-8"),
    (b"student,assignment,due,reason\n" + b"x" * (256 * 1024), "at most 256 kB"),
])
def test_a_csv_that_cannot_be_read_says_why(course, text, says):
    report = ExtensionStore(course).import_csv(text, "prof", now=DUE)
    assert not report.ok and says in report.errors[0]


# --------------------------------------------------------------------------- the student's file

def test_the_deadline_file_tells_the_student_their_own_deadline_and_says_closed_after_it(course, tmp_path):
    exchange = tmp_path / "exchange"
    for student in ("ada", "bo"):
        (exchange / "course101" / "feedback" / student).mkdir(parents=True)
    late_policy.save(course, "self_attention", {"kind": "closed"})
    ExtensionStore(course).grant("self_attention", "ada", hours(24), "private reason", "prof", now=hours(-1))
    assert publish_all(course, "self_attention", hours(-1), db_url=db_url(course), exchange_root=exchange,
                       course_id="course101") == 2
    ada = deadline_file.read(str(exchange / "course101" / "feedback" / "ada"), "self_attention")
    bo = deadline_file.read(str(exchange / "course101" / "feedback" / "bo"), "self_attention")
    assert ada["now"]["effective_due"] == "2030-05-07T12:00:00Z" and ada["now"]["extension"]["due"]
    assert "private reason" not in json.dumps(ada) and "prof" not in json.dumps(ada)
    assert bo["now"]["effective_due"] == "2030-05-06T12:00:00Z" and bo["now"]["extension"] is None
    assert deadline_file.closed_since(bo, hours(1)) == DUE
    assert deadline_file.closed_since(ada, hours(1)) is None
    assert os.stat(exchange / "course101" / "feedback" / "ada" / "deadline-self_attention.json").st_mode & 0o777 == 0o640


def test_publish_never_writes_through_a_students_link(course, tmp_path):
    feedback = tmp_path / "exchange" / "course101" / "feedback"
    feedback.mkdir(parents=True)
    (tmp_path / "target").mkdir()
    (feedback / "mallory").symlink_to(tmp_path / "target")
    assert not publish(course, "self_attention", "mallory", DUE, db_url=db_url(course),
                       exchange_root=tmp_path / "exchange", course_id="course101")
    assert list((tmp_path / "target").iterdir()) == []


# The grader account publishing every student's file as on the native hub: feedback/ is root's 0711, each
# student's folder the grader's; run as an unprivileged user (nobody) that may enter feedback/, not list it,
# and list inbound/ (its group's).
_PUBLISH_AS_GRADER = """
import datetime as dt, sys
from attention_platform.deadlines.student_file import publish_all
print(publish_all(sys.argv[1], "self_attention", dt.datetime.now(dt.timezone.utc), db_url=sys.argv[2],
                  exchange_root=sys.argv[3], course_id="course101"))
"""


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="the grader's own account needs root to act as it")
def test_publish_all_writes_every_students_file_though_the_grader_cannot_list_feedback(course, tmp_path):
    import subprocess

    from attention_platform.exchange.exchange_layout import ExchangeLayout, Ids

    grader = Ids.of_user("nobody")
    scratch = Path(__file__).resolve().parents[2] / "build" / f"deadlines-{tmp_path.name}"
    scratch.mkdir(parents=True, mode=0o755)
    try:
        os.chmod(scratch.parent, 0o755)
        layout = ExchangeLayout(scratch / "exchange", "course101", grader=grader)
        for student in ("ada", "bo", "cy"):  # cy has logged in, and is not in the gradebook
            layout.prepare_student(student, Ids(0, 0))
        assert os.stat(scratch / "exchange" / "course101" / "feedback").st_mode & 0o777 == 0o711
        own_course = scratch / "course"
        own_course.mkdir()
        (own_course / "gradebook.db").write_bytes((course / "gradebook.db").read_bytes())
        os.chown(own_course, grader.uid, grader.gid)
        os.chown(own_course / "gradebook.db", grader.uid, grader.gid)
        done = subprocess.run([sys.executable, "-c", _PUBLISH_AS_GRADER, str(own_course), db_url(own_course),
                               str(scratch / "exchange")], user=grader.uid, group=grader.gid, extra_groups=[],
                              cwd="/", capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split()[-1] == "3"
        for student in ("ada", "bo", "cy"):
            found = deadline_file.read(str(scratch / "exchange" / "course101" / "feedback" / student), "self_attention")
            assert found["now"]["effective_due"] == "2030-05-06T12:00:00Z"
    finally:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


def test_the_grader_rewrites_the_files_when_only_a_due_date_changed(course, tmp_path):
    """A due date changed in the formgrader (the gradebook) reaches every student's file at the next check."""
    import logging

    from attention_platform.feedback_on_submit.late_work import LateWork

    exchange = tmp_path / "exchange"
    for student in ("ada", "bo"):
        (exchange / "course101" / "feedback" / student).mkdir(parents=True)
    late_work = LateWork(course, exchange, "course101", db_url(course), logging.getLogger("test"))
    late_work.publish_if_changed()
    for student in ("ada", "bo"):
        found = deadline_file.read(str(exchange / "course101" / "feedback" / student), "multi_head_attention")
        assert found["now"]["effective_due"] == "2030-05-06T12:00:00Z"
    with Gradebook(db_url(course)) as gb:
        gb.update_or_create_assignment("multi_head_attention", duedate=hours(48).replace(tzinfo=None))
    late_work.publish_if_changed()
    for student in ("ada", "bo"):
        found = deadline_file.read(str(exchange / "course101" / "feedback" / student), "multi_head_attention")
        assert found["now"]["effective_due"] == "2030-05-08T12:00:00Z"
        assert deadline_file.read(str(exchange / "course101" / "feedback" / student), "self_attention")["now"][
            "effective_due"] == "2030-05-06T12:00:00Z"


def test_the_students_submit_says_closed_before_handing_in_and_not_before(course, tmp_path):
    """The student's own server reads the grader's file (advisory: the grader judges again)."""
    now = dt.datetime.now(UTC)
    with Gradebook(db_url(course)) as gb:
        gb.update_or_create_assignment("self_attention", duedate=(now - dt.timedelta(hours=1)).replace(tzinfo=None))
    late_policy.save(course, "self_attention", {"kind": "penalty", "penalty_percent": 5, "cutoff_hours": 0.5})
    ExtensionStore(course).grant("self_attention", "bo", now + dt.timedelta(days=1), "flu", "prof", now=now)
    exchange = tmp_path / "exchange"
    for student in ("ada", "bo"):
        (exchange / "course101" / "feedback" / student).mkdir(parents=True)
        (exchange / "course101" / "inbound" / student).mkdir(parents=True)
    publish_all(course, "self_attention", now, db_url=db_url(course), exchange_root=exchange, course_id="course101")

    def refusal(student):  # each student's view of the exchange: their own feedback and inbound folders
        view = tmp_path / "views" / student / "course101"
        view.mkdir(parents=True, exist_ok=True)
        for folder in ("feedback", "inbound"):
            if not (view / folder).exists():
                (view / folder).symlink_to(exchange / "course101" / folder / student)
        return refused_submit(str(view.parent), "course101", "self_attention", str(view / "inbound"), student)

    closed = refusal("ada")
    assert closed is not None and closed.sentence.startswith("Not submitted: this assignment closed to you at ")
    assert closed.to_json()["next_graded_attempt"] is None and "your files are unchanged" in closed.sentence
    assert refusal("bo") is None


@pytest.mark.parametrize("assignment", ["../self_attention", "a/b", ".hidden", ""])
def test_an_assignment_id_that_is_no_plain_name_never_names_a_file(assignment):
    with pytest.raises(ValueError, match="is not an assignment id"):
        deadline_file.filename(assignment)
