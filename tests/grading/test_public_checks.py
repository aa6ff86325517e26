"""Public checks at Validate: the validate service runs the checks an assignment's catalogue marks
public (``HiddenCheck.public``), as grading runs them, and answers their titles and verdicts; the
student's server reads that answer into the Validate report.

The service's own ``validate`` runs here, in this process, with a real sandbox (root), and its
answer goes through the client's reading of it (``warm_validate.public_checks_in``) into the report
the Lab shows (``ValidationReport.to_json``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.course.validation import ValidationReport
from attention_platform.grading.validate_service import ValidateService
from attention_platform.lab.warm_validate import public_checks_in
from grader_tests.proofs import solved
from grader_tests.registry import ALL_CHECKS, ASSIGNMENTS, CHECKS
from grader_tests.self_attention.answers import BUGGY, class_cell, class_namespace, release_notebook, with_answer

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox needs root (CI is root)")]

NO_SOFTMAX = next(answer for answer in BUGGY if answer.name == "no_softmax")  # rows that do not sum to 1
HIDDEN_TITLES = [check.title for check in ALL_CHECKS if not check.definition.public]


@pytest.fixture(scope="module")
def service():
    return ValidateService(COURSE_ROOT, Path("/nonexistent/validate.sock"), (1000, 1000))


def validated(service, nb, name: str = "self_attention.ipynb") -> tuple[dict, dict]:
    """The service's answer to a Validate of ``nb`` (without the notebook), and the report built from it."""
    request = {"op": "validate", "name": name, "notebook": nbformat.writes(nb), "files": []}
    reply = service.validate(1000, request)
    assert reply["op"] == "executed", reply
    executed = nbformat.reads(reply.pop("notebook"), as_version=4)
    report = ValidationReport.from_notebooks(nb, executed, name)
    report.public_checks = public_checks_in(reply)
    return reply, report.to_json()


def test_a_failing_public_check_yields_its_catalogue_title_and_the_judges_message(service):
    nb = with_answer(release_notebook(), NO_SOFTMAX.code)
    reply, report = validated(service, nb)
    softmax = CHECKS["softmax_dim"]
    expected = softmax.run_in_process(class_namespace(nb))  # the kernel path's verdict: the same judge
    assert not expected.passed and expected.message
    assert reply["public_checks"] == [{"title": CHECKS["shapes"].title, "passed": True, "message": ""},
                                      {"title": softmax.title, "passed": False, "message": expected.message}]
    assert report["ok"] is False
    assert report["headline"] == "Not ready yet: 1 public check failing."
    assert [c["text"] for c in report["public_checks"]] == [f"✓ {CHECKS['shapes'].title}",
                                                            f"✗ {softmax.title} {expected.message}"]


def test_a_hidden_checks_title_never_appears_in_the_answer(service):
    """A notebook that fails most checks, every check cell of the notebook in it: only the public
    checks run, and no other check's title is in the service's answer or the report."""
    nb = with_answer(release_notebook(), next(a for a in BUGGY if a.name == "softmax_over_batch").code)
    reply, report = validated(service, nb)
    said = json.dumps([reply, report], ensure_ascii=False)
    assert [c["title"] for c in reply["public_checks"]] == [CHECKS["shapes"].title, CHECKS["softmax_dim"].title]
    assert HIDDEN_TITLES and not [title for title in HIDDEN_TITLES if title in said]


def test_a_notebook_printing_a_pass_is_not_believed(service):
    """The notebook prints "✓ Passed: <title>" from its own cell and from the public check's cell
    (whose source it filled in): the verdict is the judge's, and the report says the check fails."""
    nb = with_answer(release_notebook(), NO_SOFTMAX.code)
    title = CHECKS["softmax_dim"].title
    forged = f"print({'✓ Passed: ' + title!r})"
    class_cell(nb).source += "\n" + forged + "\n"
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "check_softmax_dim":
            cell.source = forged
    reply, report = validated(service, nb)
    assert [c["passed"] for c in reply["public_checks"]] == [True, False]
    assert report["ok"] is False and "1 public check failing" in report["headline"]
    assert f"✗ {title}" in [c["text"][:len(title) + 2] for c in report["public_checks"]]


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_each_assignments_public_checks_pass_on_its_solution(service, name):
    """Every assignment: its main notebook answered as the instructor would passes exactly the
    public checks its catalogue marks, in the notebook's order."""
    found = ASSIGNMENTS[name]
    notebook = found.notebooks[0]
    nb = solved(nbformat.read(COURSE_ROOT / "release" / name / f"{notebook}.ipynb", as_version=4),
                nbformat.read(COURSE_ROOT / "source" / name / f"{notebook}.ipynb", as_version=4))
    reply, report = validated(service, nb, f"{notebook}.ipynb")
    public = [check.title for check in found.notebook_checks[notebook] if check.definition.public]
    assert len(public) >= 2
    assert reply["public_checks"] == [{"title": title, "passed": True, "message": ""} for title in public]
    assert report["ok"] is True and [c["text"] for c in report["public_checks"]] == [f"✓ {title}" for title in public]
