"""A DataArray georeferenced by GCPs is not affine: written without georeferencing, and the write says so."""

from __future__ import annotations

import warnings

import dask.array
import numpy as np
import pytest
import rioxarray
import xarray as xr
from rasterio.control import GroundControlPoint

import xarray_rumi
from xarray_rumi.writing.data_array import GcpsNotStoredWarning


def _gcp_array(values=None):
    """What ``rioxarray.open_rasterio`` gives for a GCP raster: rio.crs from the GCPs, no x/y, identity GeoTransform."""
    values = np.arange(1 * 20 * 30, dtype="uint16").reshape(1, 20, 30) if values is None else values
    da = xr.DataArray(values, dims=("band", "y", "x"), coords={"band": [1]})
    gcps = [GroundControlPoint(row=r, col=c, x=12 + c / 1000, y=47 - r / 1000) for r in (0, 20) for c in (0, 30)]
    da = da.rio.write_gcps(gcps, 4326)
    da.spatial_ref.attrs["GeoTransform"] = "0.0 1.0 0.0 0.0 0.0 1.0"
    assert da.rio.crs.to_epsg() == 4326  # the trap: a CRS, and rio.transform() the identity
    return da


def test_gcps_are_not_written_as_an_affine_crs(tmp_path, write_each_way):
    da, path = _gcp_array(), tmp_path / "a.rumi"
    with pytest.warns(GcpsNotStoredWarning, match="georeferenced by 4 ground control points.*no georeferencing"):
        write_each_way(path, da, tile_size=16)
    image = xarray_rumi.open_image(path)
    assert not image.georeferencing.is_defined
    np.testing.assert_array_equal(image.read(), da.values)


def test_the_warning_says_how_to_get_an_affine_grid(tmp_path):
    with pytest.warns(GcpsNotStoredWarning) as caught:
        xarray_rumi.write(tmp_path / "a.rumi", _gcp_array(), tile_size=16)
    message = str(caught[0].message)
    assert "rumi stores only an affine transform" in message and "da.rio.reproject(da.rio.crs)" in message


def test_crs_and_transform_given_are_written_without_a_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GcpsNotStoredWarning)
        xarray_rumi.write(tmp_path / "a.rumi", _gcp_array(), tile_size=16, crs=4326,
                          transform=(0.001, 0, 12, 0, -0.001, 47))
    g = xarray_rumi.open_image(tmp_path / "a.rumi").georeferencing
    assert g.epsg == 4326 and g.transform == (0.001, 0, 12, 0, -0.001, 47)


def test_crs_alone_is_not_paired_with_the_identity(tmp_path):
    with pytest.raises(ValueError, match="a CRS needs a transform"):
        xarray_rumi.write(tmp_path / "a.rumi", _gcp_array(), tile_size=16, crs=4326)


@pytest.mark.filterwarnings("ignore::xarray_rumi.writing.data_array.NodataNotStoredWarning")  # its nodata 0
def test_real_gcp_geotiff_keeps_its_complex_int16_type(shared_data, tmp_path):
    """cint16.tif: 210 GCPs in EPSG:4326, complex_int16 samples that rioxarray widens to complex64."""
    src = rioxarray.open_rasterio(shared_data / "cint16.tif")
    with pytest.warns(GcpsNotStoredWarning, match="210 ground control points"):
        xarray_rumi.write(tmp_path / "a.rumi", src, tile_size=64)
    back = xr.open_dataset(tmp_path / "a.rumi", engine="rumi")
    assert back.rio.crs is None
    assert back.band_data.encoding["sample_type"] == "cint16"          # as rumi convert writes it
    np.testing.assert_array_equal(back.band_data.values, src.values)


def _complex_int16_array(values):
    da = xr.DataArray(values, dims=("band", "y", "x"))
    da.encoding["rasterio_dtype"] = "complex_int16"
    return da


def test_complex_values_that_do_not_fit_cint16_keep_complex64(tmp_path):
    values = np.full((1, 8, 8), 1.5 + 2j, np.complex64)             # changed since read: no longer integers
    xarray_rumi.write(tmp_path / "a.rumi", _complex_int16_array(values), tile_size=8)
    back = xr.open_dataset(tmp_path / "a.rumi", engine="rumi").band_data
    assert back.encoding["sample_type"] == "complex64"
    np.testing.assert_array_equal(back.values, values)


def test_dask_complex_int16_is_not_computed_twice_to_narrow_it(tmp_path):
    values = np.full((1, 8, 8), 3 - 4j, np.complex64)
    xarray_rumi.write(tmp_path / "a.rumi", _complex_int16_array(dask.array.from_array(values)), tile_size=8)
    assert xr.open_dataset(tmp_path / "a.rumi", engine="rumi").band_data.encoding["sample_type"] == "complex64"


def test_complex_nodata_is_named_without_a_complex_warning(tmp_path):
    da = _complex_int16_array(np.full((1, 8, 8), 3 - 4j, np.complex64)).rio.write_nodata(np.complex64(0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xarray_rumi.write(tmp_path / "a.rumi", da, tile_size=8)
    names = [w.category.__name__ for w in caught if w.category is not PendingDeprecationWarning]
    assert names == ["NodataNotStoredWarning"], [str(w.message) for w in caught]
    assert str(caught[-1].message).startswith("nodata 0 is not stored")
