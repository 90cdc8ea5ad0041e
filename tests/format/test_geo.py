"""Georeferencing: the 4 x 4 matrix, the 16 GeoKey shorts, the CRS type from the registry, PixelIsPoint's half
pixel."""

from __future__ import annotations

import struct

import affine
import numpy as np
import pytest

from xarray_rumi import RumiFormatError
from xarray_rumi.format.geo import (Georeferencing, ModelType, RasterType, centre_to_corner, corner_to_centre,
                                    georeferencing, registry_entry, resolve_crs)

IDENTITY_MATRIX = (1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)


def keys(model=1, raster=1, crs_key=3072, code=32618, header=(1, 1, 0, 3), location=0, count=1):
    return struct.pack("<16H", *header, 1024, location, count, model, 1025, 0, 1, raster, crs_key, 0, 1, code)


def matrix(*values):
    return struct.pack("<16d", *values)


def rule_of(matrix_bytes, key_bytes):
    with pytest.raises(RumiFormatError) as info:
        Georeferencing.from_tags(matrix_bytes, key_bytes)
    return info.value.rule


UTM = matrix(30, 0, 0, 500000, 0, -30, 0, 4000000, 0, 0, 0, 0, 0, 0, 0, 1)


def test_full_matrix_with_rotation():
    g = georeferencing(32618, affine.Affine(10, 0.5, 1000, -0.25, -10, 2000))
    assert struct.unpack("<16d", g.model_transformation()) == (
        10, 0.5, 0, 1000, -0.25, -10, 0, 2000, 0, 0, 0, 0, 0, 0, 0, 1)
    assert Georeferencing.from_tags(g.model_transformation(), g.geo_keys()).transform == (10, 0.5, 1000, -0.25, -10, 2000)


def test_geokeys_projected_geographic_undefined():
    assert georeferencing("EPSG:32618", (30, 0, 5e5, 0, -30, 4e6)).geo_keys() == keys()
    assert georeferencing(4326, (1, 0, 0, 0, -1, 0), "point").geo_keys() == keys(2, 2, 2048, 4326)
    undefined = georeferencing(None, raster_type="point")
    assert undefined.geo_keys() == keys(0, 2, 2048, 0)
    assert undefined.model_transformation() == matrix(*IDENTITY_MATRIX)
    assert len(undefined.geo_keys()) + len(undefined.model_transformation()) == 160


def test_crs_type_comes_from_the_registry_not_the_number():
    # EPSG:4087 (World Equidistant Cylindrical) sits among geographic codes but is projected.
    assert resolve_crs("EPSG:4087") == (4087, ModelType.PROJECTED)
    assert georeferencing(4087, (1, 0, 0, 0, -1, 0)).geo_keys() == keys(1, 1, 3072, 4087)
    assert resolve_crs(4326) == (4326, ModelType.GEOGRAPHIC)
    from pyproj import CRS
    assert resolve_crs(CRS.from_epsg(32618).to_wkt()) == (32618, ModelType.PROJECTED)
    assert resolve_crs(3857) == (3857, ModelType.PROJECTED)


@pytest.mark.parametrize("crs, message", [
    ("+proj=aea +lat_1=29.5 +lat_2=45.5 +lat_0=23 +lon_0=-96 +x_0=0 +y_0=0 +datum=WGS84", "no"),
    ("EPSG:7405", "Compound CRS"),     # projected + height: is_projected is true for its horizontal part
    ("EPSG:4979", "Geographic 3D"),
    ("EPSG:5703", "Vertical CRS"),
    ("EPSG:4978", "Geocentric"),
    ("not a crs", "cannot interpret"),
])
def test_writer_refuses_what_rumi_cannot_store(crs, message):
    with pytest.raises(ValueError, match=message):
        resolve_crs(crs)


def test_writer_needs_crs_and_transform_together():
    with pytest.raises(ValueError, match="transform without a CRS"):
        georeferencing(None, (30, 0, 0, 0, -30, 0))
    with pytest.raises(ValueError, match="needs a transform"):
        georeferencing(4326)
    with pytest.raises(ValueError, match="finite"):
        georeferencing(4326, (float("nan"), 0, 0, 0, -1, 0))
    with pytest.raises(ValueError, match="raster_type"):
        georeferencing(None, raster_type="pixel")
    assert georeferencing(None, (1, 0, 0, 0, 1, 0)).is_defined is False  # the identity is "no transform"


@pytest.mark.parametrize("minor", [0, 1])
def test_minor_revision_0_and_1_accepted(minor):
    assert Georeferencing.from_tags(UTM, keys(header=(1, 1, minor, 3))).epsg == 32618


def test_registry_entry_kinds():
    assert registry_entry(32618) == ("Projected CRS", ModelType.PROJECTED)
    assert registry_entry(4326)[1] is ModelType.GEOGRAPHIC
    assert registry_entry(1024) == (None, None)


