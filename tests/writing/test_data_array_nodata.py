"""rumi has no place for nodata: every write of data that has one says so, in the words `rumi convert` uses."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import rasterio
import rioxarray
import xarray as xr

import xarray_rumi
from xarray_rumi.cli import main
from xarray_rumi.writing.data_array import NodataNotStoredWarning, nodata_note

NODATA = -9999


@pytest.fixture
def tif(tmp_path):
    """An int16 GeoTIFF with nodata -9999 in its corner, and its pixels."""
    pixels = np.random.default_rng(3).integers(0, 1000, (2, 40, 56), dtype=np.int16)
    pixels[:, :8, :8] = NODATA
    path = tmp_path / "dem.tif"
    with rasterio.open(path, "w", driver="GTiff", width=56, height=40, count=2, dtype="int16", crs="EPSG:32633",
                       transform=rasterio.Affine(10, 0, 399960, 0, -10, 5000040), nodata=NODATA) as dst:
        dst.write(pixels)
    return path, pixels


def _write(path, array):
    return xarray_rumi.write(path, array, tile_size=16)


def test_open_rasterio_nodata_is_named(tif, tmp_path, write_each_way):
    source, pixels = tif
    with rioxarray.open_rasterio(source) as array:  # nodata in attrs["_FillValue"]
        assert array.attrs["_FillValue"] == NODATA
        with pytest.warns(NodataNotStoredWarning) as record:
            write_each_way(tmp_path / "a.rumi", array, tile_size=16)
    notes = [str(w.message) for w in record if w.category is NodataNotStoredWarning]
    assert notes == [nodata_note(NODATA)]  # once per write
    assert notes[0].startswith("nodata -9999 is not stored")
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "a.rumi").read(), pixels)  # sentinel kept


def test_masked_nodata_is_named_as_what_is_written(tif, tmp_path, write_each_way):
    # mask_and_scale: -9999 moves to the encoding and the missing pixels are NaN in memory, as written
    source, pixels = tif
    with rioxarray.open_rasterio(source, mask_and_scale=True, chunks={}) as array:
        assert array.encoding["_FillValue"] == NODATA and "_FillValue" not in array.attrs
        with pytest.warns(NodataNotStoredWarning, match="^nodata nan is not stored"):
            write_each_way(tmp_path / "a.rumi", array, tile_size=16)
    written = xarray_rumi.open_image(tmp_path / "a.rumi").read()
    assert np.isnan(written[:, :8, :8]).all()
    assert np.array_equal(np.where(pixels == NODATA, np.nan, pixels), written, equal_nan=True)


@pytest.mark.parametrize(("attrs", "encoding", "expected"), [
    ({"_FillValue": 0}, {}, "nodata 0 "),
    ({}, {"_FillValue": 255}, "nodata nan "),          # encoded: masked to NaN in the float array
    ({"nodata": -1.5}, {}, "nodata -1.5 "),
    ({"missing_value": 7}, {}, "nodata 7 "),
])
@pytest.mark.parametrize("with_rioxarray", [True, False])
def test_every_place_nodata_lives(tmp_path, monkeypatch, attrs, encoding, expected, with_rioxarray):
    if not with_rioxarray:
        monkeypatch.setitem(sys.modules, "rioxarray", None)  # `import rioxarray` now fails
    array = xr.DataArray(np.ones((1, 16, 16), "float32"), dims=("band", "y", "x"), attrs=attrs)
    array.encoding.update(encoding)
    with pytest.warns(NodataNotStoredWarning, match=f"^{expected}is not stored"):
        _write(tmp_path / "a.rumi", array)


def test_rio_write_nodata_is_named(tmp_path):
    array = xr.DataArray(np.ones((1, 16, 16), "uint8"), dims=("band", "y", "x")).rio.write_nodata(255)
    with pytest.warns(NodataNotStoredWarning, match="^nodata 255 is not stored"):
        array.rumi.to_rumi(tmp_path / "a.rumi", tile_size=16)


def test_no_warning_without_nodata(tif, tmp_path):
    source, pixels = tif
    with warnings.catch_warnings():
        warnings.simplefilter("error", NodataNotStoredWarning)
        _write(tmp_path / "numpy.rumi", pixels)                             # numpy: no attributes to hold one
        with rioxarray.open_rasterio(source, chunks={}) as array:
            _write(tmp_path / "dask.rumi", array.data)                      # nor a bare Dask array
        # read back from rumi: no nodata, so nothing to warn about
        with xr.open_dataset(tmp_path / "numpy.rumi", engine="rumi") as opened:
            opened.band_data.rumi.to_rumi(tmp_path / "copy.rumi")
            opened.rumi.to_rumi(tmp_path / "copy-ds.rumi")
        with xr.open_dataset(tmp_path / "numpy.rumi", engine="rumi", chunks={}) as opened:
            _write(tmp_path / "copy-dask.rumi", opened.band_data)


def test_nothing_written_no_warning(tif, tmp_path):
    source, _ = tif
    with rioxarray.open_rasterio(source) as array, warnings.catch_warnings():
        warnings.simplefilter("error", NodataNotStoredWarning)
        with pytest.raises(ValueError, match="values do not fit"):
            xarray_rumi.write(tmp_path / "b.rumi", array, sample_type="uint8")
    assert not (tmp_path / "b.rumi").exists()


def test_convert_says_the_same(tif, tmp_path, capsys):
    source, _ = tif
    assert main(["convert", str(source), str(tmp_path / "c.rumi"), "--tile-size", "16"]) == 0
    assert f"note: {nodata_note(NODATA)}" in capsys.readouterr().out


def test_note_names_the_value_as_written():
    assert nodata_note(-9999.0).startswith("nodata -9999 is not stored: rumi has no place for it; ")
    assert nodata_note(np.float32(0.1)).startswith("nodata 0.1 ")
    assert nodata_note(np.uint64(2**64 - 1)).startswith(f"nodata {2**64 - 1} ")
    assert nodata_note(float("nan")).startswith("nodata nan ")
    assert nodata_note(-3.4028234663852886e38).startswith("nodata -3.4028234663852886e+38 ")
    assert "xarray_rumi.stac.item" in nodata_note(0)
