"""``index="raster"``: x and y indexed by rasterix's RasterIndex from the georeferencing, the CRS assigned with xproj.

The coordinates equal the default ones value for value (area, point, south-up,
rotated), ``chunks`` never turns them into Dask arrays, ``.rio`` keeps working,
nothing of a caller's dataset changes, and label selection and alignment
behave as rasterix documents (docs/backend.md, "x and y indexed by rasterix").
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi.dataset.engine import INDEXES

rasterix = pytest.importorskip("rasterix", reason="index='raster' needs the rasterix extra (CI installs it with test)")
pytest.importorskip("xproj", reason="index='raster' needs the rasterix extra (CI installs it with test)")

from xarray_rumi.dataset.raster_index import InMemoryRasterIndex, raster_indexed  # noqa: E402

UTM = 32618
NORTH_UP = (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0)
SHAPE, TILE = (2, 45, 70), 32


def _write(path, transform=NORTH_UP, raster_type="area", crs=UTM, shape=SHAPE):
    data = np.arange(np.prod(shape), dtype="uint16").reshape(shape)
    kwargs = {} if crs is None else {"crs": crs, "transform": transform, "raster_type": raster_type}
    return xarray_rumi.write(path, data, tile_size=TILE, **kwargs), data


def _both(path, **kwargs):
    """The file opened with the default index and with index="raster"."""
    return (xr.open_dataset(path, engine="rumi", **kwargs),
            xr.open_dataset(path, engine="rumi", index="raster", **kwargs))


@pytest.mark.parametrize("transform, raster_type, crs", [
    (NORTH_UP, "area", UTM),
    ((30.0, 0.0, 500015.0, 0.0, -30.0, 3999985.0), "point", UTM),
    ((0.25, 0.0, 10.0, 0.0, 0.25, 40.0), "area", 4326),          # south-up: y grows with the row
    ((0.25, 0.0, 10.125, 0.0, 0.25, 40.125), "point", 4326),
    ((1 / 3, 0.0, -180.0, 0.0, -1 / 3, 90.0), "area", 4326),     # a pixel size with no exact binary form
])
def test_coordinates_equal_the_default_ones(tmp_path, transform, raster_type, crs):
    path = tmp_path / "a.rumi"
    _write(path, transform, raster_type, crs)
    default, raster = _both(path)
    index = raster.xindexes["x"]
    assert isinstance(index, rasterix.RasterIndex) and raster.xindexes["y"] is index
    np.testing.assert_array_equal(raster.x.values, default.x.values)   # bit for bit, not close
    np.testing.assert_array_equal(raster.y.values, default.y.values)
    # Built from the georeferencing: the corner transform GDAL and rioxarray report (PixelIsPoint shifted back).
    assert index.transform() == default.rio.transform()
    assert raster.rio.transform() == default.rio.transform()
    assert raster.rio.crs == default.rio.crs and raster.proj.crs.to_epsg() == crs and index.crs == raster.proj.crs
    assert raster.spatial_ref.attrs == default.spatial_ref.attrs        # GeoTransform and the WKT kept
    assert raster.band_data.attrs == default.band_data.attrs
    np.testing.assert_array_equal(raster.band_data.values, default.band_data.values)


def test_a_rotated_grid_gets_its_xc_and_yc(tmp_path):
    path = tmp_path / "r.rumi"
    _write(path, (10.0, 2.0, 1000.0, 1.5, -10.0, 5000.0))
    default, raster = _both(path, chunks={})
    assert "x" not in raster.coords and raster.xc.dims == ("y", "x")
    assert isinstance(raster.xindexes["xc"], rasterix.RasterIndex)
    np.testing.assert_array_equal(raster.xc.values, default.xc.values)
    np.testing.assert_array_equal(raster.yc.values, default.yc.values)
    assert isinstance(raster.xc.data, np.ndarray)                        # not a Dask array over the transform
    assert raster.rio.transform() == default.rio.transform()


@pytest.mark.parametrize("chunks", [None, {}, "auto"])
def test_chunks_leave_the_coordinates_in_memory(tmp_path, chunks):
    path = tmp_path / "a.rumi"
    _, data = _write(path)
    kwargs = {} if chunks is None else {"chunks": chunks}
    default, raster = _both(path, **kwargs)
    # rasterix's own lazy coordinates become Dask arrays here, whose x[0] has shape (1,): .rio.transform() fails.
    for ds in (raster, raster.copy(), raster.chunk(), pickle.loads(pickle.dumps(raster))):
        assert isinstance(ds.x.data, np.ndarray) and isinstance(ds.y.data, np.ndarray)
        assert ds.x[0].shape == ()
        assert isinstance(ds.xindexes["x"], InMemoryRasterIndex)
        assert ds.rio.transform() == default.rio.transform() and ds.rio.crs.to_epsg() == UTM
    assert raster.band_data.chunks == default.band_data.chunks
    np.testing.assert_array_equal(raster.band_data.values, data)


def test_a_slice_keeps_an_exact_raster_index(tmp_path):
    path = tmp_path / "a.rumi"
    _write(path)
    default, raster = _both(path, chunks={})
    part = raster.isel(x=slice(10, 20), y=slice(5, 9))
    assert isinstance(part.xindexes["x"], InMemoryRasterIndex)
    assert part.xindexes["x"].transform().c == 500000.0 + 10 * 30.0       # exact: no float noise
    assert part.rio.transform() == default.isel(x=slice(10, 20), y=slice(5, 9)).rio.transform()
    np.testing.assert_array_equal(part.x.values, default.x.values[10:20])
    chunked = part.chunk()                                                # chunking after slicing, too
    assert isinstance(chunked.x.data, np.ndarray) and chunked.rio.transform() == part.rio.transform()
    assert raster.sel(x=slice(500100, 500400)).rio.transform().c == 500100.0 - 10.0
    assert raster.isel(x=3).sizes["y"] == SHAPE[1] and "x" not in raster.isel(x=3).xindexes  # a point drops it


def test_label_slices_take_the_pixels_the_bounds_fall_in(tmp_path):
    path = tmp_path / "a.rumi"
    _write(path)
    default, raster = _both(path)
    # Pixel centres 500015, 500045, 500075, ...: the default index keeps the centres inside the bounds,
    # the raster index every pixel from the one holding the start to the one holding the stop.
    assert default.sel(x=slice(500020, 500070)).x.values.tolist() == [500045.0]
    assert raster.sel(x=slice(500020, 500070)).x.values.tolist() == [500015.0, 500045.0, 500075.0]
    # y runs north to south in both: a slice from north to south
    assert default.sel(y=slice(3999980, 3999930)).y.values.tolist() == [3999955.0]
    assert raster.sel(y=slice(3999980, 3999930)).y.values.tolist() == [3999985.0, 3999955.0, 3999925.0]


def test_a_label_needs_nearest(tmp_path):
    path = tmp_path / "a.rumi"
    _write(path)
    default, raster = _both(path)
    assert float(default.sel(x=500045.0).x) == 500045.0
    with pytest.raises(ValueError, match="method='nearest'"):
        raster.sel(x=500045.0)
    assert float(raster.sel(x=500050.0, method="nearest").x) == 500045.0


def _image(tmp_path, name, x_origin, crs=UTM):
    path = tmp_path / name
    _write(path, (30.0, 0.0, x_origin, 0.0, -30.0, 4000000.0), crs=crs)
    return _both(path, chunks={})


def test_alignment_is_exact_up_to_rasterix_tolerance(tmp_path):
    a, a_raster = _image(tmp_path, "a.rumi", 500000.0)
    b, b_raster = _image(tmp_path, "b.rumi", 500000.0 + 1e-9)   # the same grid, written through another float path
    with pytest.raises(ValueError, match="exact"):
        xr.align(a, b, join="exact")
    assert xr.align(a, b)[0].sizes["x"] == 0                      # the default index: no label in common
    aligned, _ = xr.align(a_raster, b_raster, join="exact")        # transform_rtol=1e-12
    assert aligned.sizes["x"] == SHAPE[2]
    assert (a_raster.band_data + b_raster.band_data).sizes["x"] == SHAPE[2]


def test_align_and_concat_offset_images(tmp_path):
    _, a = _image(tmp_path, "a.rumi", 500000.0)
    _, shifted = _image(tmp_path, "s.rumi", 500000.0 + 5 * 30.0)
    inner, _ = xr.align(a, shifted)
    assert inner.sizes["x"] == SHAPE[2] - 5
    assert inner.x.values[0] == pytest.approx(500165.0, abs=1e-6)   # rebuilt from bounding boxes, within tolerance
    assert isinstance(inner.xindexes["x"], rasterix.RasterIndex) and inner.rio.crs.to_epsg() == UTM
    outer, _ = xr.align(a, shifted, join="outer")
    assert outer.sizes["x"] == SHAPE[2] + 5 and np.isnan(outer.band_data[0, 0, -1].values)

    _, right = _image(tmp_path, "r.rumi", 500000.0 + SHAPE[2] * 30.0)
    both = xr.concat([a, right], dim="x")
    assert both.sizes["x"] == 2 * SHAPE[2] and isinstance(both.xindexes["x"], rasterix.RasterIndex)
    assert both.rio.transform().c == pytest.approx(500000.0, abs=1e-6)
    np.testing.assert_array_equal(both.band_data.isel(x=slice(SHAPE[2], None)).values, right.band_data.values)
    with pytest.raises(ValueError, match="offsets are incompatible"):
        xr.concat([a, shifted], dim="x")                             # overlapping tiles do not concatenate


def test_alignment_refuses_another_crs_and_half_pixels(tmp_path):
    _, a = _image(tmp_path, "a.rumi", 500000.0)
    _, other_zone = _image(tmp_path, "z.rumi", 500000.0, crs=32619)
    with pytest.raises(ValueError, match="same CRS"):
        xr.align(a, other_zone)
    _, half = _image(tmp_path, "h.rumi", 500015.0)
    with pytest.raises((AssertionError, ValueError)):               # rasterix 0.2.4 asserts: no snapping
        xr.align(a, half)


def test_open_cube_with_a_raster_index(tmp_path):
    paths = [tmp_path / f"t{i}.rumi" for i in range(3)]
    for path in paths:
        _write(path)
    for chunks in ({}, "auto"):
        default = xarray_rumi.open_cube(paths, chunks=chunks)
        cube = xarray_rumi.open_cube(paths, chunks=chunks, index="raster")
        assert isinstance(cube.xindexes["x"], InMemoryRasterIndex) and isinstance(cube.x.data, np.ndarray)
        np.testing.assert_array_equal(cube.x.values, default.x.values)
        np.testing.assert_array_equal(cube.y.values, default.y.values)
        assert cube.band_data.chunks == default.band_data.chunks
        assert cube.rio.transform() == default.rio.transform() and cube.proj.crs.to_epsg() == UTM
        np.testing.assert_array_equal(cube.band_data.mean("time").values, default.band_data.mean("time").values)


def test_a_callers_dataset_is_left_alone(tmp_path):
    path = tmp_path / "a.rumi"
    blob, _ = _write(path)
    mine = xr.open_dataset(path, engine="rumi", header=blob)
    before = mine.copy(deep=True)
    georeferencing = xarray_rumi.open_image(path, header=blob).georeferencing
    raster = raster_indexed(mine, georeferencing, "a.rumi")
    assert mine.identical(before) and mine.spatial_ref.attrs == before.spatial_ref.attrs
    assert {type(i).__name__ for i in mine.xindexes.values()} == {"PandasIndex"}
    raster.x.attrs["units"] = "changed"
    raster.spatial_ref.attrs["GeoTransform"] = "changed"
    assert mine.identical(before)
    again = xr.open_dataset(path, engine="rumi", header=blob, index="raster")
    assert again.x.attrs["units"] == "metre" and again.spatial_ref.attrs == before.spatial_ref.attrs
    assert raster.copy().x.attrs["units"] == "changed"                # a copy keeps what was set on x


def test_unknown_index_is_refused_before_any_read(tmp_path):
    missing = tmp_path / "nothing-here.rumi"
    for index in ("pandas", 1, "Raster"):
        with pytest.raises(ValueError, match=r"is not one of None, 'default', 'raster'"):
            xr.open_dataset(missing, engine="rumi", index=index)
        with pytest.raises(ValueError, match=r"is not one of None, 'default', 'raster'"):
            xarray_rumi.open_cube([missing], index=index)
    assert INDEXES == ("default", "raster")


def test_default_is_the_default(tmp_path):
    path = tmp_path / "a.rumi"
    _write(path)
    plain = xr.open_dataset(path, engine="rumi")
    assert xr.open_dataset(path, engine="rumi", index="default").identical(plain)
    assert {type(plain.xindexes[n]).__name__ for n in ("x", "y")} == {"PandasIndex"}


def test_without_georeferencing_a_raster_index_is_refused(tmp_path):
    path = tmp_path / "plain.rumi"
    blob, _ = _write(path, crs=None)
    with pytest.raises(ValueError, match=r"index=\"raster\" needs georeferencing, and there is none in '.*plain\.rumi'"):
        xr.open_dataset(path, engine="rumi", index="raster")
    georeferenced = tmp_path / "geo.rumi"
    _write(georeferenced)
    with pytest.raises(ValueError, match="needs georeferencing"):
        xr.open_dataset(georeferenced, engine="rumi", index="raster", georeferencing=False)
    with pytest.raises(ValueError, match="needs georeferencing, and there is none in the Cube's 1 images"):
        xarray_rumi.open_cube([path], index="raster")
    given = xr.open_dataset(path, engine="rumi", header=blob, index="raster", crs=UTM, transform=NORTH_UP)
    assert given.rio.transform()[:6] == NORTH_UP


def test_without_rasterix_the_error_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "a.rumi"
    _write(path)
    monkeypatch.setitem(sys.modules, "rasterix", None)   # as if not installed
    monkeypatch.delitem(sys.modules, "xarray_rumi.dataset.raster_index")   # and not yet imported
    monkeypatch.delattr(xarray_rumi.dataset, "raster_index")
    for open_ in (lambda: xr.open_dataset(path, engine="rumi", index="raster"),
                  lambda: xarray_rumi.open_cube([path], index="raster")):
        with pytest.raises(ImportError) as raised:
            open_()
        message = str(raised.value)
        assert 'pip install "xarray-rumi[rasterix]"' in message and 'pip install ".[rasterix]"' in message
        assert "rasterix is not installed" in message
    assert xr.open_dataset(path, engine="rumi").x.size == SHAPE[2]   # the default index needs neither
