"""What Validate says (attention_platform/course/validation.py), on the released notebooks.

nbgrader's own Validate said "Success! Your notebook passes all the tests" for an untouched
notebook and for an answer without √D: the hidden checks are not in the student's copy. Ours
names every answer still to do and every cell that raises, and never claims a check passed.
"""

from __future__ import annotations

import nbformat
import pytest

from grader_tests.self_attention.answers import release_notebook
from attention_platform.course.validation import (HIDDEN_CHECKS_NOTE, NO_PUBLIC_CHECKS_NOTE, READY, PublicCheck,
                                                  ValidationReport, validate_file)
from grader_tests.self_attention.answers import BUGGY, CORRECT, NOTEBOOKS, with_answer

NO_SCALE = next(a for a in BUGGY if a.name == "no_scale").code


def solution_cells(nb):
    return [i + 1 for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")]


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_an_untouched_notebook_names_every_answer_still_to_do(notebook):
    nb = release_notebook(notebook=notebook)
    report = ValidationReport.from_notebooks(nb, None, notebook)
    assert not report.ok
    assert [p.cell for p in report.problems] == solution_cells(nb)
    assert all(p.kind == "unanswered" for p in report.problems)
    assert "Not ready yet" in report.headline and "passes" not in report.text()


def test_the_core_notebook_names_the_two_methods():
    report = ValidationReport.from_notebooks(release_notebook(), None, "self_attention.ipynb")
    (problem,) = report.problems
    assert "SelfAttention.forward and SelfAttention.attention_weights still raise NotImplementedError" in problem.text
    assert "class SelfAttention" in problem.where


def test_an_answer_without_sqrt_d_is_not_called_correct():
    report = ValidationReport.from_notebooks(with_answer(release_notebook(), NO_SCALE), None, "self_attention.ipynb")
    assert report.ok and report.headline == READY
    assert "hidden checks run after you submit" in report.headline
    assert "no check ran, not even the public ones" in report.to_json()["note"] == NO_PUBLIC_CHECKS_NOTE  # a kernel's run
    report.public_checks = []  # the validate service's run of a notebook without public checks
    assert report.ok and "does not run the hidden checks" in report.to_json()["note"] == HIDDEN_CHECKS_NOTE


def test_a_failing_public_check_is_named_with_its_message_and_the_notebook_is_not_ready():
    report = ValidationReport.from_notebooks(with_answer(release_notebook(), NO_SCALE), None, "self_attention.ipynb")
    report.public_checks = [PublicCheck("Shapes are right.", True, ""),
                            PublicCheck("Rows sum to 1.", False, "Row 0 of your weights sums to 2.5, not 1.")]
    shown = report.to_json()
    assert not shown["ok"] and shown["headline"] == "Not ready yet: 1 public check failing."
    assert [c["text"] for c in shown["public_checks"]] == ["✓ Shapes are right.",
                                                           "✗ Rows sum to 1. Row 0 of your weights sums to 2.5, not 1."]
    report.public_checks = report.public_checks[:1]
    assert report.ok and report.headline == READY and report.to_json()["public_checks"][0]["text"] == "✓ Shapes are right."


def test_a_cell_that_raises_is_named_with_its_error():
    nb = with_answer(release_notebook(), CORRECT[0].code)
    executed = nbformat.from_dict(nb)
    try_it = next(i for i, c in enumerate(executed.cells) if c.cell_type == "code" and "layer = SelfAttention(8)" in c.source)
    executed.cells[try_it].outputs = [nbformat.v4.new_output("error", ename="RuntimeError", evalue="shapes do not match\nmore",
                                                              traceback=[])]
    report = ValidationReport.from_notebooks(nb, executed, "self_attention.ipynb")
    (problem,) = report.problems
    assert (problem.cell, problem.kind) == (try_it + 1, "raises")
    assert "RuntimeError: shapes do not match" in problem.text and "more" not in problem.text


def test_a_stub_called_from_a_try_it_cell_is_reported_once():
    nb = release_notebook()
    executed = nbformat.from_dict(nb)
    for cell in executed.cells:
        if cell.cell_type == "code" and "layer = SelfAttention(8)" in cell.source:
            cell.outputs = [nbformat.v4.new_output("error", ename="NotImplementedError", evalue="", traceback=[])]
    report = ValidationReport.from_notebooks(nb, executed, "self_attention.ipynb")
    assert [p.kind for p in report.problems] == ["unanswered"]


@pytest.mark.slow
def test_validate_runs_the_notebook_in_a_kernel(tmp_path):
    path = tmp_path / "self_attention.ipynb"
    nbformat.write(release_notebook(), path)
    report = validate_file(str(path))
    assert report.ran and [p.kind for p in report.problems] == ["unanswered"]
    nbformat.write(with_answer(release_notebook(), NO_SCALE), path)
    assert validate_file(str(path)).headline == READY


def test_a_notebook_too_complex_to_validate_is_said_so_before_it_is_read_whole(tmp_path):
    """The student's own server reads the notebook before anything runs it (in a kernel or through the
    validate service): one holding 100,000 empty objects in its metadata (3 bytes each, a dict each once
    parsed) is refused with the bound it is over, and nothing is run."""
    path = tmp_path / "bomb.ipynb"
    path.write_text('{"cells": [], "metadata": {"x": [' + "{}," * 99_999 + '{}]}, "nbformat": 4, "nbformat_minor": 5}')
    report = validate_file(str(path))
    assert not report.ran and not report.ok
    assert report.headline == ("Validate could not run bomb.ipynb: it is too large or complex to validate (the notebook "
                               "holds 100,004 objects and lists, more than the 50,000 allowed)"), report.headline
