"""One heatmap panel of a rendered matplotlib figure, redrawn by arithmetic on pixels.

The teaching picture (pictures.py) changes in one panel per student: a 6×6 ``imshow`` and its 36
value labels. Drawing that panel with matplotlib (laying out and rendering 36 texts, then the axes
around them) and encoding the figure with Pillow made the picture one of the dearest steps of
grading a submission, and most of a class's submissions drew a picture no other student had. Both
steps are linear in the colours drawn, so the panel is measured once and then mixed:

- two renders of the image's window with a uniform image (every cell ``low``, then every cell
  ``high``) give, per pixel, how much of it the image covers (1 inside, 0 outside, in between where a spine
  or an edge is drawn over it): ``pixel = base + cover × (cell colour − low colour)``;
- one render with a distinct colour per cell gives which cell each pixel shows (read where the
  image covers the pixel whole, and carried to the partly covered edge pixels);
- each value label is drawn once per (cell, text) in black over the ``low`` panel, which gives its
  glyph coverage ``g``; Agg blends a text as ``pixel × (1 − g) + colour × g``, and so does this.

What comes out is the figure matplotlib would render, pixel for pixel within 2 of 255 per channel
(Agg rounds its blends in integers); grader_tests/tests/test_panel_redraw.py compares the two. The PNG is
written directly (rows unfiltered, zlib level 3): several times faster than Pillow's encoder, for a
file about a third larger (a higher zlib level would shrink it a little for much more time).
"""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np

# Glyph masks by (cell, label): ~2 kB for a label like "0.25", but garbage weights give any finite
# number, and a label such as f"{1e300:.2f}" spans the figure (~50 kB); so they are kept by size.
MASK_BYTES_KEPT = 32 << 20


