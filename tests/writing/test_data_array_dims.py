"""A DataArray is written by dimension name, never by position: (y, x, band) is 3 bands, not 600."""

from __future__ import annotations

import sys

import dask
import dask.array as da
import numpy as np
import pytest
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr
from affine import Affine

import xarray_rumi
from xarray_rumi.writing.data_array import _named_spatial_dims, as_band_array, band_y_x

TRANSFORM = Affine(10, 0, 399960, 0, -10, 5000040)
BANDS, ROWS, COLS = 3, 60, 80


def _pixels():
    return np.random.default_rng(1).integers(0, 4000, (BANDS, ROWS, COLS), dtype=np.uint16)


def _georeferenced(pixels, dims, *, lazy=False):
    """``pixels`` (band, y, x) as a DataArray with dims in the order given, rioxarray CRS and transform set."""
    array = xr.DataArray(
        pixels, dims=("band", "y", "x"),
        coords={"band": [1, 2, 3], "y": 5000040 - 10 * (np.arange(ROWS) + 0.5),
                "x": 399960 + 10 * (np.arange(COLS) + 0.5)},
    ).transpose(*dims)
    if lazy:
        array = array.chunk({"y": 32, "x": 32})
    return array.rio.write_crs("EPSG:32633").rio.write_transform(TRANSFORM)


def _write(path, array):
    return xarray_rumi.write(path, array, tile_size=32)


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
@pytest.mark.parametrize("dims", [("y", "x", "band"), ("x", "band", "y"), ("band", "x", "y")])
def test_any_order_round_trips_exactly(tmp_path, dims, write_each_way, lazy):
    pixels = _pixels()
    write_each_way(tmp_path / "a.rumi", _georeferenced(pixels, dims, lazy=lazy), tile_size=32)
    with xr.open_dataset(tmp_path / "a.rumi", engine="rumi") as opened:
        band_data = opened.band_data
        assert band_data.dims == ("band", "y", "x")
        assert np.array_equal(band_data.values, pixels)
        assert band_data.rio.transform() == TRANSFORM
        assert band_data.rio.crs.to_epsg() == 32633


def test_same_bytes_as_band_y_x(tmp_path):
    pixels = _pixels()
    blob = _write(tmp_path / "ordered.rumi", _georeferenced(pixels, ("band", "y", "x")))
    assert _write(tmp_path / "yxb.rumi", _georeferenced(pixels, ("y", "x", "band"))) == blob
    assert (tmp_path / "yxb.rumi").read_bytes() == (tmp_path / "ordered.rumi").read_bytes()


def test_dask_is_transposed_without_loading():
    pixels = _pixels()
    array = _georeferenced(pixels, ("y", "x", "band"), lazy=True)
    with dask.config.set(scheduler=_refuse_compute):
        values = as_band_array(array).values
    assert dask.is_dask_collection(values) and values.shape == (BANDS, ROWS, COLS)
    assert np.array_equal(values.compute(scheduler="sync"), pixels)


def _refuse_compute(*args, **kwargs):
    raise AssertionError("the transpose computed the Dask array")


@pytest.mark.parametrize("dims", [("y", "x"), ("x", "y")])
def test_two_dimensional_arrays_by_name(tmp_path, dims):
    pixels = _pixels()[0]
    array = xr.DataArray(pixels, dims=("y", "x")).transpose(*dims)
    array.rumi.to_rumi(tmp_path / "a.rumi", tile_size=32)
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "a.rumi").read(), pixels[None])


def test_names_without_georeferencing(tmp_path):
    # no coordinates, no CRS: the names alone say which is which, and nothing is georeferenced
    pixels = _pixels()
    _write(tmp_path / "a.rumi", xr.DataArray(pixels.transpose(1, 2, 0), dims=("y", "x", "band")))
    image = xarray_rumi.open_image(tmp_path / "a.rumi")
    assert np.array_equal(image.read(), pixels)
    assert not image.georeferencing.is_defined


def test_dimensions_named_with_set_spatial_dims(tmp_path):
    pixels = _pixels()
    array = _georeferenced(pixels, ("y", "x", "band")).rename({"y": "row", "x": "col", "band": "channel"})
    array = array.rio.set_spatial_dims(x_dim="col", y_dim="row")
    _write(tmp_path / "a.rumi", array)
    with xr.open_dataset(tmp_path / "a.rumi", engine="rumi") as opened:
        assert np.array_equal(opened.band_data.values, pixels)
        assert opened.band_data.rio.transform() == TRANSFORM


