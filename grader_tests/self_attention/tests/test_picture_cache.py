"""The teaching picture's measurement kept between processes (grader_tests/picture_cache.py): a
process that finds it draws the very same PNGs without importing matplotlib; one that needs a
label nobody drew measures it with matplotlib and keeps it too; a file that is not a sound
measurement of this figure, or lies where someone else could have written it, is never used."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from grader_tests.self_attention import panel_redraw, picture_cache, pictures
from grader_tests.self_attention.tests.test_panel_redraw import ROUNDING, _pixels, rendered_whole


GRID = (pictures.TEACHING_TOKENS, pictures.TEACHING_TOKENS)


def _weights(seed: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(6, 6, generator=generator, dtype=torch.float64) * scale, -1)


# Each process below draws its pictures, prints their SHA-256 and whether matplotlib was imported,
# and exits (when the measurement is kept: pictures.save_measurements at exit).
DRAW = """
import hashlib, json, sys, torch
from grader_tests.self_attention import pictures
expected, unscaled = pictures.expected_weights(pictures.teaching_request())
weights = [torch.tensor(w, dtype=torch.float64) for w in json.loads(sys.argv[1])]
print(json.dumps({"pngs": [hashlib.sha256(pictures.draw(w, expected, unscaled)).hexdigest() for w in weights],
                  "matplotlib": "matplotlib" in sys.modules}))
"""


def _draw_in_a_process(weights: list[torch.Tensor], cache) -> dict:
    env = dict(os.environ, ATTENTION_PICTURE_CACHE=str(cache))
    done = subprocess.run([sys.executable, "-c", DRAW, json.dumps([w.tolist() for w in weights])], env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder of this test's (the account's own, 0700), and no figure in this process yet."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv(picture_cache.ENV, str(folder))
    monkeypatch.setattr(pictures, "_FIGURE", None)
    return folder


@pytest.mark.slow  # draws in two processes of their own
def test_a_kept_measurement_draws_the_same_pngs_without_matplotlib(cache):
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    class_of_three = [expected, unscaled, _weights(1)]
    first = _draw_in_a_process(class_of_three, cache)
    assert first["matplotlib"] and len(list(cache.glob("teaching-picture-*.npz"))) == 1
    again = _draw_in_a_process(class_of_three, cache)
    assert again == {"pngs": first["pngs"], "matplotlib": False}


@pytest.mark.slow  # draws in four processes of their own
def test_a_label_no_process_drew_is_measured_and_kept(cache):
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    _draw_in_a_process([expected], cache)
    new = _weights(2, scale=3.0)  # labels the first process never drew
    with_cache = _draw_in_a_process([new], cache)
    assert with_cache["matplotlib"]
    fresh = cache.parent / "fresh"
    fresh.mkdir(mode=0o700)
    measuring_it_all = _draw_in_a_process([new, expected], fresh)["pngs"]
    assert with_cache["pngs"] == measuring_it_all[:1]
    assert _draw_in_a_process([new, expected], cache) == {"pngs": measuring_it_all, "matplotlib": False}


def test_pictures_drawn_from_a_kept_measurement_are_what_matplotlib_renders(cache):
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    students = [expected, _weights(3), torch.randn(6, 6, generator=torch.Generator().manual_seed(4)).double() * 50]
    for mine in students:
        pictures.draw(mine, expected, unscaled)
    pictures.save_measurements()
    pictures._FIGURE = None
    for mine in students + [_weights(5)]:
        got = _pixels(pictures.draw(mine, expected, unscaled))
        assert np.abs(got - rendered_whole(mine)).max() <= ROUNDING


VALUES = [  # (case, values): the colour map's edges, as matplotlib's Colormap.__call__ treats them
    ("inside", [0.0, 0.25, 0.5, 0.75, 0.999]),
    ("the top of the range", [1.0, 1.0 - 1e-12, 255 / 256, 255 / 256 - 1e-12]),
    ("each entry's lower edge", [i / 256 for i in range(256)]),
    ("below the range", [-0.0, -1e-12, -1.0, -1e300]),
    ("above the range", [1.0 + 1e-12, 2.0, 1e300]),
    ("not a number", [float("nan"), 0.5]),
]


@pytest.mark.parametrize("extremes", [False, True], ids=["the picture's map", "under, over and bad of their own"])
@pytest.mark.parametrize("case, values", VALUES, ids=[case for case, _ in VALUES])
def test_the_colour_table_gives_matplotlibs_colours(case, values, extremes):
    """The picture's map ("Blues") reuses its end colours below and above the range; the same map
    with colours of its own there shows the table takes each value where matplotlib does."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    cmap = matplotlib.colormaps["Blues"]
    if extremes:
        cmap = cmap.with_extremes(under="red", over="green", bad="yellow")
    image = Figure().subplots().imshow(np.zeros((2, 2)), vmin=0.0, vmax=1.0, cmap=cmap)
    values = np.array(values, dtype=np.float64).reshape(1, -1)
    assert np.array_equal(panel_redraw.ColourTable.of(image).rgba(values), image.to_rgba(values, bytes=True)), case


