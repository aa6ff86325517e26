"""The picture in a student's feedback: their attention weights on a small, fixed, public teaching
input, beside the pattern they should have.

Trusted side only (never sent into a sandbox). The grader asks the sandbox to run an existing
probe (``TEACHING_PROBE``: it builds the student's ``SelfAttention`` with the request's weights and
returns ``attention_weights(x)``) on :func:`teaching_request`, then draws the returned tensor here
with matplotlib: three heatmaps — theirs, the expected causal pattern, and the same scores without
the division by √D (visibly sharper) — and an alt text that says in words what the picture shows.

What is safe to show (the README says the same): the teaching input and its weights are drawn from
a fixed seed written in this file, never from the course secret or a check's seed, so the picture
reveals nothing about the inputs the hidden checks use; the expected weights on it are what any
correct layer — or ``torch.nn.functional.scaled_dot_product_attention`` — prints for that input, so
they give away no more than the assignment's own text. The student's heatmap shows only numbers
their own code returned.
"""

from __future__ import annotations

import atexit
import base64
import functools
import math
from collections import OrderedDict

import numpy as np
import torch

from . import reference
from .panel_redraw import ColourTable, PanelRedraw, png_bytes
from .self_attention_probes import PARAM_PREFIX

TEACHING_SEED = 20240607  # public: the teaching input is the same for every student and course
TEACHING_TOKENS, TEACHING_DIM = 6, 8
TEACHING_PROBE = "mask_polarity"  # its probe returns attention_weights(x) for the request's layer
ANCHOR_CHECK = "mask_polarity"  # the check cell whose feedback carries the picture


def teaching_request() -> dict:
    """One sequence of 6 tokens of width 8 and the layer's weights, all from the public seed."""
    gen = torch.Generator().manual_seed(TEACHING_SEED)
    params = reference.random_parameters(TEACHING_DIM, gen, dtype=torch.float64)
    x = torch.randn(1, TEACHING_TOKENS, TEACHING_DIM, generator=gen, dtype=torch.float64)
    message = {"dim": TEACHING_DIM, "causal": True, "x": x.to(torch.float32)}
    message.update({PARAM_PREFIX + k: v.to(torch.float32) for k, v in params.items()})
    return message


