"""attention_platform/course/settings.py, attention_platform/venv.py, attention_platform/console.py
and the demo class of attention_platform/hub/native.py: read when asked, never at import."""

import io
import re
from pathlib import Path

import pytest

from attention_platform.console import track
from attention_platform.course.settings import DEFAULT_COURSE_ID, course_id
from attention_platform.hub.native import DemoClass, grader_account, instructors_group
from attention_platform.venv import environment, program

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("environ, expected", [
    ({}, DEFAULT_COURSE_ID),
    ({"NBGRADER_COURSE_ID": ""}, DEFAULT_COURSE_ID),
    ({"NBGRADER_COURSE_ID": "ml-2027"}, "ml-2027"),
])
def test_course_id(environ, expected):
    assert course_id(environ) == expected


def test_course_id_follows_the_environment_after_import(monkeypatch):
    monkeypatch.setenv("NBGRADER_COURSE_ID", "renamed-course")
    assert course_id() == "renamed-course"
    assert grader_account(course_id()) == "renamed-course-grader"
    assert instructors_group(course_id()) == "renamed-course-instructors"


def test_the_student_images_config_repeats_the_same_default():
    # it cannot import our package (the student image carries a few modules of it only)
    text = (REPO / "jupyter_config" / "student" / "nbgrader_config.py").read_text()
    (default,) = re.findall(r'os\.environ\.get\("NBGRADER_COURSE_ID", "([^"]+)"\)', text)
    assert default == DEFAULT_COURSE_ID


@pytest.mark.parametrize("environ, instructors, tas, students", [
    ({}, ("instructor",), ("ta",), ("student1", "student2", "student3")),
    ({"HUB_DEMO_STUDENTS": "1"}, ("instructor",), ("ta",), ("student1",)),
    ({"HUB_DEMO_PREFIX": "load-", "HUB_DEMO_STUDENTS": "2"}, ("load-instructor",), ("load-ta",),
     ("load-student1", "load-student2")),
])
def test_demo_class_from_the_environment(environ, instructors, tas, students):
    demo = DemoClass.from_environment(environ)
    assert (demo.instructors, demo.tas, demo.students) == (instructors, tas, students)
    assert demo.accounts == instructors + tas + students
    assert [demo.role(n) for n in (instructors[0], tas[0], students[-1])] == [
        "instructor (hub admin)", "teaching assistant", "student"]


def test_venv_programs_and_path():
    nbgrader = Path(program("nbgrader"))
    assert nbgrader.is_file() and nbgrader.parent == Path(program("python")).parent
    env = environment({"PATH": "/usr/bin", "KEEP": "1"}, EXTRA="2")
    assert env["PATH"].split(":")[:2] == [str(nbgrader.parent), "/usr/bin"]
    assert (env["KEEP"], env["EXTRA"]) == ("1", "2")


def test_progress_bar_yields_every_item_and_reports_the_total():
    stream = io.StringIO()
    assert list(track(iter("abcd"), 4, "reading", stream=stream)) == list("abcd")
    assert "reading" in stream.getvalue() and "4/4" in stream.getvalue()


@pytest.mark.parametrize("config", ["jupyter_config/grader/nbgrader_config.py", "jupyter_config/student/nbgrader_config.py"])
def test_every_exchange_class_the_hub_configs_name_exists(config):
    """nbgrader's ExchangeFactory takes import strings (its documented idiom); a typo would only
    fail when a student first fetches or a TA collects, so resolve each one here."""
    import importlib

    from nbgrader.exchange import abc as exchange_abc

    named = re.findall(r'^c\.ExchangeFactory\.(\w+) = "([\w.]+)"', (REPO / config).read_text(), re.MULTILINE)
    assert named
    for action, dotted in named:
        module, _, name = dotted.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        base = {"release_assignment": exchange_abc.ExchangeReleaseAssignment, "collect": exchange_abc.ExchangeCollect,
                "release_feedback": exchange_abc.ExchangeReleaseFeedback, "list": exchange_abc.ExchangeList,
                "submit": exchange_abc.ExchangeSubmit, "fetch_assignment": exchange_abc.ExchangeFetchAssignment,
                "fetch_feedback": exchange_abc.ExchangeFetchFeedback}[action]
        assert issubclass(cls, base), (action, dotted)