def _kept(cache) -> tuple:
    """Draw a picture in this process, keep its measurement; (the file, its arrays)."""
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    pictures.draw(expected, expected, unscaled)
    pictures.save_measurements()
    pictures._FIGURE = None
    (path,) = cache.glob("teaching-picture-*.npz")
    with np.load(path) as saved:
        return path, (expected.tolist(), unscaled.tolist()), {name: saved[name] for name in saved.files}


def _rewrite(path, arrays, **changed):
    with open(path, "wb") as file:
        np.savez(file, **{**arrays, **changed})


SPOILED = [  # (case, what happens to the kept file)
    ("cut short", lambda path, arrays: path.write_bytes(path.read_bytes()[:5000])),
    ("not a NumPy file", lambda path, arrays: path.write_bytes(b"#!/bin/sh\nrm -rf /\n")),
    ("an array missing", lambda path, arrays: _rewrite(path, {k: v for k, v in arrays.items() if k != "cover"})),
    ("the window outside the figure", lambda path, arrays: _rewrite(path, arrays, window=np.array([0, 10**6, 0, 5]))),
    ("a mask box outside the figure", lambda path, arrays: _rewrite(
        path, arrays, mask_boxes=arrays["mask_boxes"] + np.array([10**6, 10**6, 0, 0]))),
    ("masks longer than their values", lambda path, arrays: _rewrite(path, arrays, mask_ends=arrays["mask_ends"] + 1)),
    ("Python objects inside", lambda path, arrays: _rewrite(path, arrays, low=np.array([object()] * 3, dtype=object))),
    ("a cell map pointing outside the 6×6 grid", lambda path, arrays: _rewrite(path, arrays, row_of=arrays["row_of"] + 6)),
    ("a colour table without its under, over and bad rows", lambda path, arrays: _rewrite(
        path, arrays, colours=arrays["colours"][:2])),
    ("a link to a sound file elsewhere", lambda path, arrays: (path.rename(path.parent.parent / "elsewhere.npz"),
                                                               path.symlink_to(path.parent.parent / "elsewhere.npz"))),
]


@pytest.mark.parametrize("case, spoil", SPOILED, ids=[case for case, _ in SPOILED])
def test_a_file_that_is_not_a_sound_measurement_is_ignored(cache, case, spoil):
    path, key, arrays = _kept(cache)
    assert picture_cache.load(key, GRID) is not None  # the file as kept is read
    spoil(path, arrays)
    assert picture_cache.load(key, GRID) is None, case


def test_a_folder_someone_else_could_write_is_never_read_or_written(cache, monkeypatch):
    path, key, _ = _kept(cache)
    os.chmod(cache, 0o777)
    assert picture_cache.load(key, GRID) is None
    assert picture_cache.save(key, {"anything": np.zeros(1)}) is None
    os.chmod(cache, 0o700)
    link = cache.parent / "link"
    link.symlink_to(cache)
    monkeypatch.setenv(picture_cache.ENV, str(link))
    assert picture_cache.load(key, GRID) is None


