"""Choosing recipes: the quick pass, its shortlist, and what stays the same whatever the threads."""

from __future__ import annotations

import numpy as np
import pytest

from xarray_rumi.frames import choose as compression
from xarray_rumi.frames import recipes
from xarray_rumi.frames.choose import (
    FALLBACK,
    INTERBAND,
    QUICK_MIN_BYTES,
    choose,
    plan_frames,
    profile_window,
    sample_frames,
)
from xarray_rumi.format.grid import FrameGrid, FrameUnit


def _terrain(shape, seed=0, noise=6.0):
    rng = np.random.default_rng(seed)
    bands, rows, cols = shape
    y, x = np.mgrid[0:rows, 0:cols].astype(np.float32)
    base = 3000 + 900 * np.sin(x / 51) * np.cos(y / 37) + 200 * np.sin((x - y) / 13)
    return np.stack([base * (0.7 + 0.1 * b) + rng.normal(0, noise, base.shape) for b in range(bands)]).astype("uint16")


def _brute_force(samples, error=None):
    """What the choice approximates: every graph on every sample's profile window, smallest total wins."""
    windows = [compression._central_window(s) for s in samples]
    names = compression._graph_names(samples[0].dtype.str, error)
    candidates = list(names) + ([n + INTERBAND for n in names] if samples[0].shape[0] > 1 else [])
    totals = {}
    for candidate in candidates:
        try:
            totals[candidate] = sum(len(recipes._encode(w, candidate, error)) for w in windows)
        except RuntimeError:
            continue
    return min(totals.values())


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_choice_does_not_depend_on_the_threads(workers):
    samples = [_terrain((1, 300, 300), seed) for seed in range(3)]
    assert choose(samples, "auto", workers=workers) == choose(samples, "auto")
    assert choose(samples, "portable", workers=workers) == choose(samples, "portable")


def test_plan_asks_for_the_frames_sample_frames_names():
    grid = FrameGrid(700, 500, 128, 128, 2, FrameUnit.TILE)
    data = _terrain((2, 500, 700))
    asked = []

    def frame_at(k):
        asked.append(k)
        bands, rows, cols = grid.frame_window(k)
        return data[bands, rows, cols]

    recipes = plan_frames(grid, frame_at, "auto", workers=2)[1]
    assert asked == sample_frames(grid, "auto") and len(recipes) == 2
    # the centre of each frame is all that is measured
    assert plan_frames(grid, lambda k: data[profile_window(grid.frame_window(k))], "auto")[1] == recipes
    assert sample_frames(grid, "planar>zigzag>zstd") == []
    assert plan_frames(grid, lambda k: pytest.fail("no samples needed"), "planar>zigzag>zstd")[1][0].recipe \
        == "planar>zigzag>zstd"


@pytest.mark.parametrize("shape", [(1, 512, 512), (3, 512, 512)])
def test_the_quick_pass_keeps_what_measuring_everything_would_find(shape):
    samples = [_terrain(shape, seed) for seed in range(3)]
    chosen = choose(samples, "auto", workers=2).recipe
    windows = [compression._central_window(s) for s in samples]
    size = sum(len(recipes._encode(w, chosen)) for w in windows)
    assert size <= 1.01 * _brute_force(samples)


def test_nearly_empty_quick_windows_rank_every_graph_on_the_trial_window():
    # few classes in large flat patches: the quick windows hold a few hundred bytes
    y, x = np.mgrid[0:512, 0:512]
    classes = (((np.sin(x / 90) + np.cos(y / 70) + 2) * 3).astype("uint8") % 7)[None]
    samples = [classes, np.roll(classes, 100, axis=2), np.roll(classes, 200, axis=1)]
    quick = compression._quick_raster(samples)
    assert len(recipes._encode(quick, FALLBACK)) < QUICK_MIN_BYTES
    chosen = choose(samples, "auto").recipe
    windows = [compression._central_window(s) for s in samples]
    assert sum(len(recipes._encode(w, chosen)) for w in windows) <= 1.01 * _brute_force(samples)


def test_graphs_that_encode_alike_take_one_place_on_the_shortlist():
    sizes = {"id>zstd": 10, "id>field_lz": 10, "delta_1d>zstd": 12, "planar>zigzag>zstd": 11}
    assert compression._distinct_best(sizes, 2) == ["id>field_lz", "planar>zigzag>zstd"]


def test_edge_samples_smaller_than_the_quick_window_stay_out_of_it():
    samples = [np.zeros((1, 512, 512), np.uint16), np.zeros((1, 512, 20), np.uint16)]
    assert compression._quick_raster(samples).shape == (1, compression.QUICK_WINDOW, compression.QUICK_WINDOW)


def test_a_lossy_bound_geozl_refuses_names_the_compression():
    with pytest.raises(ValueError, match="compression 'lossy:BOGUS'"):
        choose([_terrain((1, 64, 64)).astype("float32")], "lossy:BOGUS")


def _choose_in_child(queue):
    samples = [_terrain((1, 128, 128), seed) for seed in range(3)]
    queue.put(choose(samples, "auto", workers=2).recipe)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_measures_without_the_parents_helper_threads():
    import multiprocessing

    samples = [_terrain((1, 128, 128), seed) for seed in range(3)]
    expected = choose(samples, "auto", workers=2).recipe  # the parent now has a helper thread
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_choose_in_child, args=(queue,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == expected


def test_the_chosen_recipes_are_logged_once_per_band_slot(caplog):
    image = np.stack([_terrain((1, 256, 256))[0], np.full((256, 256), 255, "uint16")])
    grid = FrameGrid(256, 256, 128, 128, 2)
    with caplog.at_level("DEBUG", logger="xarray_rumi.frames.choose"):
        chosen = plan_frames(grid, lambda k: image[grid.frame_window(k)], "auto")[1]
    lines = [r.getMessage() for r in caplog.records if r.name == "xarray_rumi.frames.choose"]
    assert len(lines) == 2
    for slot, (line, chosen_recipes) in enumerate(zip(lines, chosen)):
        assert f"band slot {slot} of 2" in line and "compression 'auto'" in line
        assert chosen_recipes.recipe in line