def expected_weights(request: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(the expected causal weights, the same without dividing by √D), each (T, T), float64."""
    params = {k[len(PARAM_PREFIX):]: v.to(torch.float64) for k, v in request.items() if k.startswith(PARAM_PREFIX)}
    x = request["x"].to(torch.float64)
    expected = reference.attention_weights(params, x, causal=True)[0]
    raw = reference.raw_scores(params, x)[0]
    mask = reference.causal_mask(x.shape[-2])
    unscaled = raw.masked_fill(mask, float("-inf")).softmax(dim=-1)
    return expected, unscaled


@functools.cache
def teaching() -> tuple[dict, torch.Tensor, torch.Tensor]:
    """(the teaching request, its expected weights, its unscaled weights), made once per process:
    they depend on nothing but the public seed, and a picture per submission spent a quarter of a
    cached picture's time remaking them. Shared by every picture: read them, never change them."""
    request = teaching_request()
    return (request, *expected_weights(request))


def student_weights(response: dict) -> torch.Tensor | None:
    """The student's (T, T) weights from the probe's response, or None if it returned none usable."""
    value = response.get("weights")
    if not isinstance(value, torch.Tensor) or value.dim() != 3 or tuple(value.shape[1:]) != (TEACHING_TOKENS,) * 2:
        return None
    value = value[0].to(torch.float64)
    return value if bool(torch.isfinite(value).all()) else None


def describe(mine: torch.Tensor, expected: torch.Tensor, unscaled: torch.Tensor) -> str:
    """The alt text: what the three heatmaps show, in numbers a screen reader can say."""
    upper = torch.ones_like(mine, dtype=torch.bool).triu(1)
    sums = mine.sum(dim=-1)
    peak = lambda w: float(w.max(dim=-1).values[1:].mean())  # noqa: E731 - row 0 is always 1 under the mask
    return (f"Three heatmaps of {TEACHING_TOKENS}×{TEACHING_TOKENS} attention weights on the teaching input "
            f"(query position down, key position across). Yours: rows sum to between {float(sums.min()):.2f} and "
            f"{float(sums.max()):.2f}; the largest weight above the diagonal is {float(mine[upper].abs().max()):.2f}; "
            f"each row's largest weight averages {peak(mine):.2f}. Expected: zero above the diagonal, every row sums "
            f"to 1, largest weight per row averaging {peak(expected):.2f}. Without dividing by √D the same scores give "
            f"sharper rows, largest weight averaging {peak(unscaled):.2f}.")


INK = {"black": (0.0, 0.0, 0.0), "white": (1.0, 1.0, 1.0)}  # a value label's colour, as RGB in 0..1


class _Live:
    """The three-panel matplotlib figure itself. Built only to measure the student's panel: when
    no earlier process left its measurement (``picture_cache``), or for a value label whose glyphs
    no earlier process drew.

    Building it (three axes, their ticks and labels, 108 value labels, the layout) and rendering it
    for every picture would cost more CPU than grading the submission in a warm sandbox. The two
    reference panels are the same for every student (a fixed public input), so only the student's
    panel changes: its image data and its 36 value labels, which ``panel_redraw.PanelRedraw``
    measures once and then mixes into the pixels (a small fraction of a full render's time, the same
    image within 2 of 255 per channel)."""

    def __init__(self, expected: torch.Tensor, unscaled: torch.Tensor):
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure  # no pyplot: no global figure manager to keep in step

        self.fig = Figure(figsize=(10.5, 3.8), dpi=100)
        axes = self.axes = self.fig.subplots(1, 3)
        panels = (("Your attention_weights", expected), ("Expected (causal, ÷√D)", expected),
                  ("Without ÷√D: sharper", unscaled))
        self.images, self.labels = [], []
        for ax, (title, weights) in zip(axes, panels):
            self.images.append(ax.imshow(weights.numpy(), vmin=0.0, vmax=1.0, cmap="Blues"))
            ax.set_title(title, fontsize=11)
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
            ax.set_xticks(range(TEACHING_TOKENS))
            ax.set_yticks(range(TEACHING_TOKENS))
            self.labels.append({(row, col): ax.text(col, row, "", ha="center", va="center", fontsize=7)
                                for row in range(TEACHING_TOKENS) for col in range(TEACHING_TOKENS)})
            self._label(len(self.images) - 1, weights)
        self.fig.tight_layout()

    def _label(self, panel: int, weights: torch.Tensor) -> None:
        self.images[panel].set_data(weights.numpy())
        for (row, col), text in self.labels[panel].items():
            label, colour = cell_label(float(weights[row, col]))
            text.set_text(label)
            text.set_color(colour)

    def measure(self) -> PanelRedraw:
        """Render everything but the student's panel once and measure that panel."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(self.fig)
        self.axes[0].set_visible(False)
        canvas.draw()
        background = canvas.copy_from_bbox(self.fig.bbox)
        self.axes[0].set_visible(True)
        next_panel = self.axes[1].get_tightbbox(canvas.get_renderer())  # its tick labels included
        return PanelRedraw(canvas, background, self.axes[0], self.images[0], self.labels[0],
                           right_edge=math.floor(next_panel.x0))


def cell_label(value: float) -> tuple[str, str]:
    """A cell's value label and its colour (white on the dark end of the map)."""
    return (f"{value:.2f}" if not math.isclose(value, 0.0, abs_tol=5e-3) else "0",
            "white" if value > 0.55 else "black")


class _Figure:
    """The picture for every student of one process: the student's panel measured once (or its
    measurement loaded, ``picture_cache``) and each student's cell colours and labels mixed into
    it. A lock, because batch grading judges submissions on several threads.

    Most of a class draws the same few pictures (every correct layer, every layer missing the
    mask, ...): a PNG is kept for what decides its pixels — each cell's colour as the colour map
    gives it and each cell's label and label colour — so two students whose weights differ only
    below what the picture resolves share one PNG."""

    REMEMBERED = 256  # PNGs of ~40 kB each

    def __init__(self, expected: torch.Tensor, unscaled: torch.Tensor):
        import threading

        self.lock = threading.Lock()
        self.key = (expected.tolist(), unscaled.tolist())
        self._weights = (expected, unscaled)
        self.drawn: OrderedDict[tuple, bytes] = OrderedDict()  # what decides the student's panel -> PNG
        self.panel: PanelRedraw | None = None
        self.colours: ColourTable | None = None
        self.saved_learned = 0  # panel.learned when the measurement was last saved
        self.kept_masks = -1  # glyph masks in the file on disk (-1: no file of ours yet)

    def _measured(self) -> None:
        """The student's panel and the colour table: loaded if an earlier process kept them, else
        measured with matplotlib (kept by :meth:`save`)."""
        from . import picture_cache

        saved = picture_cache.load(self.key, (TEACHING_TOKENS, TEACHING_TOKENS))
        if saved is not None:
            self.panel = PanelRedraw.restored(saved, lambda: _Live(*self._weights).measure())
            self.colours = ColourTable(saved["colours"])
            self.kept_masks = len(saved["mask_labels"])
            return
        live = _Live(*self._weights)
        self.panel, self.colours = live.measure(), ColourTable.of(live.images[0])
        self.panel.learned += 1  # nothing on disk yet

    def looks(self, mine: torch.Tensor) -> tuple:
        """Everything the student's panel is drawn from: the RGBA bytes the colour map gives each
        cell (the 6×6 image is scaled up with nearest-neighbour sampling, so a cell is one flat
        colour) and each cell's label and label colour."""
        with self.lock:
            if self.colours is None:
                self._measured()
        return self.colours.rgba(mine.numpy()).tobytes(), tuple(cell_label(float(v)) for v in mine.flatten())

    def png(self, mine: torch.Tensor) -> bytes:
        """The figure with ``mine`` in the student's panel, as a PNG: pixels mixed, not rendered."""
        looks = self.looks(mine)
        with self.lock:
            if looks in self.drawn:
                self.drawn.move_to_end(looks)
                return self.drawn[looks]
            colours, labels = looks
            cells = np.frombuffer(colours, dtype=np.uint8).reshape(TEACHING_TOKENS, TEACHING_TOKENS, 4)
            cell_order = [(row, col) for row in range(TEACHING_TOKENS) for col in range(TEACHING_TOKENS)]
            drawn = [(cell, text, INK[colour]) for cell, (text, colour) in zip(cell_order, labels)]
            generation = self.panel.generation
            png = png_bytes(self.panel.rgb(cells, drawn))
            if self.panel.generation != generation:  # a label brought the figure back: what was restored
                self.drawn.clear()  # was not its measurement, nor were the PNGs drawn from it
            self.drawn[looks] = png
            if len(self.drawn) > self.REMEMBERED:
                self.drawn.popitem(last=False)
            return png

    def save(self) -> None:
        """Keep what this process measured for the next one (nothing if it measured nothing)."""
        from . import picture_cache

        with self.lock:
            if self.panel is None or self.panel.learned == self.saved_learned:
                return
            arrays = {**self.panel.measurement(), "colours": self.colours.table}
            learned, kept = self.panel.learned, len(arrays["mask_labels"])
            if kept == self.kept_masks and not self.panel.replaced:  # nothing new would reach the file
                self.saved_learned = learned
                return
        if picture_cache.save(self.key, arrays) is not None:
            self.saved_learned, self.kept_masks = learned, kept
            self.panel.replaced = False


_FIGURE: _Figure | None = None


def save_measurements() -> None:
    """Keep this process's measurement of the student's panel for the next grading process
    (``picture_cache``): after a batch, and at exit."""
    figure = _FIGURE
    if figure is not None:
        figure.save()


atexit.register(save_measurements)


def draw(mine: torch.Tensor, expected: torch.Tensor, unscaled: torch.Tensor) -> bytes:
    """The three heatmaps as one PNG, each cell labelled with its value (colour is never the only cue)."""
    global _FIGURE
    figure = _FIGURE
    if figure is None or figure.key != (expected.tolist(), unscaled.tolist()):
        figure = _FIGURE = _Figure(expected, unscaled)
    return figure.png(mine)


def teaching_picture(response: dict) -> tuple[str, str] | None:
    """(base64 PNG, alt text) for the student's feedback from the probe's response on
    ``teaching()``'s request, or None if their layer gave no weights."""
    mine = student_weights(response)
    if mine is None:
        return None
    _, expected, unscaled = teaching()
    return base64.b64encode(draw(mine, expected, unscaled)).decode("ascii"), describe(mine, expected, unscaled)


def warm() -> None:
    """Draw once what every picture shares (the fixed panels, matplotlib's font cache) and keep the
    measurement, so a grading process's first picture does not pay for it."""
    _, expected, unscaled = teaching()
    draw(expected, expected, unscaled)
    save_measurements()
