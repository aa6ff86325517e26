"""The teaching picture (grader_tests/pictures.py): drawn from the tensors a probe returns, on a
public input, with an alt text that says what it shows."""

from __future__ import annotations

import base64
import math

import numpy as np
import torch

from grader_tests.self_attention import pictures, reference
from grader_tests.self_attention.tests.test_panel_redraw import ROUNDING, _pixels, rendered_whole
from grader_tests.self_attention.self_attention_probes import PARAM_PREFIX


def _weights(request, scale=True):
    params = {k[len(PARAM_PREFIX):]: v.to(torch.float64) for k, v in request.items() if k.startswith(PARAM_PREFIX)}
    x = request["x"].to(torch.float64)
    scores = reference.raw_scores(params, x) / (math.sqrt(x.shape[-1]) if scale else 1.0)
    return scores.masked_fill(reference.causal_mask(x.shape[-2]), float("-inf")).softmax(dim=-1).to(torch.float32)


def _same_request(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(b[k], torch.Tensor) else a[k] == b[k] for k in b)


def test_the_teaching_input_is_fixed_and_public():
    a, b = pictures.teaching_request(), pictures.teaching_request()
    assert _same_request(a, b)
    assert a["x"].shape == (1, pictures.TEACHING_TOKENS, pictures.TEACHING_DIM) and a["causal"] is True


def test_the_shared_teaching_input_is_the_one_built_afresh():
    request, expected, unscaled = pictures.teaching()
    fresh = pictures.teaching_request()
    assert _same_request(request, fresh)
    assert all(torch.equal(a, b) for a, b in zip((expected, unscaled), pictures.expected_weights(fresh)))


def test_a_correct_layer_reads_as_the_expected_pattern():
    request = pictures.teaching_request()
    png, alt = pictures.teaching_picture({"weights": _weights(request)})
    assert base64.b64decode(png)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "rows sum to between 1.00 and 1.00" in alt and "largest weight above the diagonal is 0.00" in alt
    expected, unscaled = pictures.expected_weights(request)
    assert float(unscaled.max(dim=-1).values[1:].mean()) > float(expected.max(dim=-1).values[1:].mean())


def test_a_layer_without_sqrt_d_looks_like_the_sharper_map():
    request = pictures.teaching_request()
    _, alt = pictures.teaching_picture({"weights": _weights(request, scale=False)})
    mine = re_number(alt, "each row's largest weight averages ")
    sharper = re_number(alt, "sharper rows, largest weight averaging ")
    assert mine == sharper


def test_no_usable_weights_no_picture():
    assert pictures.teaching_picture({}) is None
    assert pictures.teaching_picture({"weights": torch.full((1, 6, 6), float("nan"))}) is None
    assert pictures.teaching_picture({"weights": torch.zeros(1, 5, 5)}) is None


def re_number(text: str, after: str) -> float:
    return float(text.split(after, 1)[1].split()[0].rstrip(".;"))


def test_a_picture_drawn_after_others_is_the_picture_drawn_afresh():
    """draw() measures the student's panel once and mixes each student's pixels into it (a
    whole figure per submission cost more than grading it); after other students' pictures, each
    is the figure rendered whole with savefig, within Agg's rounding (2 of 255)."""
    request = pictures.teaching_request()
    expected, unscaled = pictures.expected_weights(request)
    generator = torch.Generator().manual_seed(3)
    students = [torch.softmax(torch.randn(6, 6, generator=generator), -1) for _ in range(3)] + [expected, unscaled]
    drawn = [pictures.draw(mine, expected, unscaled) for mine in students + students[:2]]
    for mine, png in zip(students + students[:2], drawn):
        assert np.abs(_pixels(png) - rendered_whole(mine)).max() <= ROUNDING
    assert len(set(drawn[:5])) == 5  # each student's own picture


def test_weights_the_picture_cannot_tell_apart_share_one_png_and_others_do_not():
    """The PNG memo's key is what the student's panel is drawn from: a difference below it (1e-9)
    gets the remembered PNG, which is the picture drawn afresh for those weights; a difference
    the picture shows (one cell's label) draws a new one."""
    request = pictures.teaching_request()
    expected, unscaled = pictures.expected_weights(request)
    mine = _weights(request, scale=False)[0].to(torch.float64)
    first = pictures.draw(mine, expected, unscaled)
    hair = mine.clone()
    hair[3, 1] += 1e-9
    figure = pictures._FIGURE
    remembered = len(figure.drawn)
    assert pictures.draw(hair, expected, unscaled) == first and len(figure.drawn) == remembered
    assert np.abs(_pixels(first) - rendered_whole(hair)).max() <= ROUNDING
    visible = mine.clone()
    visible[3, 1] += 0.05
    assert pictures.draw(visible, expected, unscaled) != first and len(figure.drawn) == remembered + 1
