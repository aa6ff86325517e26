"""The quality gate: every check passes the reference, fails the bug it exists
for (and exactly the documented set of checks fails), and passes correct
answers written in other idioms."""

import pytest
import torch

from grader_tests.self_attention.answers import class_namespace, source_notebook
from grader_tests.self_attention import reference
from grader_tests.self_attention.answers import BUGGY, CORRECT
from grader_tests.registry import assignment

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

# This file proves the core notebook's checks; the further parts have test_parts_checks.py.
ALL_CHECKS = NOTEBOOK_CHECKS["self_attention"]
CHECKS = {check.id: check for check in ALL_CHECKS}

EXTRA_SEEDS = [11, 2024, 987654]  # the sandboxed grader draws fresh seeds; checks must not depend on ours


def failing_checks(namespace, seed=None):
    return {check.id: verdict.message for check in ALL_CHECKS
            if not (verdict := check.run_in_process(namespace, seed)).passed}


def test_catalogues_are_large_enough():
    assert len(BUGGY) >= 25
    assert len(CORRECT) >= 15
    assert len({a.name for a in BUGGY + CORRECT}) == len(BUGGY) + len(CORRECT)


def test_every_check_has_a_bug_it_exists_for():
    targets = {answer.target for answer in BUGGY}
    assert targets == set(CHECKS), f"checks without a bug: {set(CHECKS) - targets}"


def test_instructor_solution_passes_every_check():
    namespace = class_namespace(source_notebook())
    for seed in [None, *EXTRA_SEEDS]:
        assert failing_checks(namespace, seed) == {}


class _ReferenceLayer(torch.nn.Module):
    """grader_tests.reference wrapped in the graded API, to prove it against the checks."""

    def __init__(self, embedding_dim, *, causal=True):
        super().__init__()
        self.causal = causal
        for name in reference.PROJECTIONS:
            setattr(self, name, torch.nn.Linear(embedding_dim, embedding_dim))

    def _params(self):
        return dict(self.named_parameters())

    def attention_weights(self, x):
        return reference.attention_weights(self._params(), x, self.causal)

    def forward(self, x):
        return reference.forward(self._params(), x, self.causal)


def test_reference_module_passes_every_check():
    assert failing_checks({"SelfAttention": _ReferenceLayer}) == {}


@pytest.mark.parametrize("answer", CORRECT, ids=lambda a: a.name)
def test_correct_idiom_passes_every_check(answer, namespace_for, quiet):
    namespace = namespace_for(answer.code)
    with quiet():
        for seed in [None, *EXTRA_SEEDS]:
            assert failing_checks(namespace, seed) == {}, f"seed {seed}"


@pytest.mark.parametrize("answer", BUGGY, ids=lambda a: a.name)
def test_bug_is_caught_by_its_check(answer, namespace_for, quiet):
    namespace = namespace_for(answer.code)
    with quiet():
        failed = failing_checks(namespace)
        assert answer.target in failed
        assert set(failed) == set(answer.fails)
        for seed in EXTRA_SEEDS:
            assert answer.target in failing_checks(namespace, seed), f"seed {seed}"


# Seeds a course secret may draw; 207388624 once made mask_polarity blame a softmax over the queries
# (its first weight happened to be tiny) and let unnormalised scores through (their first score was positive).
SECRET_LIKE_SEEDS = [207388624, 1695753998]


@pytest.mark.parametrize("answer", BUGGY, ids=lambda a: a.name)
def test_fail_sets_do_not_depend_on_the_seed(answer, namespace_for, quiet):
    namespace = namespace_for(answer.code)
    with quiet():
        for seed in SECRET_LIKE_SEEDS:
            assert set(failing_checks(namespace, seed)) == set(answer.fails), f"seed {seed}"


@pytest.mark.parametrize("answer", BUGGY, ids=lambda a: a.name)
def test_failure_message_teaches_without_leaking(answer, namespace_for, quiet):
    namespace = namespace_for(answer.code)
    with quiet():
        message = CHECKS[answer.target].run_in_process(namespace).message
    assert len(message) > 40
    for leak in ("grader_tests", "reference.", "Traceback", "JudgeFailure", "request[", "response["):
        assert leak not in message


def test_unanswered_release_fails_every_check_with_the_stub_message(release_nb):
    namespace = class_namespace(release_nb)
    failed = failing_checks(namespace)
    assert set(failed) == set(CHECKS)
    assert "NotImplementedError" in failed["sqrt_d_scale"]


def test_missing_class_is_reported_not_raised():
    failed = failing_checks({})
    assert set(failed) == set(CHECKS)
    assert all("SelfAttention" in message for message in failed.values())


TRANSPOSED_TEXT = "Your scores are transposed: row i should hold query i's scores against every key"
VIEW_TEXT = "`view` reinterprets memory; use `transpose`"
PAIRING_TEXTS = {"einsum_output_transposed": TRANSPOSED_TEXT, "keys_times_queries": TRANSPOSED_TEXT,
                 "keys_times_queries_unscaled": TRANSPOSED_TEXT, "queries_permuted": TRANSPOSED_TEXT,
                 "scores_permuted_afterwards": TRANSPOSED_TEXT, "keys_reshaped": VIEW_TEXT, "keys_viewed": VIEW_TEXT,
                 "keys_viewed_in_bmm": VIEW_TEXT}


def test_every_pairing_bug_has_its_expected_text():
    assert set(PAIRING_TEXTS) == {answer.name for answer in BUGGY if answer.target == "score_pairing"}


@pytest.mark.parametrize("answer", [a for a in BUGGY if a.target == "score_pairing"], ids=lambda a: a.name)
def test_score_pairing_names_the_misconception(answer, namespace_for, quiet):
    """Transposed scores and a key cut out of memory by view/reshape each get their own words, at every seed."""
    namespace = namespace_for(answer.code)
    with quiet():
        for seed in [None, *EXTRA_SEEDS]:
            assert PAIRING_TEXTS[answer.name] in CHECKS["score_pairing"].run_in_process(namespace, seed).message
