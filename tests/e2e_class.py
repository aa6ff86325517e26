"""The end-to-end class: honest catalogue answers plus the submissions that try to
break grading, written as nbgrader's ``submitted/`` tree of a course copy.

``write_class(course)`` writes every submission into a released course (conftest.py's ``released_course``);
``HONEST`` maps each honest student to the catalogue answer it submits; ``graded_copy`` gives a test
its own copy of the class as one ``nbgrader autograde`` graded it (tests/conftest.py's
``autograded_e2e_class``, graded once per run). Shared by tests/grading/test_autograde_e2e.py (scores,
feedback) and tests/reporting/test_report.py (the report and exports of the same class)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat

from attention_platform.course.directory import write_submission
from grader_tests.self_attention.answers import ASSIGNMENT, BUGGY, CORRECT, NOTEBOOK, with_answer
from grader_tests.registry import GRADE_ID_PREFIX, assignment

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

ANSWERS = {answer.name: answer for answer in BUGGY + CORRECT}
CORE_CHECKS = NOTEBOOK_CHECKS["self_attention"]
HONEST = {
    "ref": "reference_style",
    "warns": "warns_and_prints_to_stderr",
    "sdpa": "scaled_dot_product_attention",
    "noscale": "no_scale",
    "masklate": "mask_after_softmax",
    "inverted": "inverted_mask",
    "vkeys": "values_are_keys",
    "inplace": "input_overwritten_through_data",
}
# the other submissions and the checks each must fail when graded from the instructor's cells
TAMPERED_FAILS = set()  # correct answer: edits and deletions of check cells change nothing
CHEATER_FAILS = {"sqrt_d_scale"}  # replaced checks are restored, so its bug is still caught
UNREADABLE = ("notjson", "nocells")


def cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def tampered(release):
    """Correct answer, but check cells edited, re-pointed and deleted."""
    nb = with_answer(release, ANSWERS["reference_style"].code)
    cell(nb, "check_sqrt_d_scale").source = "print('trust me')"
    cell(nb, "check_shapes").metadata.nbgrader["points"] = 100
    cell(nb, "check_gradients").metadata.nbgrader["grade"] = False
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "check_softmax_dim"]
    return nb


def cheater(release):
    """A wrong answer whose check cells were replaced by code that always passes."""
    nb = with_answer(release, ANSWERS["no_scale"].code)
    for check in CORE_CHECKS:
        cell(nb, GRADE_ID_PREFIX + check.id).source = "pass"
    return nb


def write_class(course: Path) -> None:
    """Write the whole class's submissions in ``course``, whose assignment is generated."""
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    for student, answer in HONEST.items():
        write_submission(course, student, with_answer(release, ANSWERS[answer].code), assignment=ASSIGNMENT,
                         name=NOTEBOOK)
    write_submission(course, "empty", release, assignment=ASSIGNMENT, name=NOTEBOOK)
    write_submission(course, "tampered", tampered(release), assignment=ASSIGNMENT, name=NOTEBOOK)
    write_submission(course, "cheater", cheater(release), assignment=ASSIGNMENT, name=NOTEBOOK)
    write_submission(course, "notjson", b'{"cells": [ this is not json', assignment=ASSIGNMENT, name=NOTEBOOK)
    write_submission(course, "nocells", json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}),
                     assignment=ASSIGNMENT, name=NOTEBOOK)


def graded_copy(autograded_class: tuple, dest: Path):
    """``dest``: a copy of the graded course of ``autograded_class`` (the course and its autograde's
    completed process), for a test that writes to it (feedback, exports); and that process."""
    course, autograde = autograded_class
    shutil.copytree(course, dest, symlinks=True)
    return dest, autograde
