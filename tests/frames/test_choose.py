"""Choosing recipes: the quick pass and its shortlist, zstd's slow level for small images, cell frames, measuring
on idle cores, and what stays the same whatever the threads."""

from __future__ import annotations

import threading

import geozl
import numpy as np
import pytest

from xarray_rumi.format.grid import FrameGrid, FrameUnit
from xarray_rumi.frames import choose as compression
from xarray_rumi.frames import recipes
from xarray_rumi.frames.choose import (
    FALLBACK,
    INTERBAND,
    PORTABLE_RECIPES,
    QUICK_MIN_BYTES,
    SLOW_ZSTD_LEVEL,
    encoded_sizes,
    plan_frames,
    profile_window,
    sample_frames,
)

#: The zstd level GeoZL's graphs run at: ``<graph>:6`` must write their bytes exactly.
GEOZL_ZSTD_LEVEL = 6


def choose(samples, mode, *, workers=1, small=False):
    """The recipes ``mode`` chooses for one band slot's sample frames; ``small``: an image under SMALL_IMAGE_BYTES."""
    if compression._fixed(mode) is not None:
        return compression._fixed(mode)
    chosen = compression._choose_each([samples], mode, workers)
    if small and mode == "auto":
        chosen = compression._slower(chosen, [samples], workers)
    return chosen[0].recipes


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
    assert choose(samples, "portable").recipe in PORTABLE_RECIPES
    one_byte = [(s >> 4).astype("uint8") for s in samples]  # transpose does not apply to them
    assert choose(one_byte, "portable").recipe in ("id>zstd", "delta_1d>zstd", "id>field_lz")


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


def test_choose_never_picks_a_codec_beyond_the_pinned_version():
    # sparse/pivco terminals need OpenZL format 27: they must never be candidates
    samples = [np.zeros((1, 64, 64), np.uint8), np.eye(64, dtype=np.uint8)[None]]
    chosen = choose(samples, "auto")
    assert "sparse" not in chosen.recipe and "pivco" not in chosen.recipe
    assert chosen.encode(samples[0])[0] == 0xC0 + recipes.FORMAT_VERSION


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


# -- beyond GeoZL's graphs as they come: zstd's slow level for small images, cell frames --------------

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


# -- measuring: encoded_sizes on the calling thread and idle cores ----------------------------------------

STORED = np.zeros(64, np.uint8)


def _length(stored, candidate) -> bytes:
    if candidate == "never":
        raise RuntimeError("this graph does not apply")
    return bytes(stored.size // candidate)


def test_each_size_is_its_own_jobs_and_none_where_the_candidate_does_not_apply():
    jobs = [(STORED, 2), (STORED, "never"), (STORED, 4), (STORED, 64)]
    assert encoded_sizes(workers=2, encode=_length, jobs=jobs) == [32, None, 16, 1]
    assert encoded_sizes(workers=2, encode=_length, jobs=[]) == []


def test_an_error_other_than_does_not_apply_is_raised():
    def broken(stored, candidate):
        raise MemoryError("out of memory")

    with pytest.raises(MemoryError):
        encoded_sizes(workers=2, encode=broken, jobs=[(STORED, 2), (STORED, 4)])


def test_one_worker_measures_on_the_calling_thread_alone(monkeypatch):
    monkeypatch.setattr("xarray_rumi.runtime.threads.computing_threads", lambda: 4)
    threads = set()

    def recording(stored, candidate):
        threads.add(threading.get_ident())
        return _length(stored, candidate)

    encoded_sizes(workers=1, encode=recording, jobs=[(STORED, c) for c in (1, 2, 4, 8, 16, 32)])
    assert threads == {threading.get_ident()}


def test_helpers_join_the_caller_on_idle_cores():
    """Two workers, and a job that waits until a second thread has started one: only a helper can start it."""
    second_started, threads, lock = threading.Event(), [], threading.Lock()

    def waiting(stored, candidate):
        with lock:
            threads.append(threading.get_ident())
            first = len(threads) == 1
        if first:
            assert second_started.wait(timeout=30), "no helper joined"
        else:
            second_started.set()
        return _length(stored, candidate)

    assert encoded_sizes(workers=2, encode=waiting, jobs=[(STORED, 2), (STORED, 4)]) == [32, 16]
    assert len(set(threads)) == 2
