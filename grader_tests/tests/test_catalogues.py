"""Every assignment's catalogue is the one definition of its graded items, and its code keeps probe and
judge apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import importlib

from grader_tests import catalogue, discovery, registry

GRADER_TESTS = Path(catalogue.__file__).parent
ASSIGNMENTS = sorted(registry.ASSIGNMENTS)
HIDDEN_CHECKS = [check.definition for check in registry.ALL_CHECKS]
# Probe-side modules: the shared probing, and each assignment's probes and *_probes modules.
PROBE_SIDE = {GRADER_TESTS / "probing.py"} | {path for name in ASSIGNMENTS for path in (GRADER_TESTS / name).glob("*.py")
                                              if path.stem == "probes" or path.stem.endswith("_probes")}
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


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_check_is_bound_once_to_one_probe_and_one_judge(name):
    found = registry.assignment(name)
    probes = importlib.import_module(discovery.module_name(name, discovery.PROBES))
    definitions = [check for part in found.parts for check in part.checks]
    assert [check.id for check in found.checks] == [check.id for check in definitions]
    assert sorted(entry.id for entry in probes.CHECKS) == sorted(check.id for check in definitions)
    for check in found.checks:
        assert check.definition in definitions
        assert (check.title, check.points, check.misconception) == (
            check.definition.title, check.definition.points, check.definition.misconception)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_notebooks_list_their_checks_in_catalogue_order(name):
    found = registry.assignment(name)
    assert list(found.notebook_checks) == [part.notebook for part in found.parts if part.checks]
    assert [part.number for part in found.parts] == list(range(1, len(found.parts) + 1))
    for part in found.parts:
        assert [c.id for c in found.notebook_checks.get(part.notebook, [])] == [c.id for c in part.checks]
        assert all(check.notebook == part.notebook for check in part.checks)
        assert all(answer.notebook == part.notebook for answer in part.written)


def _grader_tests_imports(path: Path) -> set[Path]:
    """The files of grader_tests that ``path`` imports (relative imports resolved)."""
    package = path.parent
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.parents[node.level - 2] if node.level > 1 else package
            names = [node.module] if node.module else [alias.name for alias in node.names]
            found.update(base.joinpath(*name.split(".")).with_suffix(".py") for name in names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader_tests"):
            found.add(GRADER_TESTS.joinpath(*node.module.split(".")[1:]).with_suffix(".py"))
        elif isinstance(node, ast.Import):
            found.update(GRADER_TESTS.joinpath(*a.name.split(".")[1:]).with_suffix(".py") for a in node.names
                         if a.name.startswith("grader_tests."))
    return {file for file in found if file.is_file()}


@pytest.mark.parametrize("module", sorted(PROBE_SIDE), ids=lambda p: str(p.relative_to(GRADER_TESTS)))
def test_probe_code_imports_only_probe_code(module):
    """What a probe module imports from grader_tests is shipped into the sandbox with it."""
    assert _grader_tests_imports(module) <= PROBE_SIDE


def test_probe_replies_carry_no_verdicts():
    """A probe returns what the student's code produced: no booleans it decided, no comparisons."""
    for module in sorted(PROBE_SIDE):
        source = module.read_text()
        for forbidden in ("torch.allclose", "torch.equal", "isclose", "= True", "= False", '"ok"', "passed"):
            assert forbidden not in source, f"{module} contains {forbidden!r}"
