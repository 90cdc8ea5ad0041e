"""The same raster as GeoTIFF (rasterio) and as rumi opens to the same dataset.

``engine="rasterio"`` is the reference: dims, ``x``/``y`` (or rotated
``xc``/``yc``) and ``band`` coordinates, the ``spatial_ref`` attributes, CRS and
transform must be identical, for PixelIsArea, PixelIsPoint, rotated, geographic
and undefined georeferencing, and for the real rasters in ``shared/data``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import rasterio
import tifffile
import xarray as xr
from affine import Affine
from rasterio.errors import NotGeoreferencedWarning

import xarray_rumi

SHAPE = (3, 50, 70)
UTM = Affine(30, 0, 100000, 0, -30, 200000)
CASES = {
    "area": ("EPSG:32618", UTM, "Area"),
    "point": ("EPSG:32618", UTM, "Point"),
    "rotated": ("EPSG:32618", Affine.translation(100000, 200000) * Affine.rotation(20) * Affine.scale(30, -30), "Area"),
    "geographic": ("EPSG:4326", Affine(0.01, 0, -75.5, 0, -0.01, 40.25), "Area"),
    "undefined": (None, None, None),
}


def _geotiff(path, values, crs, transform, area_or_point):
    profile = dict(driver="GTiff", width=values.shape[2], height=values.shape[1], count=values.shape[0],
                   dtype=values.dtype, tiled=True, blockxsize=32, blockysize=32, compress="zstd", predictor=2)
    if crs is not None:
        profile.update(crs=crs, transform=transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(values)
            if area_or_point:
                dst.update_tags(AREA_OR_POINT=area_or_point)


def _stored_matrix(path):
    """The affine the GeoTIFF itself stores (tiepoint + scale, or the matrix), before GDAL's reading."""
    with tifffile.TiffFile(path) as tif:
        tags = tif.pages[0].tags
        if "ModelTransformationTag" in tags:
            m = tags["ModelTransformationTag"].value
            return (m[0], m[1], m[3], m[4], m[5], m[7])
        sx, sy, _ = tags["ModelPixelScaleTag"].value
        i, j, _, x, y, _ = tags["ModelTiepointTag"].value
        return (sx, 0.0, x - i * sx, 0.0, -sy, y + j * sy)