class PanelRedraw:
    """``rgb(colours, labels)``: the figure with ``ax`` showing those cell colours and labels.

    ``canvas`` is the figure's Agg canvas and ``background`` a saved region of it holding
    everything but ``ax`` (``copy_from_bbox``); ``image`` is ``ax``'s ``AxesImage`` and ``texts``
    its value labels by (row, column), drawn in that order (matplotlib draws an axes' texts in the
    order they were added). The canvas is drawn on while measuring: the caller serialises calls.

    A label is drawn only left of ``right_edge`` (a pixel column: where the next panel begins).
    matplotlib would let a label of garbage weights (a finite 1e300 prints 300 digits) run over the
    other panels, which it draws later; here the other panels are never touched."""

    def __init__(self, canvas, background, ax, image, texts: dict, right_edge: int | None = None):
        self.canvas, self.texts = canvas, texts
        self.right_edge = right_edge
        rows, cols = image.get_array().shape
        self.masks: dict[tuple, tuple | None] = {}
        self.mask_bytes = 0
        self.learned = 0  # masks measured by this process (not restored)
        self.replaced = False  # a restored measurement turned out not to be this figure's
        self._live = self._parts = None
        self.generation = 0  # counts the measurements replaced (``_adopt``)
        for text in texts.values():
            text.set_visible(False)

        def rendered(data, whole: bool) -> np.ndarray:
            """The figure with ``data`` in the panel: the whole axes, or only what covers the image's
            window (the axes' face, the image, the spines: ticks and labels lie outside it)."""
            image.set_data(data)
            canvas.restore_region(background)
            renderer = canvas.get_renderer()
            for artist in [ax] if whole else [ax.patch, image, *ax.spines.values()]:
                artist.draw(renderer)
            return np.asarray(canvas.buffer_rgba())[..., :3].copy()

        low, high = np.zeros((rows, cols)), np.ones((rows, cols))
        # The cell pattern keeps to the dark half of the map, far from ``low``'s colour.
        pattern = 0.5 + 0.5 * np.arange(rows * cols).reshape(rows, cols) / max(rows * cols - 1, 1)
        self.base = rendered(low, whole=True)
        uncovered, covered, by_cell = (rendered(data, whole=False) for data in (low, high, pattern))
        image.set_data(low)
        self.low = image.to_rgba(low, bytes=True)[0, 0, :3].astype(np.float32)
        high_colour = image.to_rgba(high, bytes=True)[0, 0, :3].astype(np.float32)
        channel = int(np.argmax(np.abs(self.low - high_colour)))
        cover = (uncovered[..., channel].astype(np.float32) - covered[..., channel]) / (self.low[channel] - high_colour[channel])
        ys, xs = np.nonzero(np.abs(cover) > 1e-3)
        self.window = (slice(ys.min(), ys.max() + 1), slice(xs.min(), xs.max() + 1))
        self.cover = np.clip(cover[self.window], 0.0, 1.0)[..., None]
        packed = lambda rgb: (rgb[..., 0].astype(np.int32) << 16) | (rgb[..., 1].astype(np.int32) << 8) | rgb[..., 2]  # noqa: E731
        palette = packed(image.to_rgba(pattern, bytes=True)[..., :3]).reshape(-1)
        order = np.argsort(palette)
        if len(np.unique(palette)) != palette.size:
            raise RuntimeError("the heatmap panel could not be measured: two cells share a colour")
        seen = packed(by_cell[self.window])
        # Where the image covers a pixel whole, its colour is exactly one cell's; elsewhere it is not used.
        cell = order[np.searchsorted(palette, seen, sorter=order).clip(0, palette.size - 1)]
        whole = self.cover[..., 0] > 0.99
        if not whole.any():
            raise RuntimeError("the heatmap panel could not be measured: its image covers no pixel whole")
        # A partly covered pixel shows the cell of the nearest pixel the image covers whole.
        solid_rows, solid_cols = np.nonzero(whole.any(1))[0], np.nonzero(whole.any(0))[0]
        near_row = solid_rows[np.abs(np.arange(whole.shape[0])[:, None] - solid_rows[None]).argmin(1)]
        near_col = solid_cols[np.abs(np.arange(whole.shape[1])[:, None] - solid_cols[None]).argmin(1)]
        cell = cell[near_row, :][:, near_col]
        self.row_of, self.col_of = cell // cols, cell % cols

    def _mask(self, cell: tuple[int, int], label: str):
        """(rows, cols, g) of ``label`` drawn at ``cell``, or None if it covers no pixel."""
        key = (cell, label)
        if key in self.masks:
            return self.masks[key]
        if self.canvas is None:  # restored: a label no earlier process drew needs the figure itself
            self._adopt(self._live())
            if key in self.masks:
                return self.masks[key]
        self.learned += 1
        text, renderer = self.texts[cell], self.canvas.get_renderer()
        text.set_text(label)
        text.set_color("black")
        text.set_visible(True)
        box = text.get_window_extent(renderer)
        height, width = self.base.shape[:2]
        rows = slice(max(math.floor(height - box.y1) - 2, 0), min(math.ceil(height - box.y0) + 2, height))
        cols = slice(max(math.floor(box.x0) - 2, 0), min(math.ceil(box.x1) + 2, self.right_edge or width, width))
        if cols.start >= cols.stop:
            self.masks[key] = None
            return None
        pixels = np.asarray(self.canvas.buffer_rgba())
        under = self.base[rows, cols]
        pixels[rows, cols, :3] = under
        text.draw(renderer)
        text.set_visible(False)
        drawn = pixels[rows, cols, :3].astype(np.float32)
        under = under.astype(np.float32)
        brightest = under.argmax(-1)[..., None]  # black over it: that channel loses the most
        lit = np.take_along_axis(under, brightest, -1)
        g = np.clip(1.0 - np.take_along_axis(drawn, brightest, -1) / np.maximum(lit, 1.0), 0.0, 1.0)
        mask = (rows, cols, g) if bool((g > 0).any()) else None
        if self.mask_bytes + g.nbytes > MASK_BYTES_KEPT:
            self.masks.clear()
            self.mask_bytes = 0
        self.masks[key] = mask
        self.mask_bytes += g.nbytes
        return mask

    MEASURED = ("base", "cover", "row_of", "col_of", "low")

    def measurement(self) -> dict:
        """What the measuring found, as arrays (``picture_cache`` keeps them on disk)."""
        from . import picture_cache

        rows, cols = self.window
        return {**{name: getattr(self, name) for name in self.MEASURED},
                "window": np.array([rows.start, rows.stop, cols.start, cols.stop], dtype=np.int64),
                "right_edge": np.array(-1 if self.right_edge is None else self.right_edge, dtype=np.int64),
                **picture_cache.pack_masks(self.masks)}

    @classmethod
    def restored(cls, arrays: dict, live) -> "PanelRedraw":
        """A panel from a saved ``measurement()``, drawing without matplotlib. ``live()`` builds and
        measures the figure itself, called only for a label whose glyphs were not saved."""
        from . import picture_cache

        panel = cls.__new__(cls)
        panel.canvas = panel.texts = None
        for name in cls.MEASURED:
            setattr(panel, name, arrays[name])
        r0, r1, c0, c1 = (int(v) for v in arrays["window"])
        panel.window = (slice(r0, r1), slice(c0, c1))
        edge = int(arrays["right_edge"])
        panel.right_edge = None if edge < 0 else edge
        panel.masks = picture_cache.unpack_masks(arrays)
        panel.mask_bytes = sum(mask[2].nbytes for mask in panel.masks.values())
        panel.learned, panel.replaced, panel._live, panel._parts, panel.generation = 0, False, live, None, 0
        return panel

    def _adopt(self, live: "PanelRedraw") -> None:
        """Measure further labels on ``live``, the figure measured afresh. If it is not the figure
        the saved measurement came from (fonts or settings changed under the same fingerprint),
        everything restored is dropped for what ``live`` measured."""
        same = all(np.array_equal(getattr(self, name), getattr(live, name)) for name in self.MEASURED) \
            and self.window == live.window and self.right_edge == live.right_edge
        if not same:
            self.masks, self.mask_bytes = {}, 0
            for name in (*self.MEASURED, "window", "right_edge"):
                setattr(self, name, getattr(live, name))
            self._parts = None  # made from what was just replaced
            self.generation += 1  # pictures drawn from it are wrong too
            self.learned += 1
            self.replaced = True  # what is kept on disk is wrong: save this
        self.canvas, self.texts = live.canvas, live.texts

    def _window_parts(self, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """(the base's pixels in the image's window as float32, and for each of those pixels the cell
        it shows, as an index into the row-major cells of a panel ``cols`` wide): made on the first
        picture, as the measurement (restored or not) decides both; a picture spent half its time
        remaking them."""
        parts = self._parts
        if parts is None or parts[0] != cols:
            parts = self._parts = (cols, self.base[self.window].astype(np.float32),
                                   (self.row_of * cols + self.col_of).astype(np.intp))
        return parts[1], parts[2]

    def rgb(self, colours: np.ndarray, labels) -> np.ndarray:
        """The figure's (H, W, 3) uint8 pixels with the panel's cells in ``colours`` ((rows, cols,
        3 or 4) uint8, as the image's colour map gives them) and ``labels`` ((cell, text, ink)
        in drawing order, ink an RGB triple in 0..1) written over them."""
        # The masks first: on a restored panel one may bring back the figure, and with it new pixels.
        masks = [(self._mask(cell, label), ink) for cell, label, ink in labels]
        out = self.base.copy()
        base_window, cell_index = self._window_parts(colours.shape[1])
        # Each cell's colour less ``low``, then spread over the window's pixels: the same float32
        # values as spreading the colours first, with the arithmetic done per cell, not per pixel.
        shift = colours[..., :3].reshape(-1, 3).astype(np.float32) - self.low
        window = base_window + self.cover * shift[cell_index]
        out[self.window] = np.rint(window).clip(0, 255).astype(np.uint8)
        for mask, ink in masks:
            if mask is None:
                continue
            rows, cols, g = mask
            ink = np.asarray(ink, dtype=np.float32) * 255.0
            under = out[rows, cols].astype(np.float32)
            out[rows, cols] = np.rint(under + g * (ink - under)).clip(0, 255).astype(np.uint8)
        return out


class ColourTable:
    """A heatmap's colour map as a table: ``rgba(values)`` gives the bytes matplotlib's
    ``image.to_rgba(values, bytes=True)`` gives for an ``imshow(..., vmin=0, vmax=1)`` — the same
    rule as ``Colormap.__call__`` (a value v takes entry ⌊v·N⌋, v = 1 the last; below 0 the map's
    "under" colour, from N on its "over" colour, NaN its "bad" one) — without matplotlib."""

    def __init__(self, table: np.ndarray):
        self.table = table  # (N + 3, 4) uint8: the N colours, then under, over and bad
        self.size = len(table) - 3

    @classmethod
    def of(cls, image) -> "ColourTable":
        """The table of ``image``'s colour map, read through its public interface."""
        cmap = image.cmap
        rows = [cmap(np.arange(cmap.N), bytes=True)]
        rows += [cmap(np.array([value]), bytes=True) for value in (-1, cmap.N, np.nan)]
        return cls(np.concatenate(rows).astype(np.uint8))

    def rgba(self, values: np.ndarray) -> np.ndarray:
        scaled = np.array(values, dtype=np.float64) * self.size
        scaled[scaled == self.size] = self.size - 1
        under, over, bad = scaled < 0, scaled >= self.size, np.isnan(scaled)
        with np.errstate(invalid="ignore"):
            index = scaled.astype(np.int64)
        index[under], index[over], index[bad] = self.size, self.size + 1, self.size + 2
        return self.table.take(index, axis=0, mode="clip")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(rgb: np.ndarray) -> bytes:
    """An (H, W, 3) uint8 image as a PNG: 8-bit RGB, no interlace, every row unfiltered."""
    height, width, _ = rgb.shape
    rows = np.zeros((height, width * 3 + 1), dtype=np.uint8)  # each row led by filter type 0
    rows[:, 1:] = rgb.reshape(height, width * 3)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 3)) + _chunk(b"IEND", b""))
