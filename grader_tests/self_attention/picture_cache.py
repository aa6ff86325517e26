"""The teaching picture's measured panel, kept on disk for the next grading process.

Measuring the student's panel (``panel_redraw.PanelRedraw``) needs matplotlib: importing it,
building the three-panel figure and rendering it cost a grading process about a CPU-second before
its first picture — more than grading ten submissions — and every batch, formgrader and feedback
engine paid it again for the same pixels, since the figure is drawn from a fixed public input.
What the measurement yields is plain arrays (the figure without the student's panel, how the
panel's image covers each pixel and which cell each pixel shows, the colour map's table, the glyph
masks of the value labels drawn so far), so it is written to one ``.npz`` file, and a later
process loads that and imports matplotlib only for a value label no earlier process drew.

The file's name carries a fingerprint of what decides those pixels: this format, the installed
matplotlib, the source of ``pictures.py`` and ``panel_redraw.py``, and the reference panels'
weights. A file that does not match, cannot be read or holds arrays of the wrong kind is ignored
and replaced. Whatever it holds only ever becomes pixels of the picture, never a grade.

Where: ``$ATTENTION_PICTURE_CACHE`` (a directory), else ``$XDG_CACHE_HOME/attention-course``, else
``~/.cache/attention-course`` — the grading account's own. A directory that another account could
write to (or own) is not used: a grader running as root never reads what a student could have put there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path

import numpy as np

FORMAT = 1  # raise when what is saved, or how it is read, changes
ENV = "ATTENTION_PICTURE_CACHE"
# Labels kept on disk: the ordinary ones ("0", "0.25", "-12.50"); a label of garbage weights can
# run to hundreds of digits, whose masks are large and never seen twice.
LABEL_CHARS_KEPT = 12
# Glyph coverage kept on disk, in values (4 bytes each; an ordinary label's mask is ~400): the labels
# 0, 0.01 … 1.00 of all 36 cells fit. A class of garbage weights makes a new label per cell per
# student; past this budget their masks stay in memory only, and the file stops changing.
MASK_VALUES_KEPT = 2_000_000

_HERE = Path(__file__).resolve().parent


def directory() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attention-course"


def _matplotlib_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("matplotlib")
    except PackageNotFoundError:
        return "none"


def fingerprint(key) -> str:
    """What decides the measured pixels, hashed: ``key`` is the reference panels' weights."""
    digest = hashlib.sha256(f"{FORMAT}\0{_matplotlib_version()}\0{key!r}".encode())
    for module in ("pictures.py", "panel_redraw.py"):
        digest.update((_HERE / module).read_bytes())
    return digest.hexdigest()[:24]


def path_for(key) -> Path:
    return directory() / f"teaching-picture-{fingerprint(key)}.npz"


