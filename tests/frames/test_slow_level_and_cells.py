"""What ``auto`` tries beyond GeoZL's graphs as they come: zstd's slow level for small images, cell frames."""

from __future__ import annotations

import geozl
import numpy as np
import pytest

from xarray_rumi.format.grid import FrameGrid, FrameUnit
from xarray_rumi.frames import choose as compression
from xarray_rumi.frames import recipes
from xarray_rumi.frames.recipes import INTERBAND
from xarray_rumi.frames.choose import (
    SLOW_ZSTD_LEVEL,
    choose,
    plan_frames,
)

#: The zstd level GeoZL's graphs run at: ``<graph>:6`` must write their bytes exactly.
GEOZL_ZSTD_LEVEL = 6


def _smooth(shape, seed=0):
    """A DEM-like surface of whole units without noise, as the real DEM: zstd's slow level pays on it."""
    bands, rows, cols = shape
    y, x = np.mgrid[0:rows, 0:cols].astype(np.float64)
    surface = 30000 + 400 * np.sin(x / 97 + seed) * np.cos(y / 71) + 0.02 * (x - 200) ** 2 + 0.01 * y * x
    return np.stack([surface + 5 * b for b in range(bands)]).astype("uint16")


def _noise(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 60000, shape).astype("uint16")


def _zstd_graphs(dtype):
    return [g for g in compression._graph_names(np.dtype(dtype).str, None) if g.endswith("zstd")]


@pytest.mark.parametrize("dtype", ["uint8", "uint16"])
def test_a_graph_at_geozls_own_zstd_level_writes_geozls_bytes(dtype):
    values = (_smooth((3, 64, 96)) >> (8 if dtype == "uint8" else 0)).astype(dtype)
    for graph in _zstd_graphs(dtype):
        for candidate in (graph, graph + INTERBAND):
            assert recipes._encode(values, f"{graph}:{GEOZL_ZSTD_LEVEL}{candidate[len(graph):]}") \
                == recipes._encode(values, candidate), candidate


def test_a_graph_at_the_slow_level_decodes_to_the_samples_and_is_smaller_on_smooth_data():
    values = _smooth((1, 256, 256))
    plain = recipes._encode(values, "planar>zigzag>transpose>zstd")
    slow = recipes._encode(values, f"planar>zigzag>transpose>zstd:{SLOW_ZSTD_LEVEL}")
    assert slow[0] == 0xC0 + recipes.FORMAT_VERSION
    assert np.array_equal(geozl.decompress(slow).view("<u2").reshape(values.shape), values)
    assert len(slow) < 0.95 * len(plain)


def test_a_small_image_takes_the_slow_level_where_it_pays():
    samples = [_smooth((1, 256, 256), seed) for seed in range(3)]
    plain = choose(samples, "auto").recipe
    small = choose(samples, "auto", small=True).recipe
    assert small == compression._at_slow_level(plain, 2) and small.endswith(f":{SLOW_ZSTD_LEVEL}")
    windows = [compression._central_window(s) for s in samples]
    slow_size, plain_size = (sum(len(recipes._encode(w, c)) for w in windows) for c in (small, plain))
    assert slow_size <= compression.SLOW_LEVEL_GAIN * plain_size


def test_the_slow_level_is_left_where_it_does_not_pay_and_for_large_images_and_other_modes():
    noisy = [_noise((1, 256, 256), seed) for seed in range(3)]
    assert ":" not in choose(noisy, "auto", small=True).recipe
    smooth = [_smooth((1, 256, 256), seed) for seed in range(3)]
    assert ":" not in choose(smooth, "auto").recipe
    assert ":" not in choose(smooth, "portable", small=True).recipe
    assert ":" not in choose([s.astype("float32") for s in smooth], "lossy:0.5", small=True).recipe


def test_plan_knows_a_small_image_from_its_grid(monkeypatch):
    image = _smooth((1, 600, 600))
    grid = FrameGrid(600, 600, 256, 256, 1)
    frame_at = lambda k: image[grid.frame_window(k)]  # noqa: E731
    assert plan_frames(grid, frame_at, "auto")[1][0].recipe.endswith(f":{SLOW_ZSTD_LEVEL}")
    monkeypatch.setattr(compression, "SMALL_IMAGE_BYTES", image.nbytes - 1)
    assert ":" not in plan_frames(grid, frame_at, "auto")[1][0].recipe


def test_a_recipe_may_name_a_zstd_level_and_a_bad_one_is_refused_before_any_frame():
    assert choose([], "planar>zigzag>transpose>zstd:19").recipe == "planar>zigzag>transpose>zstd:19"
    assert choose([], "id>zstd:3@interband").recipe == "id>zstd:3@interband"
    for bad, words in (("planar>zigzag>entropy:16", "ending in zstd"), ("planar>zigzag>zstd:99", "1 to 22"),
                       ("planar>zigzag>zstd:x", "1 to 22"), ("bogus>zstd:9", "ending in zstd")):
        with pytest.raises(ValueError, match=words):
            choose([], bad)


def _correlated(bands, rows=256, cols=256, seed=0):
    """Bands sharing one texture: each predicts the next almost exactly, as a camera's colours do."""
    texture = np.random.default_rng(seed).integers(0, 180, (rows, cols))
    return np.stack([texture + 20 * b for b in range(bands)]).astype("uint8")


def _planned(image, tile, **options):
    grid = FrameGrid(image.shape[2], image.shape[1], tile, tile, image.shape[0])
    return plan_frames(grid, lambda k: image[grid.frame_window(k)], options.pop("compression", "auto"), **options)


def test_cell_frames_win_where_the_bands_predict_each_other():
    grid, recipes = _planned(_correlated(3), 128, may_use_cells=True)
    assert grid.frame_unit is FrameUnit.CELL and len(recipes) == 1
    # with the same samples, tile frames are what the caller gets unless the writer may choose
    grid, recipes = _planned(_correlated(3), 128)
    assert grid.frame_unit is FrameUnit.TILE and len(recipes) == 3


def test_cell_frames_lose_where_they_do_not_pay_or_may_not_compete():
    independent = np.stack([_noise((256, 256), seed) for seed in range(3)]).astype("uint8")
    assert _planned(independent, 128, may_use_cells=True)[0].frame_unit is FrameUnit.TILE
    # nearly empty frames: what cells save is frame headers
    flat = np.zeros((3, 256, 256), "uint8")
    assert _planned(flat, 128, may_use_cells=True)[0].frame_unit is FrameUnit.TILE
    # more bands than CELL_MAX_BANDS, or a compression other than auto
    many = _correlated(compression.CELL_MAX_BANDS + 1)
    assert _planned(many, 128, may_use_cells=True)[0].frame_unit is FrameUnit.TILE
    assert _planned(_correlated(4), 128, may_use_cells=True)[0].frame_unit is FrameUnit.CELL
    for mode in ("portable", "lossy:1", "planar>zigzag>zstd"):
        grid, recipes = _planned(_correlated(3), 128, may_use_cells=True, compression=mode)
        assert grid.frame_unit is FrameUnit.TILE and len(recipes) == 3, mode


def test_the_frame_unit_choice_does_not_depend_on_the_threads():
    image = _correlated(3)
    assert _planned(image, 128, may_use_cells=True, workers=3) == _planned(image, 128, may_use_cells=True)
