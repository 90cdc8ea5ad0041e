"""A DataArray's transform is written only where it puts every pixel at its coordinates; else write refuses.

rioxarray's ``rio.transform()`` returns the identity when it cannot tell the
pixel size (one row or column, or no coordinates, and no stored transform),
averages uneven coordinates, and keeps a stored ``GeoTransform`` that
``sortby`` or a strided ``isel`` made stale: each wrote wrong georeferencing
without a word.
"""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
import rioxarray
import xarray as xr
from affine import Affine

import xarray_rumi

TRANSFORM = Affine(10, 0, 399960, 0, -10, 5000040)
BANDS, ROWS, COLS = 2, 24, 40


def _pixels():
    return np.random.default_rng(7).integers(0, 4000, (BANDS, ROWS, COLS), dtype=np.uint16)


def _coords(rows=ROWS, cols=COLS):
    return {"y": 5000040 - 10 * (np.arange(rows) + 0.5), "x": 399960 + 10 * (np.arange(cols) + 0.5)}


def _from_coords(pixels, **coords):
    """A DataArray with a CRS, coordinates and no stored transform: rioxarray infers one from the coordinates."""
    coords = {**_coords(pixels.shape[1], pixels.shape[2]), **coords}
    return xr.DataArray(pixels, dims=("band", "y", "x"), coords=coords).rio.write_crs("EPSG:32633")


@pytest.fixture
def tif(tmp_path):
    """A GeoTIFF opened with rioxarray: its transform stored in spatial_ref's GeoTransform."""
    pixels = _pixels()
    with rasterio.open(tmp_path / "in.tif", "w", driver="GTiff", width=COLS, height=ROWS, count=BANDS,
                       dtype="uint16", crs="EPSG:32633", transform=TRANSFORM) as dst:
        dst.write(pixels)
    with rioxarray.open_rasterio(tmp_path / "in.tif") as array:
        assert "GeoTransform" in array.spatial_ref.attrs
        yield array


def _write(path, array, **kwargs):
    return xarray_rumi.write(path, array, tile_size=16, **kwargs)


def _round_trips(path, array):
    """The file opens to ``array``'s coordinates and values, with a valid transform."""
    xarray_rumi.validate(path)
    with xr.open_dataset(path, engine="rumi") as opened:
        band_data = opened.band_data
        assert band_data.rio.crs.to_epsg() == 32633
        np.testing.assert_allclose(band_data.x, array.x, rtol=0, atol=1e-6)
        np.testing.assert_allclose(band_data.y, array.y, rtol=0, atol=1e-6)
        assert np.array_equal(band_data.values, array.transpose("band", "y", "x").values)
        return band_data.rio.transform()


# --- a pixel size nothing says: refused, unless transform= says it -----------------------------------------------


@pytest.mark.parametrize(("cut", "dim"), [({"y": [3]}, "y"), ({"x": [5]}, "x")], ids=["one row", "one column"])
def test_one_row_or_column_without_a_stored_transform_is_refused(tmp_path, write_each_way, cut, dim):
    array = _from_coords(_pixels()).isel(cut)
    assert array.rio.transform() == Affine.identity()  # what used to be written, with the CRS
    with pytest.raises(ValueError, match=f"cannot tell the pixel size along {dim}: the DataArray has 1 {dim} "
                                         "coordinate and no stored transform") as error:
        write_each_way(tmp_path / "a.rumi", array, tile_size=16)
    assert "pass transform=" in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_no_coordinates_and_no_stored_transform_is_refused(tmp_path):
    array = xr.DataArray(_pixels(), dims=("band", "y", "x")).rio.write_crs("EPSG:32633")
    with pytest.raises(ValueError, match="cannot tell the pixel size along y: the DataArray has no y coordinate"):
        _write(tmp_path / "a.rumi", array)
    assert list(tmp_path.iterdir()) == []


def test_transform_given_writes_it_with_the_data_arrays_crs(tmp_path):
    array = _from_coords(_pixels()).isel(y=[0])
    _write(tmp_path / "a.rumi", array, transform=TRANSFORM)
    assert _round_trips(tmp_path / "a.rumi", array) == TRANSFORM


def test_one_row_with_a_stored_transform_is_written(tif, tmp_path):
    row = tif.isel(y=[3])
    row.rumi.to_rumi(tmp_path / "a.rumi", tile_size=16)
    assert _round_trips(tmp_path / "a.rumi", row) == TRANSFORM * Affine.translation(0, 3)


def test_no_coordinates_with_a_stored_transform_is_written(tmp_path):
    array = xr.DataArray(_pixels(), dims=("band", "y", "x")).rio.write_crs("EPSG:32633").rio.write_transform(TRANSFORM)
    _write(tmp_path / "a.rumi", array)
    assert xarray_rumi.open_image(tmp_path / "a.rumi").georeferencing.transform == tuple(TRANSFORM)[:6]


# --- coordinates no transform reproduces: refused -----------------------------------------------------------------


UNEVEN_X = 399960 + np.cumsum(np.arange(1, COLS + 1)).astype(float)


@pytest.mark.parametrize("stored", [False, True], ids=["inferred", "stored"])
def test_uneven_coordinates_are_refused(tmp_path, stored):
    array = _from_coords(_pixels(), x=UNEVEN_X)
    if stored:
        array = array.rio.write_transform(TRANSFORM)
    with pytest.raises(ValueError, match=r"x coordinates are not a regular grid \(steps from 2 to 40\)") as error:
        _write(tmp_path / "a.rumi", array)
    assert "pass transform=" in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_uneven_coordinates_with_transform_given_are_written(tmp_path):
    _write(tmp_path / "a.rumi", _from_coords(_pixels(), x=UNEVEN_X), transform=TRANSFORM)
    assert xarray_rumi.open_image(tmp_path / "a.rumi").georeferencing.transform == tuple(TRANSFORM)[:6]


