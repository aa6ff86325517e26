"""The quality gate of the further parts' checks (notebooks 02–05): the instructor
solution passes every check of its notebook, each buggy answer fails exactly its
documented set (including its target, for fresh seeds too), every correct idiom
passes, the release fails everything with a helpful message, and the published
numbers the by-hand checks use follow from their inputs."""

from __future__ import annotations

import contextlib
import io
import math
import os
import warnings

import pytest
import torch

from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests.proofs import run_cells, with_edits
from grader_tests.self_attention.answers import ASSIGNMENT, release_notebook, source_notebook
from grader_tests.self_attention import by_hand_judges, head_judges
from grader_tests.self_attention.answers_parts import BUGGY, CORRECT
from grader_tests.registry import CHECKS, assignment

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

PARTS = [name for name in NOTEBOOK_CHECKS if name != "self_attention"]
EXTRA_SEEDS = [11, 2024, 987654]
# Cells that only plot or time: no check reads what they define, and skipping them keeps the proofs fast.
# (The end-to-end test runs them all under nbgrader.)
PLOT_ONLY = frozenset({"heatmaps", "timing", "params_table", "bars_demo", "trace_compare"})


@contextlib.contextmanager
def _student_run():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cwd = os.getcwd()
    threads = torch.get_num_threads()
    os.chdir(COURSE_ROOT / "source" / ASSIGNMENT)  # the notebooks read data/corpus.txt
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        os.chdir(cwd)
        plt.close("all")
        torch.set_num_threads(threads)


_CACHE: dict = {}


def namespace(notebook: str, edits=(), *, release=False) -> dict:
    key = (notebook, tuple(edits), release)
    if key not in _CACHE:
        nb = release_notebook(notebook=notebook + ".ipynb") if release else source_notebook(notebook=notebook + ".ipynb")
        with _student_run():
            _CACHE[key] = run_cells(with_edits(nb, edits), skip=PLOT_ONLY)
    return _CACHE[key]


def failing(notebook: str, ns: dict, seed=None) -> dict[str, str]:
    with _student_run():
        return {c.id: v.message for c in NOTEBOOK_CHECKS[notebook] if not (v := c.run_in_process(ns, seed)).passed}


def test_catalogue_covers_every_part_check():
    ids = {c.id for part in PARTS for c in NOTEBOOK_CHECKS[part]}
    assert {a.target for a in BUGGY} == ids, f"checks without a bug: {ids - {a.target for a in BUGGY}}"
    assert {a.notebook for a in CORRECT} == set(PARTS)
    assert len({a.name for a in BUGGY + CORRECT}) == len(BUGGY) + len(CORRECT)
    for answer in BUGGY:
        assert answer.fails <= {c.id for c in NOTEBOOK_CHECKS[answer.notebook]}


@pytest.mark.parametrize("notebook", PARTS)
def test_instructor_solution_passes_every_check(notebook):
    ns = namespace(notebook)
    assert not ns["__errors__"], ns["__errors__"]
    for seed in [None, *EXTRA_SEEDS]:
        assert failing(notebook, ns, seed) == {}, f"seed {seed}"


@pytest.mark.parametrize("notebook", PARTS)
def test_release_fails_every_check_and_says_what_to_do(notebook):
    failed = failing(notebook, namespace(notebook, release=True))
    assert set(failed) == {c.id for c in NOTEBOOK_CHECKS[notebook]}
    for message in failed.values():
        assert "NotImplementedError" in message or "not defined" in message or "no class named" in message, message


@pytest.mark.parametrize("answer", BUGGY, ids=lambda a: a.name)
def test_bug_fails_exactly_its_documented_checks(answer):
    ns = namespace(answer.notebook, answer.edits)
    failed = failing(answer.notebook, ns)
    assert set(failed) == set(answer.fails), failed
    for seed in EXTRA_SEEDS:
        assert answer.target in failing(answer.notebook, ns, seed), f"seed {seed}"
    message = failed[answer.target]
    assert len(message) > 40
    for leak in ("grader_tests", "Traceback", "JudgeFailure", "request[", "response[", "PUBLISHED"):
        assert leak not in message


@pytest.mark.parametrize("answer", CORRECT, ids=lambda a: a.name)
def test_correct_idiom_passes_every_check(answer):
    ns = namespace(answer.notebook, answer.edits)
    for seed in [None, *EXTRA_SEEDS]:
        assert failing(answer.notebook, ns, seed) == {}, f"seed {seed}"


def test_published_numbers_follow_from_the_inputs():
    inputs = by_hand_judges.INPUTS.float()
    scores = inputs @ inputs.T
    weights = scores.softmax(dim=-1)
    assert torch.equal(scores.double().round(decimals=4), by_hand_judges.PUBLISHED_SCORES)
    assert torch.equal(weights.double().round(decimals=4), by_hand_judges.PUBLISHED_WEIGHTS)
    assert torch.equal((weights @ inputs).double().round(decimals=4), by_hand_judges.PUBLISHED_CONTEXT)
    assert round(float(inputs[1] @ inputs[2]), 4) == by_hand_judges.JOURNEY_STARTS
    assert round(float(inputs[2] @ inputs[3]), 4) == 0.8296  # the 1-based reading of the same line


def test_notebook_literals_match_the_grader():
    """The literal inputs the students see are the ones the judges use."""
    ns = namespace("02_by_hand")
    assert torch.equal(ns["inputs"].double(), by_hand_judges.INPUTS.float().double())
    for name, ours in (("x3", by_hand_judges.X3), ("W_Q", by_hand_judges.W_Q3), ("W_K", by_hand_judges.W_K3),
                       ("W_V", by_hand_judges.W_V3)):
        assert torch.allclose(ns[name].double(), ours, atol=1e-7), name
    ns = namespace("03_head_and_bias")
    assert torch.allclose(ns["trace_x"].double(), head_judges.TRACE_X, atol=1e-7)
    for name in ("W_q", "W_k", "W_v"):
        assert torch.allclose(ns[name].double(), head_judges.TRACE_PARAMS[f"{name}.weight"], atol=1e-7)
        assert torch.allclose(ns["b" + name[1:]].double(), head_judges.TRACE_PARAMS[f"{name}.bias"], atol=1e-7)
    plus = head_judges.trace_expected()["trace_weights"][1]
    assert abs(float(plus[0]) - 0.45) < 0.01 and abs(float(plus[1]) - 0.10) < 0.01 and abs(float(plus[2]) - 0.45) < 0.01


def test_head_scale_check_tells_sqrt_c_from_sqrt_head_size():
    request = CHECKS["head_scale"].build_request(0)
    assert (request["dim"], request["head_size"]) == (128, 32)
    assert math.sqrt(128) / math.sqrt(32) == 2.0

