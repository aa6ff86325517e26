"""The proofs of the multi-head attention checks: the instructor's notebook passes every check at
several seeds, every wheat passes them all, every chaff fails exactly its set (at fresh seeds
too) with a teaching message, every check has a chaff, and the release fails every check
with the stub's message."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import nbformat
import pytest

from grader_tests.multi_head_attention import catalogue
from grader_tests.proofs import run_cells
from grader_tests.registry import CHECKS as COURSE_CHECKS, assignment

ASSIGNMENT = "multi_head_attention"
COURSE_ROOT = Path(__file__).resolve().parents[3]
EXTRA_SEEDS = [11, 2024, 987654]  # the sandboxed grader draws fresh seeds; checks must not depend on ours


MULTI_HEAD = assignment(ASSIGNMENT)
CHECKS = {check.id: check for check in MULTI_HEAD.checks}
WHEATS, CHAFFS = MULTI_HEAD.wheats, MULTI_HEAD.chaffs


def _notebook(folder: str, notebook: str) -> nbformat.NotebookNode:
    return nbformat.read(COURSE_ROOT / folder / ASSIGNMENT / f"{notebook}.ipynb", as_version=4)


_NAMESPACES: dict = {}


def namespace_of(nb: nbformat.NotebookNode, key) -> dict:
    """The globals of a kernel that ran ``nb``'s cells (check cells left out), computed once per ``key``."""
    if key not in _NAMESPACES:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            _NAMESPACES[key] = run_cells(nb)
    return _NAMESPACES[key]


def failing(namespace: dict, seed: int | None = None) -> dict[str, str]:
    return {check.id: verdict.message for check in CHECKS.values()
            if not (verdict := check.run_in_process(namespace, seed)).passed}


def proof_namespace(proof) -> dict:
    return namespace_of(proof.apply(_notebook("source", proof.notebook)), proof.name)


def test_the_registry_finds_the_assignment_and_its_checks():
    assert MULTI_HEAD.notebooks == ("multi_head_attention", "02_heads_explained")
    assert len(CHECKS) >= 7 and all(COURSE_CHECKS[check_id].assignment == ASSIGNMENT for check_id in CHECKS)
    assert (MULTI_HEAD.auto_points, MULTI_HEAD.ta_points) == (17, 4)


@pytest.mark.parametrize("seed", [None, *EXTRA_SEEDS])
def test_instructor_solution_passes_every_check(seed):
    assert failing(namespace_of(_notebook("source", catalogue.LAYER_NOTEBOOK), "source"), seed) == {}


def test_the_catalogues_are_large_enough():
    assert len(WHEATS) >= 6
    assert len({proof.name for proof in WHEATS + CHAFFS}) == len(WHEATS) + len(CHAFFS)


def test_every_check_has_a_chaff_it_exists_for():
    assert {proof.target for proof in CHAFFS} == set(CHECKS)


@pytest.mark.parametrize("proof", WHEATS, ids=lambda proof: proof.name)
def test_wheat_passes_every_check(proof):
    namespace = proof_namespace(proof)
    for seed in [None, *EXTRA_SEEDS]:
        assert failing(namespace, seed) == {}, f"seed {seed}"


@pytest.mark.parametrize("proof", CHAFFS, ids=lambda proof: proof.name)
def test_chaff_fails_exactly_its_set(proof):
    namespace = proof_namespace(proof)
    failed = failing(namespace)
    assert set(failed) == set(proof.fails)
    for seed in EXTRA_SEEDS:
        assert set(failing(namespace, seed)) == set(proof.fails), f"seed {seed}"
    message = failed[proof.target]
    assert len(message) > 40
    for leak in ("grader_tests", "reference.", "Traceback", "JudgeFailure", "request[", "response["):
        assert leak not in message


def test_release_fails_every_check_with_the_stub_message():
    failed = failing(namespace_of(_notebook("release", catalogue.LAYER_NOTEBOOK), "release"))
    assert set(failed) == set(CHECKS)
    assert all("NotImplementedError" in message for message in failed.values()), failed


def test_missing_class_is_named_not_raised():
    failed = failing({})
    assert set(failed) == set(CHECKS)
    assert all("there is no class named MultiHeadSelfAttention" in message for message in failed.values()), failed


def test_heads_that_do_not_divide_the_embedding_are_refused_with_a_clear_error():
    layer_class = namespace_of(_notebook("release", catalogue.LAYER_NOTEBOOK), "release")["MultiHeadSelfAttention"]
    with pytest.raises(ValueError, match="num_heads must divide embedding_dim.*12 entries.*5 heads"):
        layer_class(12, 5)