def test_one_missing_row_is_refused(tif, tmp_path):
    # a gap in the middle: the average spacing would move every row but the first and last
    with pytest.raises(ValueError, match="y coordinates are not a regular grid"):
        _write(tmp_path / "a.rumi", tif.drop_isel(y=10))


def test_coordinates_within_their_precision_are_written(tmp_path):
    pixels = _pixels()
    # float32 northings are good to half a metre; a 0.1-degree grid made by arange carries rounding
    northings = _from_coords(pixels, y=_coords()["y"].astype(np.float32), x=_coords()["x"].astype(np.float32))
    _write(tmp_path / "f32.rumi", northings)
    assert xarray_rumi.open_image(tmp_path / "f32.rumi").georeferencing.transform == tuple(TRANSFORM)[:6]
    degrees = xr.DataArray(pixels, dims=("band", "y", "x"),
                           coords={"y": np.arange(60, 60 - ROWS * 0.1, -0.1)[:ROWS] - 0.05,
                                   "x": np.arange(-180, -180 + COLS * 0.1, 0.1)[:COLS] + 0.05}).rio.write_crs(4326)
    _write(tmp_path / "deg.rumi", degrees)
    np.testing.assert_allclose(xarray_rumi.open_image(tmp_path / "deg.rumi").georeferencing.transform,
                               (0.1, 0, -180, 0, -0.1, 60), rtol=0, atol=1e-9)


# --- a stored transform gone stale: the coordinates win ------------------------------------------------------------


@pytest.mark.parametrize("chunks", [None, {}], ids=["numpy", "dask"])
@pytest.mark.parametrize("change", ["sortby y", "every other column", "x reversed", "y reversed"])
def test_stale_stored_transform_follows_the_coordinates(tmp_path, tif, change, chunks):
    array = tif.chunk(chunks) if chunks is not None else tif
    changed = {
        "sortby y": lambda a: a.sortby("y"),                              # south-up
        "every other column": lambda a: a.isel(x=slice(None, None, 2)),   # 20 m pixels
        "x reversed": lambda a: a.isel(x=slice(None, None, -1)),
        "y reversed": lambda a: a.isel(y=slice(None, None, -1)),
    }[change](array)
    assert changed.spatial_ref.attrs["GeoTransform"] == tif.spatial_ref.attrs["GeoTransform"]  # stale
    changed.rumi.to_rumi(tmp_path / "a.rumi", tile_size=16)
    _round_trips(tmp_path / "a.rumi", changed)


def test_south_up_is_stored_with_a_positive_y_resolution(tmp_path):
    pixels = _pixels()
    south_up = _from_coords(pixels).sortby("y")
    _write(tmp_path / "a.rumi", south_up)
    transform = _round_trips(tmp_path / "a.rumi", south_up)
    assert transform == Affine(10, 0, 399960, 0, 10, 5000040 - 10 * ROWS)
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "a.rumi").read(), pixels[:, ::-1])


def test_point_rasters_shift_the_recalculated_transform(tif, tmp_path):
    # PixelIsPoint: the matrix maps indices to pixel centres, from whichever transform reproduces the coordinates
    every_other = tif.isel(x=slice(None, None, 2))
    _write(tmp_path / "a.rumi", every_other, raster_type="point")
    a, _, c, _, e, f = xarray_rumi.open_image(tmp_path / "a.rumi").georeferencing.transform
    assert (a, c, e, f) == (20, float(every_other.x[0]), -10, float(every_other.y[0]))
    _round_trips(tmp_path / "a.rumi", every_other)


def test_rotated_stored_transform_is_written_as_stored(tmp_path):
    rotated = TRANSFORM * Affine.rotation(30)
    array = xr.DataArray(_pixels(), dims=("band", "y", "x")).rio.write_crs("EPSG:32633").rio.write_transform(rotated)
    _write(tmp_path / "a.rumi", array)
    np.testing.assert_allclose(xarray_rumi.open_image(tmp_path / "a.rumi").georeferencing.transform,
                               tuple(rotated)[:6], rtol=1e-15)


# --- what the DataArray's CRS is, and when there is none ----------------------------------------------------------


def test_crs_given_takes_the_transform_from_the_coordinates(tmp_path):
    array = xr.DataArray(_pixels(), dims=("band", "y", "x"), coords=_coords())  # coordinates, no CRS
    _write(tmp_path / "a.rumi", array, crs="EPSG:32633")
    assert _round_trips(tmp_path / "a.rumi", array) == TRANSFORM


@pytest.mark.parametrize("case", ["one row", "uneven", "no coordinates"])
def test_without_crs_nothing_is_checked_and_nothing_georeferenced(tmp_path, case):
    pixels = _pixels()
    array = {
        "one row": lambda: xr.DataArray(pixels, dims=("band", "y", "x"), coords=_coords()).isel(y=[0]),
        "uneven": lambda: xr.DataArray(pixels, dims=("band", "y", "x"), coords={**_coords(), "x": UNEVEN_X}),
        "no coordinates": lambda: xr.DataArray(pixels, dims=("band", "y", "x")),
    }[case]()
    _write(tmp_path / "a.rumi", array)
    image = xarray_rumi.open_image(tmp_path / "a.rumi")
    assert not image.georeferencing.is_defined
    assert np.array_equal(image.read(), array.values)


def test_transform_without_any_crs_is_still_refused(tmp_path):
    array = xr.DataArray(_pixels(), dims=("band", "y", "x"), coords=_coords())
    with pytest.raises(ValueError, match="a transform without a CRS cannot be stored"):
        _write(tmp_path / "a.rumi", array, transform=TRANSFORM)