def test_cf_axis_attributes_name_the_spatial_dims(tmp_path):
    pixels = _pixels()
    array = xr.DataArray(pixels.transpose(2, 1, 0), dims=("lon", "lat", "time"),
                         coords={"lon": ("lon", np.arange(COLS), {"axis": "X"}),
                                 "lat": ("lat", np.arange(ROWS), {"standard_name": "latitude"})})
    assert band_y_x(array) == ("time", "lat", "lon")
    _write(tmp_path / "a.rumi", array)
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "a.rumi").read(), pixels)


@pytest.mark.parametrize("dims", [("a", "b", "c"), ("band", "rows", "cols"), ("band", "y", "lon"), ("a", "b")])
def test_unnamed_dimensions_are_refused(tmp_path, dims, write_each_way):
    array = xr.DataArray(np.zeros((4,) * len(dims), "uint8"), dims=dims)
    with pytest.raises(ValueError, match="cannot tell which dimensions") as error:
        write_each_way(tmp_path / "a.rumi", array, tile_size=32)
    assert str(dims) in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_more_than_one_band_dimension_is_refused(tmp_path):
    array = xr.DataArray(np.zeros((2, 3, 4, 4), "uint8"), dims=("time", "band", "y", "x"))
    with pytest.raises(ValueError, match=r"at most one band dimension.*\('time', 'band', 'y', 'x'\)"):
        _write(tmp_path / "a.rumi", array)
    assert list(tmp_path.iterdir()) == []


def test_numpy_and_dask_stay_positional(tmp_path):
    pixels = _pixels()
    _write(tmp_path / "np.rumi", pixels)
    _write(tmp_path / "dask.rumi", da.from_array(pixels, chunks=(1, 32, 40)))
    for name in ("np.rumi", "dask.rumi"):
        assert np.array_equal(xarray_rumi.open_image(tmp_path / name).read(), pixels)


# --- without rioxarray: the same names rioxarray recognises ----------------------------------------------------

SPATIAL_CASES = {
    "y-x": xr.DataArray(np.zeros((2, 3, 4)), dims=("x", "band", "y")),
    "lat-lon": xr.DataArray(np.zeros((3, 4)), dims=("longitude", "latitude")),
    "x and latitude": xr.DataArray(np.zeros((3, 4)), dims=("x", "latitude")),
    "lat/lon are not names rioxarray knows": xr.DataArray(np.zeros((3, 4)), dims=("lat", "lon")),
    "cf axis": xr.DataArray(np.zeros((3, 4)), dims=("r", "c"),
                            coords={"r": ("r", np.arange(3), {"axis": "Y"}), "c": ("c", np.arange(4), {"axis": "X"})}),
    "cf standard names": xr.DataArray(
        np.zeros((3, 4)), dims=("n", "e"),
        coords={"n": ("n", np.arange(3), {"standard_name": "projection_y_coordinate"}),
                "e": ("e", np.arange(4), {"standard_name": "projection_x_coordinate"})}),
    "only x": xr.DataArray(np.zeros((3, 4)), dims=("row", "c"), coords={"c": ("c", np.arange(4), {"axis": "X"})}),
}


@pytest.mark.parametrize("case", SPATIAL_CASES)
def test_fallback_finds_what_rioxarray_finds(case):
    array = SPATIAL_CASES[case]
    try:
        expected = (array.rio.y_dim, array.rio.x_dim)
    except rioxarray.exceptions.MissingSpatialDimensionError:
        expected = None
    assert _named_spatial_dims(array) == expected


def test_without_rioxarray(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "rioxarray", None)  # `import rioxarray` now fails
    pixels = _pixels()
    xr.DataArray(pixels.transpose(2, 1, 0), dims=("longitude", "latitude", "band")).rumi.to_rumi(tmp_path / "a.rumi")
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "a.rumi").read(), pixels)
    with pytest.raises(ValueError, match="cannot tell which dimensions"):
        xr.DataArray(pixels, dims=("band", "rows", "cols")).rumi.to_rumi(tmp_path / "b.rumi")