def _ours(info: os.stat_result) -> bool:
    """A folder owned by this account that no one else may write to."""
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _open_folder(folder: Path) -> int | None:
    """The cache folder opened (not followed if it is a link) and checked as opened, or None. Every
    file is then opened, written, renamed and removed relative to this descriptor: whoever could
    rename folders along the way cannot swap in one of theirs after the check."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _ours(os.fstat(fd)):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def load(key, grid: tuple[int, int]) -> dict | None:
    """The arrays saved for ``key`` (a panel of ``grid`` = (rows, columns) cells), or None (no file,
    another fingerprint, unreadable, not ours, not a sound measurement of such a panel)."""
    path = path_for(key)
    folder = _open_folder(path.parent)
    if folder is None:
        return None
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        with os.fdopen(fd, "rb") as file, np.load(file, allow_pickle=False) as saved:
            arrays = {name: saved[name] for name in saved.files}
    except Exception:  # noqa: BLE001 - cut short, not a zip, pickled objects refused, ...: not used, whatever it is
        return None
    return arrays if _well_formed(arrays, grid) else None


SCHEMA = {  # name: (dtype kind, number of dimensions)
    "base": ("u", 3), "window": ("i", 1), "cover": ("f", 3), "row_of": ("i", 2), "col_of": ("i", 2),
    "low": ("f", 1), "right_edge": ("i", 0), "colours": ("u", 2),
    "mask_cells": ("i", 2), "mask_labels": ("U", 1), "mask_boxes": ("i", 2), "mask_ends": ("i", 1),
    "mask_values": ("f", 1),
}


def _well_formed(arrays: dict, grid: tuple[int, int]) -> bool:
    if set(arrays) != set(SCHEMA):
        return False
    if any(arrays[name].dtype.kind != kind or arrays[name].ndim != ndim for name, (kind, ndim) in SCHEMA.items()):
        return False
    base, window, cover = arrays["base"], arrays["window"], arrays["cover"]
    if base.shape[-1] != 3 or base.dtype != np.uint8 or window.shape != (4,) or arrays["low"].shape != (3,):
        return False
    r0, r1, c0, c1 = (int(v) for v in window)
    if not (0 <= r0 < r1 <= base.shape[0] and 0 <= c0 < c1 <= base.shape[1]):
        return False
    window_shape = (r1 - r0, c1 - c0)
    if cover.shape != (*window_shape, 1) or arrays["row_of"].shape != window_shape \
            or arrays["col_of"].shape != window_shape:
        return False
    if arrays["colours"].dtype != np.uint8 or arrays["colours"].shape[1:] != (4,) or len(arrays["colours"]) < 4:
        return False
    rows, cols = grid
    for cell_map, size in ((arrays["row_of"], rows), (arrays["col_of"], cols)):
        if cell_map.size and (cell_map.min() < 0 or cell_map.max() >= size):
            return False
    count = len(arrays["mask_labels"])
    ends = arrays["mask_ends"]
    if arrays["mask_cells"].shape != (count, 2) or arrays["mask_boxes"].shape != (count, 4) or ends.shape != (count,):
        return False
    if count and (np.any(np.diff(ends) < 0) or ends[0] < 0 or ends[-1] != arrays["mask_values"].size):
        return False
    boxes = arrays["mask_boxes"]
    sizes = (boxes[:, 1] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 2])
    starts = np.concatenate([[0], ends[:-1]]) if count else ends
    inside = (boxes[:, 0] >= 0) & (boxes[:, 0] < boxes[:, 1]) & (boxes[:, 1] <= base.shape[0]) \
        & (boxes[:, 2] >= 0) & (boxes[:, 2] < boxes[:, 3]) & (boxes[:, 3] <= base.shape[1])
    return bool(np.all(inside & (sizes == ends - starts)))


def save(key, arrays: dict) -> Path | None:
    """Write ``arrays`` for ``key`` whole or not at all (a reader sees the old file or the new one),
    and remove the files of other fingerprints (an older matplotlib or drawing code); None if the
    folder cannot be made, or is not ours."""
    path = path_for(key)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    folder = _open_folder(path.parent)
    if folder is None:
        return None
    temporary = f".teaching-picture-{os.getpid()}-{secrets.token_hex(8)}.npz"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as file:
                np.savez(file, **arrays)
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            return None
        for name in os.listdir(folder):
            if name.startswith("teaching-picture-") and name.endswith(".npz") and name != path.name:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    return path


def pack_masks(masks: dict) -> dict:
    """Glyph masks ``{(cell, label): (rows, cols, g) | None}`` as flat arrays (labels too long to
    keep, and labels that cover no pixel, left out)."""
    kept, size = [], 0
    for (cell, label), mask in masks.items():  # in the order measured: what is on disk already comes first
        if mask is not None and len(label) <= LABEL_CHARS_KEPT and size + mask[2].size <= MASK_VALUES_KEPT:
            kept.append((cell, label, mask))
            size += mask[2].size
    values = [mask[2].reshape(-1).astype(np.float32) for _, _, mask in kept]
    return {
        "mask_cells": np.array([cell for cell, _, _ in kept], dtype=np.int64).reshape(-1, 2),
        "mask_labels": np.array([label for _, label, _ in kept], dtype=f"<U{LABEL_CHARS_KEPT}"),
        "mask_boxes": np.array([(m[0].start, m[0].stop, m[1].start, m[1].stop) for _, _, m in kept],
                               dtype=np.int64).reshape(-1, 4),
        "mask_ends": np.cumsum([v.size for v in values], dtype=np.int64),
        "mask_values": np.concatenate(values) if values else np.zeros(0, dtype=np.float32),
    }


def unpack_masks(arrays: dict) -> dict:
    masks = {}
    start = 0
    values = arrays["mask_values"]
    for (row, col), label, (r0, r1, c0, c1), end in zip(arrays["mask_cells"].tolist(), arrays["mask_labels"].tolist(),
                                                       arrays["mask_boxes"].tolist(), arrays["mask_ends"].tolist()):
        g = values[start:end].reshape(r1 - r0, c1 - c0, 1)
        masks[((row, col), label)] = (slice(r0, r1), slice(c0, c1), g)
        start = end
    return masks