def _open_rasterio(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        return xr.open_dataset(path, engine="rasterio", mask_and_scale=False)


def assert_same_grid(reference: xr.Dataset, ours: xr.Dataset, *, attrs=True):
    assert ours.band_data.dims == reference.band_data.dims
    assert set(ours.coords) == set(reference.coords)
    for name in reference.coords:
        if name != "spatial_ref":
            assert ours[name].dims == reference[name].dims, name
            np.testing.assert_array_equal(ours[name].values, reference[name].values, err_msg=name)
    assert ours.rio.crs == reference.rio.crs
    assert ours.rio.transform() == reference.rio.transform()
    if attrs:
        assert ours.spatial_ref.attrs == reference.spatial_ref.attrs
        # mask_and_scale=False leaves rioxarray's scale_factor/add_offset (1, 0) in attrs; rumi has none.
        assert set(ours.band_data.attrs) <= {"AREA_OR_POINT"}
        assert ours.band_data.attrs.get("AREA_OR_POINT") == reference.band_data.attrs.get("AREA_OR_POINT")
    np.testing.assert_array_equal(ours.band_data.values, reference.band_data.values)


@pytest.mark.parametrize("case", CASES)
def test_same_dataset_as_rasterio(tmp_path, case):
    crs, transform, area_or_point = CASES[case]
    values = (np.arange(np.prod(SHAPE)) % 4099).reshape(SHAPE).astype("uint16")
    tif = tmp_path / "scene.tif"
    _geotiff(tif, values, crs, transform, area_or_point)
    rumi = tmp_path / "scene.rumi"
    if crs is None:
        blob = xarray_rumi.write(rumi, values, tile_size=32)
    else:
        # A rumi file stores the matrix as GeoTIFF defines it: for PixelIsPoint it
        # refers to pixel centres, which is exactly what GDAL wrote into the GeoTIFF.
        stored = _stored_matrix(tif)
        if case == "point":
            assert stored[2] == transform.c + 15 and stored[5] == transform.f - 15
        blob = xarray_rumi.write(rumi, values, tile_size=32, crs=crs, transform=stored,
                                 raster_type=area_or_point.lower())
    reference = _open_rasterio(tif)
    for header in (None, blob):
        assert_same_grid(reference, xr.open_dataset(rumi, engine="rumi", header=header))
    # Supplying the same georeferencing instead of reading it gives the same dataset.
    if crs is not None:
        supplied = xr.open_dataset(rumi, engine="rumi", header=blob, crs=crs, transform=stored,
                                   raster_type=area_or_point.lower())
        assert_same_grid(reference, supplied)
    if case == "rotated":
        assert "x" not in reference.coords and reference.xc.dims == ("y", "x")
    if case == "undefined":
        assert reference.rio.crs is None and "crs_wkt" not in reference.spatial_ref.attrs


SHARED = ["RGB.byte.tif", "shade.tif", "RGBA.uint16.tif", "small_dem_3m_merged.tif"]


@pytest.mark.parametrize("name", SHARED)
def test_real_rasters_open_like_rasterio(shared_data, tmp_path, name):
    """Read a real GeoTIFF with rioxarray, write it as rumi, compare the two datasets."""
    reference = _open_rasterio(shared_data / name)
    rumi = tmp_path / "real.rumi"
    blob = xarray_rumi.write(rumi, reference.band_data, tile_size=256)
    ours = xr.open_dataset(rumi, engine="rumi", header=blob, chunks={})
    # The GeoTIFFs carry nodata and statistics tags rumi has no place for: compare the
    # grid, the values and the grid mapping.
    assert_same_grid(reference, ours, attrs=False)
    assert ours.spatial_ref.attrs == reference.spatial_ref.attrs
    assert ours.band_data.encoding["sample_type"] == str(reference.band_data.dtype)


def test_real_complex_int16_raster(shared_data, tmp_path):
    """cint16.tif is georeferenced by GCPs, which rumi cannot store: values and type survive."""
    reference = _open_rasterio(shared_data / "cint16.tif")
    assert "x" not in reference.coords  # rioxarray gives no x/y for GCP rasters
    rumi = tmp_path / "cint16.rumi"
    xarray_rumi.write(rumi, reference.band_data.values, tile_size=64, sample_type="cint16")
    ours = xr.open_dataset(rumi, engine="rumi", chunks={})
    assert ours.band_data.encoding["sample_type"] == "cint16" and ours.band_data.dtype == np.complex64
    np.testing.assert_array_equal(ours.band_data.values, reference.band_data.values)
    assert ours.rio.crs is None and ours.x.values[0] == 0.5


def test_rumi_dataset_writes_back_to_the_same_file(tmp_path):
    """What the engine returns is what ``write`` takes: CRS, transform and sample type survive."""
    values = (np.arange(2 * 40 * 30) - 1000).reshape(2, 40, 30).astype(np.complex64)
    first = tmp_path / "a.rumi"
    blob = xarray_rumi.write(first, values, tile_size=16, sample_type="cint16", crs=4326,
                             transform=(0.5, 0, 10, 0, -0.5, 50))
    ds = xr.open_dataset(first, engine="rumi")
    again = xarray_rumi.write(tmp_path / "b.rumi", ds.band_data, tile_size=ds.band_data.encoding["tile_size"])
    assert again == blob
    back = xr.open_dataset(tmp_path / "b.rumi", engine="rumi")
    assert back.band_data.encoding["sample_type"] == "cint16"
    assert back.rio.crs.to_epsg() == 4326 and back.rio.transform() == Affine(0.5, 0, 10, 0, -0.5, 50)
