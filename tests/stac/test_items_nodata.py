"""``stac.item(..., nodata=)``: the nodata a rumi file cannot hold, published as every band's ``raster:bands`` nodata."""

from __future__ import annotations

import json

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.stac import item, item_collection

pystac = pytest.importorskip("pystac")
from pystac.extensions.raster import RasterExtension  # noqa: E402

DATE = "2024-05-01T10:00:00Z"


def _scene(tmp_path, dtype="int16", bands=2, **kwargs):
    path = tmp_path / f"{dtype}.rumi"
    blob = xarray_rumi.write(path, np.zeros((bands, 32, 32), dtype), tile_size=16, crs=32633,
                             transform=(10, 0, 500000, 0, -10, 5000000), **kwargs)
    return path, blob


def _bands(it):
    return it.assets["data"].extra_fields["raster:bands"]


def test_nodata_on_every_band(tmp_path):
    path, blob = _scene(tmp_path, bands=3)
    it = item(path, blob, datetime=DATE, nodata=-9999)
    assert [band["nodata"] for band in _bands(it)] == [-9999] * 3
    # pystac reads it back as the raster extension's nodata, through JSON
    again = pystac.Item.from_dict(json.loads(json.dumps(it.to_dict())))
    raster = RasterExtension.ext(again.assets["data"])
    assert [band.nodata for band in raster.bands] == [-9999] * 3
    assert [band.data_type for band in raster.bands] == ["int16"] * 3


def test_no_nodata_no_field(tmp_path):
    path, blob = _scene(tmp_path)
    assert all("nodata" not in band for band in _bands(item(path, blob, datetime=DATE)))


@pytest.mark.parametrize(("nodata", "expected"), [
    (float("nan"), "nan"), (np.float32("nan"), "nan"), ("nan", "nan"),
    (float("inf"), "inf"), (-np.inf, "-inf"), ("-inf", "-inf"),
    (-3.4028234663852886e38, -3.4028234663852886e38), (0.5, 0.5), (-9999, -9999),
])
def test_float_nodata_as_the_raster_extension_writes_it(tmp_path, nodata, expected):
    # STAC's JSON has no NaN or infinity: the raster extension spells them "nan", "inf", "-inf"
    path, blob = _scene(tmp_path, "float32")
    value = _bands(item(path, blob, datetime=DATE, nodata=nodata))[0]["nodata"]
    assert value == expected and type(value) is type(expected)
    assert "NaN" not in json.dumps(item(path, blob, datetime=DATE, nodata=nodata).to_dict(), allow_nan=False)


@pytest.mark.parametrize(("dtype", "nodata", "expected"), [
    ("uint8", 255, 255), ("uint8", 255.0, 255), ("int16", "-9999", -9999), ("int8", -128, -128),
    ("uint64", 2**64 - 1, 2**64 - 1), ("uint64", np.uint64(2**64 - 1), 2**64 - 1),   # exact: no trip through float
])
def test_integer_nodata_is_an_exact_integer(tmp_path, dtype, nodata, expected):
    path, blob = _scene(tmp_path, dtype)
    value = _bands(item(path, blob, datetime=DATE, nodata=nodata))[0]["nodata"]
    assert value == expected and type(value) is int


@pytest.mark.parametrize(("dtype", "sample_type", "nodata"), [
    ("uint8", None, -1), ("uint8", None, 256), ("uint16", None, -9999), ("int16", None, 0.5),
    ("int16", None, float("nan")), ("uint8", "uint4", 16), ("int8", "int2", -3),
])
def test_a_nodata_the_samples_cannot_hold_is_refused(tmp_path, dtype, sample_type, nodata):
    path, blob = _scene(tmp_path, dtype, sample_type=sample_type)
    with pytest.raises(ValueError, match=f"nodata .* is not a value of {sample_type or dtype} samples"):
        item(path, blob, datetime=DATE, nodata=nodata)


@pytest.mark.parametrize("nodata", [True, "none", [0]])
def test_a_nodata_that_is_no_number_is_refused(tmp_path, nodata):
    path, blob = _scene(tmp_path)
    with pytest.raises(TypeError, match="nodata must be a number"):
        item(path, blob, datetime=DATE, nodata=nodata)


def test_sub_byte_nodata_in_range(tmp_path):
    path, blob = _scene(tmp_path, "uint8", sample_type="uint4")
    assert _bands(item(path, blob, datetime=DATE, nodata=15))[0] == {"data_type": "uint8", "bits_per_sample": 4,
                                                                       "nodata": 15}


def test_item_collection_passes_nodata(tmp_path):
    path, blob = _scene(tmp_path)
    collection = item_collection([path], [blob], datetime=DATE, nodata=0)
    assert [band["nodata"] for band in _bands(collection.items[0])] == [0, 0]
