"""rumi has no place for a scale or an offset: writing raw values that carry them says so, and writes them raw."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import rasterio
import rioxarray
import xarray as xr

import xarray_rumi
from xarray_rumi.writing.data_array import NodataNotStoredWarning, ScaleNotStoredWarning, scale_note

SCALE, OFFSET = 0.01, -273.15
TRANSFORM = rasterio.Affine(10, 0, 399960, 0, -10, 5000040)


def _tif(path, pixels, *, scales, offsets, nodata=None):
    with rasterio.open(path, "w", driver="GTiff", width=pixels.shape[2], height=pixels.shape[1],
                       count=pixels.shape[0], dtype=pixels.dtype.name, crs="EPSG:32633", transform=TRANSFORM,
                       nodata=nodata) as dst:
        dst.write(pixels)
        dst.scales = scales
        dst.offsets = offsets
    return path


@pytest.fixture
def temperature(tmp_path):
    """An int16 GeoTIFF of temperatures in hundredths of a kelvin above absolute zero, and its raw pixels."""
    pixels = np.random.default_rng(5).integers(25000, 32000, (2, 24, 40), dtype=np.int16)
    return _tif(tmp_path / "t.tif", pixels, scales=(SCALE, SCALE), offsets=(OFFSET, OFFSET)), pixels


def _write(path, array):
    return xarray_rumi.write(path, array, tile_size=16)


def _notes(record, category=ScaleNotStoredWarning):
    return [str(w.message) for w in record if w.category is category]


@pytest.mark.parametrize("chunks", [None, {}], ids=["numpy", "dask"])
def test_raw_values_with_a_scale_are_named(temperature, tmp_path, write_each_way, chunks):
    source, pixels = temperature
    with rioxarray.open_rasterio(source, mask_and_scale=False, chunks=chunks) as array:
        assert (array.attrs["scale_factor"], array.attrs["add_offset"]) == (SCALE, OFFSET)
        with pytest.warns(ScaleNotStoredWarning) as record:
            write_each_way(tmp_path / "a.rumi", array, tile_size=16)
    notes = _notes(record)
    assert notes == [scale_note({"scale_factor": SCALE, "add_offset": OFFSET})]  # once per write
    assert notes[0].startswith("scale_factor 0.01 and add_offset -273.15 are not stored")
    assert "pixel values are written as they are, unscaled" in notes[0]
    written = xarray_rumi.open_image(tmp_path / "a.rumi").read()
    assert written.dtype == np.int16 and np.array_equal(written, pixels)  # raw, as the user had them


def test_decoded_values_are_written_without_a_word(temperature, tmp_path, write_each_way):
    # mask_and_scale=True: the scale moved to the encoding, and the array holds the scaled values; those are written
    source, pixels = temperature
    with rioxarray.open_rasterio(source, mask_and_scale=True) as array, warnings.catch_warnings():
        assert array.encoding["scale_factor"] == SCALE and "scale_factor" not in array.attrs
        warnings.simplefilter("error", ScaleNotStoredWarning)
        write_each_way(tmp_path / "a.rumi", array, tile_size=16)
        expected = array.values
    written = xarray_rumi.open_image(tmp_path / "a.rumi").read()
    assert written.dtype == expected.dtype and np.array_equal(written, expected)
    assert np.allclose(written, pixels * SCALE + OFFSET, rtol=0, atol=1e-4)  # float32, near 0 C too


def test_per_band_scales_are_named(tmp_path):
    pixels = np.arange(2 * 16 * 16, dtype=np.uint16).reshape(2, 16, 16)
    source = _tif(tmp_path / "b.tif", pixels, scales=(0.5, 0.25), offsets=(0.0, 0.0))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Scales differ across bands")  # rioxarray's own, on opening
        array = rioxarray.open_rasterio(source, mask_and_scale=False)
    assert array.attrs["scales"] == (0.5, 0.25)
    with pytest.warns(ScaleNotStoredWarning, match=r"^scales \(0\.5, 0\.25\) are not stored: rumi has no place for"):
        _write(tmp_path / "b.rumi", array)


def test_an_offset_alone_is_named(tmp_path):
    pixels = np.ones((1, 16, 16), np.uint8)
    source = _tif(tmp_path / "o.tif", pixels, scales=(1.0,), offsets=(5.0,))
    with rioxarray.open_rasterio(source, mask_and_scale=False) as array:
        with pytest.warns(ScaleNotStoredWarning, match="^add_offset 5 is not stored: rumi has no place for it;") as rec:
            _write(tmp_path / "o.rumi", array)
    assert "scale_factor" not in _notes(rec)[0]  # 1 changes nothing, so it is not named


@pytest.mark.filterwarnings("ignore:saving variable:xarray.SerializationWarning")  # no _FillValue: none needed
def test_zarr_read_without_decoding_is_named(tmp_path):
    # the same through xarray's own CF decoding, switched off
    pixels = np.random.default_rng(6).integers(0, 1000, (24, 40), dtype=np.int16)
    celsius = xr.DataArray(pixels * SCALE + OFFSET, dims=("y", "x"), name="t")
    encoding = {"t": {"dtype": "int16", "scale_factor": SCALE, "add_offset": OFFSET}}
    celsius.to_dataset().to_zarr(tmp_path / "t.zarr", encoding=encoding, consolidated=False)
    with xr.open_zarr(tmp_path / "t.zarr", mask_and_scale=False, consolidated=False) as raw:
        assert raw.t.dtype == np.int16
        with pytest.warns(ScaleNotStoredWarning, match="^scale_factor 0.01 and add_offset -273.15 are not stored"):
            raw.t.rumi.to_rumi(tmp_path / "raw.rumi", tile_size=16)
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "raw.rumi").read()[0], pixels)
    with xr.open_zarr(tmp_path / "t.zarr", consolidated=False) as decoded, warnings.catch_warnings():
        warnings.simplefilter("error", ScaleNotStoredWarning)
        decoded.t.rumi.to_rumi(tmp_path / "decoded.rumi", tile_size=16)


def test_unscaled_rasters_say_nothing(tmp_path):
    # open_rasterio puts scale_factor 1 and add_offset 0 on every raster: they change nothing
    pixels = np.ones((1, 16, 16), np.uint8)
    source = _tif(tmp_path / "plain.tif", pixels, scales=(1.0,), offsets=(0.0,))
    with rioxarray.open_rasterio(source) as array, warnings.catch_warnings():
        assert (array.attrs["scale_factor"], array.attrs["add_offset"]) == (1.0, 0.0)
        warnings.simplefilter("error", ScaleNotStoredWarning)
        _write(tmp_path / "plain.rumi", array)
        _write(tmp_path / "numpy.rumi", array.values)


def test_nodata_and_scale_are_both_named(tmp_path):
    pixels = np.full((1, 16, 16), 20000, np.int16)
    pixels[0, :4, :4] = -9999
    source = _tif(tmp_path / "n.tif", pixels, scales=(SCALE,), offsets=(OFFSET,), nodata=-9999)
    with rioxarray.open_rasterio(source, mask_and_scale=False) as array:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            _write(tmp_path / "n.rumi", array)
    assert len(_notes(record, NodataNotStoredWarning)) == 1 and len(_notes(record)) == 1


def test_nothing_written_no_warning(temperature, tmp_path):
    source, _ = temperature
    with rioxarray.open_rasterio(source, mask_and_scale=False) as array, warnings.catch_warnings():
        warnings.simplefilter("error", ScaleNotStoredWarning)
        with pytest.raises(ValueError, match="values do not fit"):
            xarray_rumi.write(tmp_path / "b.rumi", array, sample_type="uint8")
    assert not (tmp_path / "b.rumi").exists()


def test_per_band_scales_are_named_band_by_band():
    from xarray_rumi.writing.data_array import scale_note

    assert scale_note({"scales": (0.5, 1.0)}).startswith("scales (0.5, 1) are not stored: rumi has no place for them")
