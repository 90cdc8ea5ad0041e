"""What ``write`` chooses (issue 22): with frame_unit="auto" cell frames where they pay; zstd's slow level for small images."""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest
import rasterio
import xarray as xr

import xarray_rumi
from xarray_rumi.format.grid import FrameUnit
from xarray_rumi.format.limits import Limits
from xarray_rumi.frames import choose
from xarray_rumi.reading.open import open_image
from xarray_rumi.writing import write as writing


def _correlated(bands=3, rows=300, cols=260, seed=0):
    """Bands sharing one texture, as a camera's colours do: cell frames let each predict the next."""
    texture = np.random.default_rng(seed).integers(0, 180, (rows, cols))
    return np.stack([texture + 20 * b for b in range(bands)]).astype("uint8")


def _unit(path) -> FrameUnit:
    return open_image(path).grid.frame_unit


def test_frame_unit_auto_writes_cell_frames_where_they_pay_and_a_given_unit_is_kept(tmp_path):
    data = _correlated()
    xarray_rumi.write(tmp_path / "chosen.rumi", data, tile_size=128, frame_unit="auto")
    xarray_rumi.write(tmp_path / "tile.rumi", data, tile_size=128, frame_unit="tile")
    xarray_rumi.write(tmp_path / "cell.rumi", data, tile_size=128, frame_unit=1)
    xarray_rumi.write(tmp_path / "default.rumi", data, tile_size=128)
    assert [_unit(tmp_path / f"{n}.rumi") for n in ("chosen", "tile", "cell", "default")] == [
        FrameUnit.CELL, FrameUnit.TILE, FrameUnit.CELL, FrameUnit.TILE]
    assert os.path.getsize(tmp_path / "chosen.rumi") < 0.97 * os.path.getsize(tmp_path / "tile.rumi")
    assert np.array_equal(open_image(tmp_path / "chosen.rumi").read(), data)
    xarray_rumi.validate(tmp_path / "chosen.rumi")
    # a recipe string, or portable, is not measured: tile frames, as before
    xarray_rumi.write(tmp_path / "portable.rumi", data, tile_size=128, compression="portable", frame_unit="auto")
    assert _unit(tmp_path / "portable.rumi") is FrameUnit.TILE


def test_bands_that_do_not_predict_each_other_stay_in_tile_frames(tmp_path):
    data = np.random.default_rng(1).integers(0, 250, (3, 300, 260)).astype("uint8")
    xarray_rumi.write(tmp_path / "a.rumi", data, tile_size=128, frame_unit="auto")
    assert _unit(tmp_path / "a.rumi") is FrameUnit.TILE


def test_dask_input_chooses_the_same_frames_and_writes_the_same_bytes(tmp_path):
    data = _correlated()
    xarray_rumi.write(tmp_path / "numpy.rumi", data, tile_size=128, frame_unit="auto")
    xarray_rumi.write(tmp_path / "dask.rumi", da.from_array(data, chunks=(1, 100, 100)), tile_size=128,
                      frame_unit="auto")
    assert _unit(tmp_path / "dask.rumi") is FrameUnit.CELL
    assert (tmp_path / "dask.rumi").read_bytes() == (tmp_path / "numpy.rumi").read_bytes()


def test_a_data_array_read_from_a_file_keeps_its_frame_unit(tmp_path):
    data = _correlated()
    xarray_rumi.write(tmp_path / "tile.rumi", data, tile_size=128, frame_unit="tile")
    with xr.open_dataset(tmp_path / "tile.rumi", engine="rumi") as ds:
        ds.band_data.rumi.to_rumi(tmp_path / "copy.rumi")
    assert _unit(tmp_path / "copy.rumi") is FrameUnit.TILE


def test_images_written_with_the_default_unit_stack_into_a_cube_whatever_their_data(tmp_path):
    """The default frame unit does not depend on the data: a time series written with defaults is a Cube."""
    paths = [tmp_path / f"{i}.rumi" for i in range(2)]
    blobs = [xarray_rumi.write(paths[0], _correlated(), tile_size=128),  # cells would pay here
             xarray_rumi.write(paths[1], np.random.default_rng(1).integers(0, 250, (3, 300, 260)).astype("uint8"),
                               tile_size=128)]
    assert xarray_rumi.open_cube(paths, blobs).band_data.shape == (2, 3, 300, 260)


def test_an_unknown_frame_unit_is_refused_naming_the_choices(tmp_path):
    with pytest.raises(ValueError, match="'tile', 'cell', 'auto'"):
        xarray_rumi.write(tmp_path / "a.rumi", _correlated(), frame_unit="cells")
    assert not (tmp_path / "a.rumi").exists()


def test_cell_frames_a_reader_would_refuse_are_never_chosen(tmp_path, monkeypatch):
    data = _correlated()
    # tile frames of 128 x 128 fit, cell frames of three bands do not
    monkeypatch.setattr(writing, "DEFAULT_LIMITS", Limits(max_frame_bytes=2 * 128 * 128))
    xarray_rumi.write(tmp_path / "a.rumi", data, tile_size=128, frame_unit="auto")
    assert _unit(tmp_path / "a.rumi") is FrameUnit.TILE


def _terraced(rows=400, cols=500):
    """A DEM of whole units without noise: zstd's slow level finds its repeats, GeoZL's level 6 does not."""
    y, x = np.mgrid[0:rows, 0:cols].astype(np.float64)
    return (30000 + 400 * np.sin(x / 97) * np.cos(y / 71) + 0.02 * (x - 200) ** 2 + 0.01 * y * x).astype("uint16")


def test_a_small_image_is_written_at_the_slow_zstd_level_where_it_pays(tmp_path, monkeypatch):
    dem = _terraced()
    xarray_rumi.write(tmp_path / "small.rumi", dem, tile_size=256)
    monkeypatch.setattr(choose, "SMALL_IMAGE_BYTES", dem.nbytes - 1)  # the same image, no longer small
    xarray_rumi.write(tmp_path / "large.rumi", dem, tile_size=256)
    assert os.path.getsize(tmp_path / "small.rumi") < 0.9 * os.path.getsize(tmp_path / "large.rumi")
    assert np.array_equal(open_image(tmp_path / "small.rumi").read()[0], dem)
    xarray_rumi.validate(tmp_path / "small.rumi")


# Issue 22's figures for JPEG 2000 lossless (ci/benchmarks/compression.py, OpenJPEG through GDAL 3.10):
# rumi's sizes are deterministic, so the target is checked here on the writer's bytes alone.
JPEG2000_RATIO = {"RGB.byte.tif": 2.54, "small_dem_3m_merged.tif": 8.27}


@pytest.mark.parametrize("name", sorted(JPEG2000_RATIO))
def test_the_real_rasters_jpeg_2000_won_come_out_at_least_0_97x_its_ratio(tmp_path, shared_data, name):
    with rasterio.open(shared_data / name) as src:
        data = src.read()
    xarray_rumi.write(tmp_path / "a.rumi", data, tile_size=512, frame_unit="auto", write_header=False)
    assert data.nbytes / os.path.getsize(tmp_path / "a.rumi") >= 0.97 * JPEG2000_RATIO[name]
    assert np.array_equal(open_image(tmp_path / "a.rumi").read(), data)
