"""write's and convert's parameters are checked for type and range before any work, naming the parameter."""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.reading.open import open_image
from xarray_rumi.writing.convert import convert


def _never_computed(shape, chunks, dtype="uint8"):
    """A Dask array whose blocks fail the test if anything computes them."""
    def computed(block):
        raise AssertionError("a block was computed before the parameters were checked")

    return da.zeros(shape, dtype=dtype, chunks=chunks).map_blocks(computed, dtype=dtype)


def _tif(path, width=40, height=30):
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=1, dtype="uint8",
                       crs="EPSG:4326", transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45)) as dst:
        dst.write(np.arange(width * height, dtype="uint16").reshape(1, height, width).astype("uint8"))
    return path


@pytest.mark.parametrize("tile_size, words", [
    ("64", "the string '64'"),          # was iterated: 6 x 4 px tiles
    ("6", "the string '6'"),
    (2.5, "2.5 (a float)"),             # was "'float' object is not iterable"
    (64.0, "64.0 (a float)"),
    (True, "True (a bool)"),            # was "'bool' object is not iterable"
    (np.True_, "(a bool"),
    ((64, 2.5), "(64, 2.5)"),
    (("64", "64"), "('64', '64')"),
    ((64,), "(64,)"),
    ((16, 16, 16), "(16, 16, 16)"),
])
def test_a_tile_size_that_is_not_a_count_of_pixels_is_refused_naming_it(tmp_path, tile_size, words):
    data = _never_computed((1, 64, 64), (1, 32, 32))
    with pytest.raises(TypeError, match="tile_size must be an int") as caught:
        xarray_rumi.write(tmp_path / "x.rumi", data, tile_size=tile_size)
    assert words in str(caught.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("tile_size", [0, -4, (0, 64), (64, -1), 65536, (16, 70000)])
def test_a_tile_size_out_of_range_is_refused_naming_it(tmp_path, tile_size):
    with pytest.raises(ValueError, match=r"tile_size must be between 1 and 65535 px, got "):
        xarray_rumi.write(tmp_path / "x.rumi", _never_computed((1, 64, 64), (1, 32, 32)), tile_size=tile_size)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("tile_size, shape", [
    (np.int64(16), (16, 16)),
    ((np.uint16(8), np.int32(16)), (8, 16)),
    (np.array([8, 16]), (8, 16)),
    ([16, 8], (16, 8)),
])
def test_numpy_integers_and_pairs_are_tile_sizes(tmp_path, tile_size, shape):
    data = np.arange(40 * 50, dtype="uint16").reshape(1, 40, 50)
    blob = xarray_rumi.write(tmp_path / "t.rumi", data, tile_size=tile_size)
    image = open_image(tmp_path / "t.rumi", blob)
    assert (image.grid.tile_length, image.grid.tile_width) == shape
    assert np.array_equal(image.read(), data)


@pytest.mark.parametrize("tile_size, error", [
    (0, ValueError), ((0, 64), ValueError), (-4, ValueError), (2.5, TypeError), ("64", TypeError),
    (True, TypeError),
])
def test_convert_checks_the_tile_size_before_opening_the_source(tmp_path, tile_size, error):
    # the source does not exist: only a check made before any work can name the tile size
    with pytest.raises(error, match="tile_size must be"):
        convert(tmp_path / "missing.tif", tmp_path / "out.rumi", tile_size=tile_size)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("tile_size", [0, (0, 64), -4, 2.5, "64"])
def test_convert_refuses_a_bad_tile_size_of_a_real_source_and_writes_nothing(tmp_path, tile_size):
    source = _tif(tmp_path / "in.tif")
    with pytest.raises((TypeError, ValueError), match="tile_size must be"):
        convert(source, tmp_path / "out.rumi", tile_size=tile_size)
    assert os.listdir(tmp_path) == ["in.tif"]


def test_convert_takes_numpy_integer_tile_sizes(tmp_path):
    source = _tif(tmp_path / "in.tif")
    convert(source, tmp_path / "out.rumi", tile_size=(np.int64(16), np.uint8(32)))
    grid = open_image(tmp_path / "out.rumi").grid
    assert (grid.tile_length, grid.tile_width) == (16, 32)


@pytest.mark.parametrize("options, message", [
    (dict(frame_unit="cells"), "frame_unit must be"),
    (dict(storage_options="anon"), "storage_options must be a dict"),
])
def test_convert_checks_its_other_parameters_before_opening_the_source(tmp_path, options, message):
    with pytest.raises((TypeError, ValueError), match=message):
        convert(tmp_path / "missing.tif", tmp_path / "out.rumi", **options)


def test_storage_options_that_are_not_a_mapping_are_refused_before_any_work(tmp_path):
    with pytest.raises(TypeError, match="storage_options must be a dict of fsspec options or None, got 'anon'"):
        xarray_rumi.write(tmp_path / "x.rumi", _never_computed((1, 64, 64), (1, 32, 32)), storage_options="anon")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("shape, chunks, field", [
    ((1, 1, 2**32), (1, 1, 2**28), "an image 4294967296 px wide does not fit a TIFF file: ImageWidth is at most "
                                   "4294967295 px"),
    ((1, 2**32, 1), (1, 2**28, 1), "an image 4294967296 px tall does not fit a TIFF file: ImageLength is at most "
                                   "4294967295 px"),
    ((65536, 1, 1), (4096, 1, 1), "an image of 65536 bands does not fit a TIFF file: SamplesPerPixel is at most "
                                  "65535 bands"),
])
def test_sizes_past_the_tiff_fields_are_refused_before_anything_is_computed(tmp_path, shape, chunks, field):
    # used to be refused by the IFD builder's OverflowError, after every frame was computed and compressed
    data = _never_computed(shape, chunks)
    with pytest.raises(ValueError, match=field):
        xarray_rumi.write(tmp_path / "big.rumi", data, tile_size=65535 if shape[0] == 1 else 1)
    assert os.listdir(tmp_path) == []


def test_the_largest_sizes_the_fields_hold_pass_the_check():
    from xarray_rumi.format.grid import FrameGrid
    from xarray_rumi.writing.parameters import check_fits_tiff

    check_fits_tiff(FrameGrid(2**32 - 1, 2**32 - 1, 65535, 65535, 65535))


@pytest.mark.parametrize("shape, tile_size, message", [
    ((1, 4097, 4097), 1, r"16785409 frames exceed the limit of 16777216 \(Limits.max_frames\)"),
    ((1, 40000, 40000), 40000, r"a frame of 1600000000 samples of 1 bytes exceeds Limits.max_frame_bytes"),
])
def test_the_readers_limits_are_checked_before_anything_is_computed_too(tmp_path, shape, tile_size, message):
    # a file past them would be refused by every reader (docs/limits.md)
    with pytest.raises(ValueError, match=message):
        xarray_rumi.write(tmp_path / "big.rumi", _never_computed(shape, (1, 4097, 4097)), tile_size=tile_size)
    assert os.listdir(tmp_path) == []
