"""What bounds a conversion's memory: each tile row read once, and GDAL's block cache bounded (docs/writing.md)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import rasterio

from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameGrid, FrameUnit
from xarray_rumi.frames.recipes import Recipes
from xarray_rumi.writing import convert as convert_module
from xarray_rumi.writing import encoded
from xarray_rumi.writing.convert import GDAL_CACHE_BLOCK_ROWS, GDAL_CACHE_FLOOR, convert, gdal_cache_bytes
from xarray_rumi.writing.encoded import DaskFrames, dask_encoded_frames

da = pytest.importorskip("dask.array")


def _counting_rows(values: np.ndarray, tile: int):
    """A Dask array of ``values`` in full-width blocks of one tile row, and how often each block was computed."""
    calls: dict[int, int] = {}
    lock = threading.Lock()

    def block(x, block_info=None):
        row = block_info[0]["chunk-location"][1]
        with lock:
            calls[row] = calls.get(row, 0) + 1
        return x

    array = da.from_array(values, chunks=(values.shape[0], tile, -1)).map_blocks(block, dtype=values.dtype)
    return array, calls


@pytest.mark.parametrize("bands, unit", [(1, "tile"), (3, "tile"), (3, "cell")])
def test_each_full_width_block_is_computed_once_when_a_window_is_smaller_than_a_row(monkeypatch, bands, unit):
    tile = 16
    values = np.arange(bands * 64 * 8 * tile, dtype=np.uint16).reshape(bands, 64, 8 * tile)
    grid = FrameGrid(8 * tile, 64, tile, tile, bands, FrameUnit.parse(unit))
    # a window of 4 frames: a row of 8 positions would be cut in two (or six), and computed that often
    monkeypatch.setattr(encoded, "LOCAL_WINDOW_BYTES", 4 * grid.largest_frame_samples * 2)
    array, calls = _counting_rows(values, tile)
    sample = sample_type_from_name("uint16")
    recipes = (Recipes("id>zstd"),) * grid.frames_per_position
    frames = list(dask_encoded_frames(DaskFrames(array, grid), grid, sample, recipes, workers=1))
    assert len(frames) == grid.frame_count
    assert calls == {row: 1 for row in range(4)}


def test_blocks_that_do_not_span_the_width_keep_the_window_by_bytes():
    grid = FrameGrid(64, 64, 32, 32, 1)
    assert DaskFrames(da.zeros((1, 64, 64), chunks=(1, 32, 32)), grid).frames_per_block() is None
    assert DaskFrames(da.zeros((1, 64, 64), chunks=(1, 48, 64)), grid).frames_per_block() is None  # cuts frames
    assert DaskFrames(da.zeros((1, 64, 64), chunks=(1, 64, 64)), grid).frames_per_block() == 4


def _striped(path, width=2048, height=96, count=2, dtype="uint16"):
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=count, dtype=dtype,
                       compress="deflate", blockysize=8) as f:
        f.write(np.arange(count * height * width).reshape(count, height, width).astype(dtype))


def test_the_gdal_cache_holds_a_few_block_rows_of_the_source(tmp_path):
    path = tmp_path / "strips.tif"
    _striped(path, width=4096, height=256, count=4)
    with rasterio.open(path) as src:
        block_row = src.block_shapes[0][0] * 4096 * 4 * 2
        assert gdal_cache_bytes(src) == max(GDAL_CACHE_FLOOR, GDAL_CACHE_BLOCK_ROWS * block_row)
    # rasterio.Env(GDAL_CACHEMAX=) would leave the process's cache at 8 MiB
    with rasterio.open(path) as src, convert_module._gdal_cache(8 * 2**20):
        assert gdal_cache_bytes(src) == 8 * 2**20  # never more than GDAL's own setting


def test_convert_reads_with_the_bounded_cache_and_restores_it(tmp_path, monkeypatch):
    from rasterio.env import get_gdal_config

    path = tmp_path / "strips.tif"
    _striped(path)
    seen = []
    real_write = convert_module.write

    def recording_write(*args, **kwargs):
        seen.append(int(get_gdal_config("GDAL_CACHEMAX")))
        return real_write(*args, **kwargs)

    monkeypatch.setattr(convert_module, "write", recording_write)
    with rasterio.Env():
        before = int(get_gdal_config("GDAL_CACHEMAX"))
        with rasterio.open(path) as src:
            expected = gdal_cache_bytes(src)
        convert(path, tmp_path / "out.rumi", tile_size=32)
        assert int(get_gdal_config("GDAL_CACHEMAX")) == before
    assert expected < before
    assert seen == [expected]
