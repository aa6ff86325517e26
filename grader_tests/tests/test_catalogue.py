"""The catalogue is the one definition of every graded item, and the code keeps probe and judge apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from grader_tests import catalogue, registry, sandbox_probes
from grader_tests.catalogue import HIDDEN_CHECKS, PARTS

GRADER_TESTS = Path(catalogue.__file__).parent
PROBE_SIDE = {"probing", "sandbox_probes"} | {path.stem for path in GRADER_TESTS.glob("*_probes.py")}
DANGLING = {"a", "an", "and", "are", "as", "at", "by", "for", "from", "in", "is", "of", "or", "the", "to", "with"}
MAX_TITLE = 100  # one table row, one comment line in a feedback page


def whole_sentence(title: str) -> bool:
    words = re.findall(r"[\w']+", title)
    return (title[:1].isupper() and title.endswith(".") and not title.endswith("..") and "…" not in title
            and bool(words) and words[-1].lower() not in DANGLING)


@pytest.mark.parametrize("check", HIDDEN_CHECKS, ids=lambda c: c.id)
def test_titles_are_whole_sentences_that_fit(check):
    assert whole_sentence(check.title), check.title
    assert len(check.title) <= MAX_TITLE, f"{len(check.title)} characters"
    assert check.misconception and len(check.misconception) <= 60


def test_the_sentence_test_catches_a_title_cut_short():
    assert not whole_sentence("with causal=True nothing above the diagonal is seen, the diagonal is")
    assert not whole_sentence("With causal=True nothing above the diagonal is seen, the diagonal is.")
    assert whole_sentence("With causal=True a token sees itself and earlier tokens, never later ones.")


def test_every_check_is_bound_once_to_one_probe_and_one_judge():
    assert [check.id for check in registry.ALL_CHECKS] == [check.id for check in HIDDEN_CHECKS]
    assert sorted(entry.id for entry in sandbox_probes.CHECKS) == sorted(check.id for check in HIDDEN_CHECKS)
    for check in registry.ALL_CHECKS:
        assert check.definition in HIDDEN_CHECKS
        assert (check.title, check.points, check.misconception) == (
            check.definition.title, check.definition.points, check.definition.misconception)


def test_notebooks_list_their_checks_in_catalogue_order():
    assert list(registry.NOTEBOOK_CHECKS) == [part.notebook for part in PARTS if part.checks]
    for part in PARTS:
        assert [c.id for c in registry.NOTEBOOK_CHECKS.get(part.notebook, [])] == [c.id for c in part.checks]
        assert all(check.notebook == part.notebook for check in part.checks)
        assert all(answer.notebook == part.notebook for answer in part.written)


def test_totals_add_up():
    assert catalogue.ASSIGNMENT_POINTS == sum(part.points for part in PARTS)
    assert catalogue.ASSIGNMENT_AUTO_POINTS == sum(check.points for check in HIDDEN_CHECKS)
    assert catalogue.ASSIGNMENT_TA_POINTS == sum(answer.points for answer in catalogue.WRITTEN_ANSWERS)


def _grader_tests_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader_tests"):
            found.add(node.module.removeprefix("grader_tests").lstrip(".") or "__init__")
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("grader_tests."))
    return {name.split(".")[0] for name in found}


@pytest.mark.parametrize("module", sorted(PROBE_SIDE))
def test_probe_code_imports_only_probe_code(module):
    """What a probe module imports from grader_tests is shipped into the sandbox with it."""
    assert _grader_tests_imports(GRADER_TESTS / f"{module}.py") <= PROBE_SIDE


def test_probe_replies_carry_no_verdicts():
    """A probe returns what the student's code produced: no booleans it decided, no comparisons."""
    for module in sorted(PROBE_SIDE):
        source = (GRADER_TESTS / f"{module}.py").read_text()
        for forbidden in ("torch.allclose", "torch.equal", "isclose", "= True", "= False", '"ok"', "passed"):
            assert forbidden not in source, f"{module} contains {forbidden!r}"