@pytest.mark.parametrize("m, k, rule", [
    (UTM, keys(header=(1, 1, 2, 3)), "georeferencing.geokey-header"),
    (UTM, keys(header=(1, 0, 0, 3)), "georeferencing.geokey-header"),
    (UTM, keys(header=(2, 1, 0, 3)), "georeferencing.geokey-header"),
    (UTM, keys(header=(1, 1, 0, 4)), "georeferencing.geokey-header"),
    (UTM, keys(location=34736), "georeferencing.geokey-inline"),
    (UTM, keys(count=2), "georeferencing.geokey-inline"),
    (UTM, keys(crs_key=3073), "georeferencing.geokeys"),
    (UTM, struct.pack("<16H", 1, 1, 0, 3, 1025, 0, 1, 1, 1024, 0, 1, 1, 3072, 0, 1, 32618), "georeferencing.geokeys"),
    (UTM, keys(raster=0), "georeferencing.raster-type"),
    (UTM, keys(raster=3), "georeferencing.raster-type"),
    (UTM, keys(model=3), "georeferencing.model-type"),
    (UTM, keys(model=2, crs_key=3072), "georeferencing.model-key"),        # geographic model, projected key
    (UTM, keys(model=1, crs_key=2048), "georeferencing.model-key"),
    (UTM, keys(code=1023), "georeferencing.epsg-range"),
    (UTM, keys(code=32767), "georeferencing.epsg-range"),
    (UTM, keys(code=65535), "georeferencing.epsg-range"),
    (UTM, keys(code=1024), "georeferencing.epsg-registry"),                # in range, defines no CRS
    (UTM, keys(code=5000), "georeferencing.epsg-registry"),
    (UTM, keys(code=4978), "georeferencing.epsg-kind"),                    # geocentric
    (UTM, keys(model=2, crs_key=2048, code=4087), "georeferencing.epsg-type"),   # 4087 is projected
    (UTM, keys(model=1, crs_key=3072, code=4326), "georeferencing.epsg-type"),
    (UTM, keys(code=7405), "georeferencing.epsg-kind"),                    # compound
    (UTM, keys(model=2, crs_key=2048, code=4979), "georeferencing.epsg-kind"),   # geographic 3D
    (matrix(30, 0, 0, 5e5, 0, -30, 0, 4e6, 0, 0, 1, 0, 0, 0, 0, 1), keys(), "georeferencing.matrix"),  # Z scale 1
    (matrix(30, 0, 1, 5e5, 0, -30, 0, 4e6, 0, 0, 0, 0, 0, 0, 0, 1), keys(), "georeferencing.matrix"),  # Z column
    (matrix(30, 0, 0, 5e5, 0, -30, 0, 4e6, 0, 0, 0, 0, 0, 0, 0, 2), keys(), "georeferencing.matrix"),  # last row
    (matrix(30, 0, 0, 5e5, 0, -30, 0, 4e6, 0, 0, 0, 0, 1, 0, 0, 1), keys(), "georeferencing.matrix"),
    (matrix(float("inf"), 0, 0, 5e5, 0, -30, 0, 4e6, 0, 0, 0, 0, 0, 0, 0, 1), keys(), "georeferencing.matrix"),
    (matrix(float("nan"), 0, 0, 5e5, 0, -30, 0, 4e6, 0, 0, 0, 0, 0, 0, 0, 1), keys(), "georeferencing.matrix"),
    (UTM, keys(model=0, crs_key=2048, code=0), "georeferencing.undefined"),          # a real transform, no CRS
    (matrix(*IDENTITY_MATRIX), keys(model=0, crs_key=2048, code=4326), "georeferencing.undefined"),
    (matrix(*IDENTITY_MATRIX), keys(model=0, crs_key=3072, code=0), "georeferencing.undefined"),
])
def test_every_georeferencing_rule(m, k, rule):
    assert rule_of(m, k) == rule


def test_undefined_keeps_the_raster_type():
    for raster in (1, 2):
        g = Georeferencing.from_tags(matrix(*IDENTITY_MATRIX), keys(0, raster, 2048, 0))
        assert g.epsg is None and not g.is_defined and g.raster_type is RasterType(raster)


def test_real_rasters_crs(shared_data):
    rasterio = pytest.importorskip("rasterio")
    expected = {"RGB.byte.tif": 32618, "RGBA.uint16.tif": 32612, "shade.tif": 3857, "small_dem_3m_merged.tif": 26915}
    for name, code in expected.items():
        with rasterio.open(shared_data / name) as src:
            assert resolve_crs(src.crs) == (code, ModelType.PROJECTED)
    with rasterio.open(shared_data / "cog.tif") as src:  # custom Albers: no EPSG code names it
        with pytest.raises(ValueError, match="only as an EPSG code"):
            resolve_crs(src.crs)


# -- PixelIsPoint's half pixel: one pair of functions moves between GDAL's pixel corners and a matrix's centres --

TRANSFORMS = [
    (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0),
    (0.1, 0.0, 5.123456789, 0.0, -0.1, 44.9),
    (1 / 3, 0.0002, -179.99, 0.0003, -1 / 3, 89.7),   # rotated
]


@pytest.mark.parametrize("corner", TRANSFORMS)
def test_corner_to_centre_is_gdals_half_pixel_step(corner):
    # GDAL (and rioxarray's coordinates) place a pixel centre at transform * (i + 0.5, j + 0.5): the same bits
    assert corner_to_centre(corner) == tuple(affine.Affine(*corner) * affine.Affine.translation(0.5, 0.5))[:6]
    assert corner_to_centre(affine.Affine(*corner)) == corner_to_centre(corner)   # an Affine's first six values


@pytest.mark.parametrize("corner", TRANSFORMS)
def test_centre_to_corner_undoes_it(corner):
    back = centre_to_corner(corner_to_centre(corner))
    np.testing.assert_allclose(back, corner, rtol=0, atol=1e-9)
    assert back[:2] == corner[:2] and back[3:5] == corner[3:5]   # only the origin moves
