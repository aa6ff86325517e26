"""The sandboxed grading path gives the in-kernel path's grades.

Every answer of the proven catalogues (``grader_tests.answers``: each buggy
answer fails exactly its documented checks, every correct idiom passes all)
graded through ``grade_notebook`` -- student cells and probes in a sandbox,
judges here -- must fail exactly the same checks, with the same teaching
messages as ``Check.run_in_process`` (the stock kernel path) produces.
"""

from __future__ import annotations

import pytest

from attention_platform.notebooks import class_namespace, release_notebook, with_answer
from attention_platform.sandbox import SandboxLimits, Zygote
from attention_platform.sandbox.grading import grade_notebook, probe_payload, seed_function
from grader_tests.answers import BUGGY, CORRECT
from grader_tests.registry import CHECKS

LIMITS = SandboxLimits(cell_timeout=20, notebook_timeout=60)


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


@pytest.mark.parametrize("answer", BUGGY + CORRECT, ids=lambda a: a.name)
def test_same_verdicts_and_messages_as_the_kernel_path(zygote, answer):
    nb = with_answer(release_notebook(), answer.code)
    result = grade_notebook(nb, zygote=zygote, limits=LIMITS)
    assert result.stopped is None
    assert {c.check_id for c in result.checks.values() if not c.passed} == set(answer.fails)
    namespace = class_namespace(with_answer(release_notebook(), answer.code))
    for check_id, outcome in result.checks.items():
        verdict = CHECKS[check_id].run_in_process(namespace)
        assert (outcome.passed, outcome.message) == (verdict.passed, verdict.message), check_id


def test_check_cells_get_the_kernel_output_shapes(zygote):
    nb = with_answer(release_notebook(), next(a for a in BUGGY if a.name == "no_scale").code)
    grade_notebook(nb, zygote=zygote, limits=LIMITS)
    outputs = {c.metadata.nbgrader["grade_id"]: c.outputs for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade", False)}
    assert outputs["check_shapes"][0]["output_type"] == "stream"
    assert outputs["check_shapes"][0]["text"].startswith("✓ Passed: ")
    failed = outputs["check_sqrt_d_scale"][0]
    assert failed["output_type"] == "error" and failed["ename"] == "CheckFailed"
    assert failed["traceback"] == [f"CheckFailed: {failed['evalue']}"]


def test_a_secret_seed_changes_the_inputs_not_the_verdicts(zygote):
    answer = next(a for a in BUGGY if a.name == "inverted_mask")
    result = grade_notebook(with_answer(release_notebook(), answer.code), zygote=zygote, limits=LIMITS,
                            seed_for=seed_function("course-secret"))
    assert {c.check_id for c in result.checks.values() if not c.passed} == set(answer.fails)


def test_the_probe_payload_holds_no_reference_and_no_answers():
    payload = probe_payload()
    names = {name for name, _ in payload["modules"]}
    assert "grader_tests.reference" not in names and "grader_tests.reference" in payload["stubs"]
    assert not names & {"grader_tests.answers", "grader_tests.registry", "grader_tests.kernel"}
    assert "grader_tests.self_attention_checks" in payload["checks_modules"]