def test_a_measurement_of_another_figure_is_replaced_by_what_matplotlib_measures(cache):
    """Same fingerprint, other pixels (fonts changed under the same matplotlib): the first label the
    file lacks brings the figure back, which shows the difference; what was restored is dropped --
    with every picture drawn from it before -- the pictures are the figure's, and the file is
    rewritten."""
    path, key, arrays = _kept(cache)
    _rewrite(path, arrays, base=np.full_like(arrays["base"], 7))
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    spoiled = _pixels(pictures.draw(expected, expected, unscaled))  # every label of it is in the file
    assert np.abs(spoiled - rendered_whole(expected)).max() > 100
    mine = _weights(6)
    assert np.abs(_pixels(pictures.draw(mine, expected, unscaled)) - rendered_whole(mine)).max() <= ROUNDING
    assert np.abs(_pixels(pictures.draw(expected, expected, unscaled)) - rendered_whole(expected)).max() <= ROUNDING
    pictures.save_measurements()
    assert int(picture_cache.load(key, GRID)["base"].max()) == 255


def test_a_process_that_measured_nothing_writes_nothing(cache):
    path, _, _ = _kept(cache)
    before = path.stat().st_mtime_ns
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    pictures.draw(expected, expected, unscaled)
    pictures.save_measurements()
    assert path.stat().st_mtime_ns == before and "teaching-picture" in path.name


def test_labels_past_the_budget_are_not_kept_and_leave_the_file_alone(cache, monkeypatch):
    """A class of garbage weights draws new labels in every cell for every student: the file keeps
    masks up to its budget, and once that is full, drawing more rewrites nothing."""
    monkeypatch.setattr(picture_cache, "MASK_VALUES_KEPT", 60_000)
    expected, unscaled = pictures.expected_weights(pictures.teaching_request())
    generator = torch.Generator().manual_seed(8)
    garbage = [torch.randn(6, 6, generator=generator, dtype=torch.float64) * 90 for _ in range(8)]
    for mine in garbage[:4]:
        pictures.draw(mine, expected, unscaled)
    pictures.save_measurements()
    (path,) = cache.glob("teaching-picture-*.npz")
    kept = picture_cache.load(pictures._FIGURE.key, GRID)
    assert 0 < kept["mask_values"].size <= 60_000
    assert len(kept["mask_labels"]) < len(pictures._FIGURE.panel.masks)  # some stayed in memory only
    before = path.stat().st_mtime_ns
    for mine in garbage[4:]:
        pictures.draw(mine, expected, unscaled)
    pictures.save_measurements()
    assert path.stat().st_mtime_ns == before


SWAPS = [  # (case, how a student who can write the cache folder's parent puts theirs in its place)
    ("a link to their folder", lambda ours, theirs: ours.symlink_to(theirs)),
    ("their folder itself", lambda ours, theirs: theirs.rename(ours)),
]


@pytest.mark.parametrize("case, swap", SWAPS, ids=[case for case, _ in SWAPS])
@pytest.mark.root
def test_a_cache_folder_swapped_by_someone_else_is_neither_read_nor_written(tmp_path, monkeypatch, case, swap):
    """The attack on a cache folder set inside a folder a student can write: they move ours away
    and put theirs, holding a file of their making under the expected name, where it was."""
    if os.geteuid() != 0:
        pytest.skip("the student's folder must belong to another account (CI is root)")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # the student may rename what is in it
    ours = shared / "cache"
    monkeypatch.setenv(picture_cache.ENV, str(ours))
    monkeypatch.setattr(pictures, "_FIGURE", None)
    ours.mkdir(mode=0o700)
    path, key, arrays = _kept(ours)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    planted = theirs / path.name
    _rewrite(planted, arrays, base=np.zeros_like(arrays["base"]))
    for item in (theirs, planted):
        os.chown(item, 65534, 65534)
    ours.rename(shared / "ours-moved-away")
    swap(ours, theirs)
    theirs = ours.resolve()  # where the student's folder is now
    assert picture_cache.load(key, GRID) is None, case
    assert picture_cache.save(key, arrays) is None, case
    assert [(p.name, p.stat().st_uid) for p in theirs.iterdir()] == [(path.name, 65534)], case
