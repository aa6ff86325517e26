"""The formgrader's Autograde all (attention_platform/formgrader/autograde_all.py): the batch grader
in a process of its own, followed from its progress lines. A real batch over a small class with one
file that is no notebook, in real sandboxes; the page's side is tests/e2e/test_browser_e2e.py."""

from __future__ import annotations

import os
import time

import nbformat
import pytest

from attention_platform.course.directory import write_submission
from attention_platform.formgrader import autograde_all
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK, with_answer
from gradebooks import ANSWERS

pytestmark = [pytest.mark.slow, pytest.mark.root]  # the batch's own sandbox zygote needs root


def _released_course(tmp_path_factory, released_course, name: str, submissions: dict):
    """A course of the core notebook alone, released, with ``submissions`` ({student: release -> notebook or
    the text of a broken file}) filed as collect does."""
    if os.geteuid() != 0:
        pytest.skip("the batch's own sandbox zygote needs root (CI is root)")
    course = released_course(tmp_path_factory.mktemp(name) / "course", ASSIGNMENT, notebooks=[NOTEBOOK])
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    for student, make in submissions.items():
        write_submission(course, student, make(release), assignment=ASSIGNMENT, name=NOTEBOOK)
    return course


def _followed(run, timeout: float = 900) -> list[dict]:
    """Every state of ``run`` seen while it runs, polled as the page does (faster)."""
    seen, deadline = [run.snapshot()], time.monotonic() + timeout
    while seen[-1]["state"] == autograde_all.RUNNING and time.monotonic() < deadline:
        time.sleep(0.1)
        seen.append(run.snapshot())
    return seen


def test_autograde_all_shows_progress_then_each_outcome_once_per_assignment(tmp_path_factory, released_course):
    reference = lambda release: with_answer(release, ANSWERS["reference_style"].code)  # noqa: E731
    course = _released_course(tmp_path_factory, released_course, "autograde-all",
                              {"ada": reference, "bob": reference, "eve": lambda release: "{ not a notebook"})

    run, started = autograde_all.start(str(course), ASSIGNMENT)
    same, started_again = autograde_all.start(str(course), ASSIGNMENT)  # a second click
    assert started and not started_again and same is run
    seen = _followed(run)
    final = seen[-1]
    assert final["state"] == autograde_all.DONE, final
    assert final["done"] == final["total"] == 3
    assert any(s["grading"] and set(s["grading"]) <= {"ada", "bob"} for s in seen), "whose notebooks are graded now"
    done = [s["done"] for s in seen]
    assert done == sorted(done)
    outcomes = {o["student"]: o for o in final["outcomes"]}
    assert set(outcomes) == {"ada", "bob", "eve"}
    for student in ("ada", "bob"):
        assert outcomes[student]["status"] == "ok" and outcomes[student]["advice"] == ""
        assert outcomes[student]["score"] == outcomes[student]["max_score"] > 0
    assert outcomes["eve"]["status"].startswith("rejected: not JSON")  # the broken file costs its owner only
    assert "ask the student to submit again" in outcomes["eve"]["advice"]
    assert autograde_all.latest(str(course), ASSIGNMENT) is run


def test_nothing_collected_is_refused_saying_what_to_do_first(tmp_path_factory, released_course):
    course = _released_course(tmp_path_factory, released_course, "autograde-all-empty", {})
    run, started = autograde_all.start(str(course), ASSIGNMENT)
    final = _followed(run)[-1]
    assert started and final["state"] == autograde_all.REFUSED, final
    assert "collect them first" in final["reason"] and final["outcomes"] == []
