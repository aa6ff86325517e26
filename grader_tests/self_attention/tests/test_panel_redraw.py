"""The student's panel of the teaching picture mixed from pixels (grader_tests/panel_redraw.py):
the same image matplotlib renders for the whole figure, within Agg's integer rounding, for
ordinary weights and for weights whose labels spill over their cells."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from grader_tests.self_attention import panel_redraw, pictures

ROUNDING = 2  # of 255 per channel: Agg blends in integers, the redraw in floating point


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)


def rendered_whole(mine: torch.Tensor) -> np.ndarray:
    """What matplotlib draws for the whole figure with ``mine`` in the student's panel."""
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    whole = pictures._Live(expected, unscaled)
    whole._label(0, mine)
    buffer = io.BytesIO()
    whole.fig.savefig(buffer, format="png")
    return _pixels(buffer.getvalue())


def _softmax_rows(scale: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(6, 6, generator=generator, dtype=torch.float64) * scale, -1)


STUDENTS = [  # (case, weights)
    ("a correct layer", None),
    ("soft rows", _softmax_rows(1.0, 3)),
    ("sharp rows", _softmax_rows(3.0, 4)),
    ("negative and wide labels that spill over their cells", torch.randn(6, 6, generator=torch.Generator().manual_seed(5),
                                                                          dtype=torch.float64) * 50),
    ("one long label everywhere", torch.full((6, 6), -1234.5678, dtype=torch.float64)),
    ("all zero", torch.zeros(6, 6, dtype=torch.float64)),
]


@pytest.mark.parametrize("case, mine", STUDENTS, ids=[case for case, _ in STUDENTS])
def test_the_redrawn_panel_is_what_matplotlib_renders(case, mine):
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    mine = expected if mine is None else mine
    got, want = _pixels(pictures.draw(mine, expected, unscaled)), rendered_whole(mine)
    assert got.shape == want.shape
    difference = np.abs(got - want)
    assert difference.max() <= ROUNDING, f"{case}: {int((difference.max(-1) > ROUNDING).sum())} pixels differ"


def test_a_wrong_redraw_is_seen_by_that_comparison():
    """The comparison above can fail: the panel redrawn with one cell's label left out differs
    from the render by more than rounding, where that label was."""
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    pictures.draw(expected, expected, unscaled)
    figure = pictures._FIGURE
    colours, labels = figure.looks(expected)
    cells = np.frombuffer(colours, dtype=np.uint8).reshape(6, 6, 4)
    ink = {"black": (0.0, 0.0, 0.0), "white": (1.0, 1.0, 1.0)}
    cells_in_order = [(row, col) for row in range(6) for col in range(6)]
    drawn = [(cell, text, ink[colour]) for cell, (text, colour) in zip(cells_in_order, labels) if cell != (4, 2)]
    with figure.lock:
        got = figure.panel.rgb(cells, drawn).astype(np.int16)
    assert np.abs(got - rendered_whole(expected)).max() > 100


def test_the_png_holds_exactly_the_pixels_given():
    generator = np.random.default_rng(7)
    rgb = generator.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    png = panel_redraw.png_bytes(rgb)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.array_equal(_pixels(png), rgb.astype(np.int16))


def test_labels_too_long_for_the_panel_never_reach_the_other_panels(monkeypatch):
    """Garbage weights make labels of any length (a finite 1e300 prints 300 digits). They are cut
    where the next panel begins (matplotlib would run them over it), the reference panels stay as
    they are for every student, and the glyph masks kept stay within their memory budget."""
    monkeypatch.setattr(panel_redraw, "MASK_BYTES_KEPT", 400_000)
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    reference = _pixels(pictures.draw(expected, expected, unscaled))
    edge = pictures._FIGURE.panel.right_edge
    assert 300 < edge < 400  # the second panel's tick labels begin about a third of the way across
    for exponent in (100, 200, 300):
        huge = torch.full((6, 6), 10.0 ** exponent, dtype=torch.float64)
        got = _pixels(pictures.draw(huge, expected, unscaled))
        assert pictures._FIGURE.panel.mask_bytes <= 400_000
        assert np.array_equal(got[:, edge:], reference[:, edge:])
        assert np.abs(got[:, :edge] - reference[:, :edge]).max() > 100  # their labels are drawn
    assert np.abs(got - rendered_whole(huge)).max() > 100  # what matplotlib alone would have drawn


def test_the_window_is_mixed_by_the_documented_formula_exactly():
    """``rgb`` spreads each cell's colour less ``low`` over the window's pixels (made once per
    panel): exactly ``round(base + cover × (cell colour − low))`` per pixel, as the module says."""
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    pictures.draw(expected, expected, unscaled)
    panel = pictures._FIGURE.panel
    generator = np.random.default_rng(11)
    for _ in range(2):  # the second picture reuses what the first made
        cells = generator.integers(0, 256, size=(6, 6, 4), dtype=np.uint8)
        spread = cells[..., :3].astype(np.float32)[panel.row_of, panel.col_of]
        want = panel.base.copy()
        want[panel.window] = np.rint(panel.base[panel.window].astype(np.float32)
                                     + panel.cover * (spread - panel.low)).clip(0, 255).astype(np.uint8)
        with pictures._FIGURE.lock:
            assert np.array_equal(panel.rgb(cells, []), want)
