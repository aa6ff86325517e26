"""``fit_attention`` finds the member a plain search of the whole family finds.

The fit leaves candidates out before computing their weights (zero pattern, slice sums); these
tests hold it to the definition: try every score source and every shape in order, return the
first member that reproduces the weights within ``atol``."""

import math

import pytest
import torch

from grader_tests.self_attention import reference
from grader_tests.self_attention.attention_model import SCORE_SOURCES, SHAPES, ZERO, Attention, fit_attention, fitted_member
from grader_tests.judging import generator

ATOL = 1e-5


def every_candidate_tried(weights, params, x, *, atol, snap=1e-4, zero=ZERO):
    """The family searched without leaving anything out: the fit's specification."""
    weights, x = weights.to(torch.float64), x.to(torch.float64)
    _, seq_len, dim = x.shape
    log_w = weights.clamp_min(1e-300).log()
    for source, scores_of in SCORE_SOURCES.items():
        scores = scores_of(params, x)
        for mask, axis, after, fill in SHAPES:
            candidate = Attention(source, 1.0, axis, mask, fill, after)
            if not bool((weights[candidate.expected_zeros(seq_len).expand_as(weights)].abs() <= zero).all()):
                continue
            member = fitted_member(candidate, weights, log_w, scores, dim, atol=atol, snap=snap, zero=zero)
            if member is not None:
                return member
    return None


def layer_inputs(seed, seq_len=6, dim=8):
    gen = generator(seed)
    return reference.random_parameters(dim, gen, dtype=torch.float64), torch.randn(2, seq_len, dim, generator=gen,
                                                                                    dtype=torch.float64)


MEMBERS = [  # (source, shape, scale, factor): every shape, and the constants a slice sum or a fit must not lose
    *[("q·k", shape, "√D", 1.0) for shape in SHAPES],
    *[(source, SHAPES[0], "√D", 1.0) for source in SCORE_SOURCES],
    ("q·k", SHAPES[0], "D", 0.5),
    ("q·k", SHAPES[0], 3.7, 1.0),
    ("q·k", (SHAPES[2][0], -2, False, -math.inf), "1", 2.0),
    ("x·x", ("none", -2, False, 0.0), "√T", 1.0),
    ("q·q", ("past", -1, True, -math.inf), "T", 0.25),
    ("q·k", SHAPES[0], "√D", 1e8),  # slice sums whose rounding alone exceeds 2·T·atol
]


@pytest.mark.parametrize("source, shape, scale, factor", MEMBERS)
@pytest.mark.parametrize("noise", [0.0, 0.4 * ATOL, 3 * ATOL], ids=["exact", "within-atol", "beyond-atol"])
def test_the_fit_finds_what_trying_every_candidate_finds(source, shape, scale, factor, noise):
    params, x = layer_inputs(seed=7)
    mask, axis, after, fill = shape
    weights = Attention(source, scale, axis, mask, fill, after, factor).weights(params, x)
    # Noise only where the weights are not zero, so the mask stays readable.
    wobble = noise * (torch.rand(weights.shape, generator=generator(3), dtype=torch.float64) * 2 - 1)
    weights = weights + wobble * (weights.abs() > ZERO)
    expected = every_candidate_tried(weights, params, x, atol=ATOL)
    assert fit_attention(weights, params, x, atol=ATOL) == expected
    if noise == 0.0:
        assert expected is not None  # the family holds every member above


@pytest.mark.parametrize("case, weights_of", [
    ("uniform", lambda w: torch.full_like(w, 1 / w.shape[-1])),
    ("rows summing to 1 but no softmax", lambda w: w.flip(-1)),
    ("a row doubled", lambda w: torch.cat([w[:, :1] * 2, w[:, 1:]], dim=1)),
    ("every entry zero", torch.zeros_like),
    ("scaled by 1e300 (slice sums rounded far beyond 2·T·atol)", lambda w: w * 1e300),
])
def test_weights_outside_the_family_are_judged_as_the_plain_search_judges_them(case, weights_of):
    params, x = layer_inputs(seed=11)
    weights = weights_of(Attention().weights(params, x))
    assert fit_attention(weights, params, x, atol=ATOL) == every_candidate_tried(weights, params, x, atol=ATOL)
