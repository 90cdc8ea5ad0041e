"""STAC in: every form of CRS the projection extension allows, and malformed Items refused naming Item and field."""

from __future__ import annotations

import base64
import dataclasses

import numpy as np
import pytest
from pyproj import CRS

import xarray_rumi
from xarray_rumi.format.geo import corner_to_centre
from xarray_rumi.stac import item
from xarray_rumi.stac.read import ItemImage, item_images

pystac = pytest.importorskip("pystac")

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0)
WKT2 = CRS.from_epsg(32633).to_wkt()
PROJJSON = CRS.from_epsg(32633).to_json_dict()


@pytest.fixture
def scene(tmp_path):
    """An Item dict of a 16 x 16 uint8 file in EPSG:32633, and the file's values."""
    values = np.arange(256, dtype="uint8").reshape(1, 16, 16)
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, values, tile_size=8, crs=32633, transform=TRANSFORM)
    return item(path, blob, datetime="2024-05-01T10:00:00Z").to_dict(), values


def _without_code(d: dict) -> dict:
    d["properties"]["proj:code"] = None
    return d


FORMS = {
    "proj:wkt2": lambda d: _without_code(d)["properties"].update({"proj:wkt2": WKT2}),
    "proj:projjson": lambda d: _without_code(d)["properties"].update({"proj:projjson": PROJJSON}),
    "proj:epsg": lambda d: d["properties"].update({"proj:epsg": 32633, "proj:code": None}),
    # the asset's fields override the Item's, one by one: its null code, its WKT2
    "asset proj:code null, asset proj:wkt2": lambda d: d["assets"]["data"].update(
        {"proj:code": None, "proj:wkt2": WKT2}),
    "asset proj:code null, Item proj:projjson": lambda d: (d["assets"]["data"].update({"proj:code": None}),
                                                           d["properties"].update({"proj:projjson": PROJJSON})),
    "asset proj:transform": lambda d: (d["assets"]["data"].update({"proj:transform": list(TRANSFORM)}),
                                       d["properties"].update({"proj:transform": [1, 0, 0, 0, -1, 0]})),
}


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_crs_opens_with_the_items_crs_and_transform(scene, form):
    d, values = scene
    FORMS[form](d)
    [image] = item_images(d)
    assert image.georeferencing.epsg == 32633 and image.georeferencing.transform == TRANSFORM
    for opened in (xarray_rumi.open_cube([d]), xarray_rumi.open_collection([d])["grid_0"].dataset):
        assert opened.rio.crs.to_epsg() == 32633
        assert tuple(opened.rio.transform())[:6] == TRANSFORM and float(opened.x[0]) == 500005.0
        np.testing.assert_array_equal(opened.band_data.values[0], values)


def test_an_asset_null_code_with_no_other_crs_field_means_no_crs_and_opens_no_crs_on_a_file_without_one(tmp_path):
    path = tmp_path / "chip.rumi"
    blob = xarray_rumi.write(path, np.zeros((1, 8, 8), "uint8"))
    d = item(path, blob, datetime="2024-05-01T10:00:00Z").to_dict()
    d["properties"]["proj:code"] = "EPSG:32633"   # the Item's, overridden by the asset's null
    d["assets"]["data"]["proj:code"] = None
    [image] = item_images(d)
    assert not image.georeferencing.is_defined
    assert xarray_rumi.open_cube([d]).rio.crs is None


def test_crs_fields_that_name_different_crss_are_refused_naming_them(scene):
    d, _ = scene
    d["properties"]["proj:wkt2"] = CRS.from_epsg(32632).to_wkt()
    with pytest.raises(ValueError, match=r"STAC Item 'scene': its CRS fields name different CRSs "
                                         r"\(proj:code EPSG:32633, proj:wkt2 EPSG:32632\)"):
        item_images(d)


def test_a_wkt2_crs_without_an_epsg_code_is_refused_naming_the_item_and_the_field(scene):
    d, _ = scene
    _without_code(d)["properties"]["proj:wkt2"] = CRS.from_proj4("+proj=utm +zone=33 +ellps=intl +units=m").to_wkt()
    with pytest.raises(ValueError, match="STAC Item 'scene': proj:wkt2: rumi stores a CRS only as an EPSG code"):
        item_images(d)


def test_a_point_item_without_its_own_matrix_takes_proj_transform_as_corners(tmp_path):
    path = tmp_path / "point.rumi"
    blob = xarray_rumi.write(path, np.zeros((1, 8, 8), "uint8"), crs=32633, transform=TRANSFORM, raster_type="point")
    d = item(path, blob).to_dict()
    own = item_images(d)[0].georeferencing
    del d["assets"]["data"]["rumi:transform"]   # a hand-made Item: proj:transform alone, GDAL's pixel corners
    assert item_images(d)[0].georeferencing == own
    assert own.transform == corner_to_centre(d["properties"]["proj:transform"])


MALFORMED = {
    "unknown EPSG code": (lambda d: d["properties"].update({"proj:code": "EPSG:99999"}),
                          "STAC Item 'scene': proj:code: cannot interpret CRS 'EPSG:99999'"),
    "unknown proj:epsg": (lambda d: d["properties"].update({"proj:code": None, "proj:epsg": 99999}),
                          "STAC Item 'scene': proj:epsg: "),
    "5-number transform": (lambda d: d["properties"].update({"proj:transform": [10, 0, 500000, 0, -10]}),
                           "STAC Item 'scene': proj:transform: transform must be six finite numbers"),
    "no transform": (lambda d: d["properties"].pop("proj:transform"),
                     "STAC Item 'scene': proj:transform: a CRS needs a transform"),
    "singular transform": (lambda d: d["properties"].update({"proj:transform": [0, 0, 500000, 0, -10, 5000000]}),
                           r"STAC Item 'scene': proj:transform: transform is singular \(a\*e - b\*d == 0\) \(a zero x"),
    "raster type pixel": (lambda d: d["assets"]["data"].update({"rumi:raster_type": "pixel"}),
                          "STAC Item 'scene': rumi:raster_type: raster_type must be 'area' or 'point', got 'pixel'"),
    "header not base64": (lambda d: d["assets"]["data"].update({"rumi:header": "TE9WRQ=!"}),
                          "STAC Item 'scene': rumi:header is not base64"),
    "header null": (lambda d: d["assets"]["data"].update({"rumi:header": None}),
                    "STAC Item 'scene': rumi:header must be the blob in base64 text, got NoneType"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_item_is_refused_naming_the_item_and_the_field(scene, case):
    d, _ = scene
    change, message = MALFORMED[case]
    change(d)
    for opener in (item_images, xarray_rumi.open_cube, xarray_rumi.open_collection, xarray_rumi.open_catalog):
        with pytest.raises(ValueError, match=message):
            opener([d])


def test_item_images_compare_as_bools_and_an_undated_one_equals_its_copy(scene):
    d, _ = scene
    d["properties"]["datetime"] = None
    d["properties"]["start_datetime"] = None
    [first], [second] = item_images(d), item_images(d)
    assert first is not second and np.isnat(first.datetime)
    assert (first == second) is True and hash(first) == hash(second)
    dated = dataclasses.replace(first, datetime=np.datetime64("2024-05-01T10:00", "ns"))
    same_instant = dataclasses.replace(first, datetime=np.datetime64("2024-05-01T10:00", "s"))
    assert (dated == same_instant) is True and (dated != first) is True and (dated == first) is False
    assert first != "scene" and isinstance(first, ItemImage)


def test_a_blob_that_decodes_is_the_items_blob(scene):
    d, _ = scene
    [image] = item_images(d)
    assert base64.b64encode(image.blob).decode() == d["assets"]["data"]["rumi:header"]


@pytest.mark.parametrize("form", ["proj:wkt2", "proj:projjson", "asset proj:code null, asset proj:wkt2"])
def test_a_stac_geoparquet_table_gives_the_crs_of_every_form(scene, tmp_path, form):
    pytest.importorskip("stac_geoparquet")
    from xarray_rumi.stac.geoparquet import write_stac_geoparquet
    from xarray_rumi.stac.read import stac_geoparquet_images

    d, values = scene
    FORMS[form](d)
    write_stac_geoparquet([d], tmp_path / "items.parquet")
    [image] = stac_geoparquet_images(tmp_path / "items.parquet")
    assert image == item_images(d)[0]
    cube = xarray_rumi.open_collection(tmp_path / "items.parquet")["grid_0"].dataset
    assert cube.rio.crs.to_epsg() == 32633 and tuple(cube.rio.transform())[:6] == TRANSFORM


def test_a_stac_geoparquet_row_with_a_malformed_field_is_refused_naming_its_item(scene, tmp_path):
    pytest.importorskip("stac_geoparquet")
    from xarray_rumi.stac.geoparquet import write_stac_geoparquet
    from xarray_rumi.stac.read import stac_geoparquet_images

    d, _ = scene
    d["properties"]["proj:code"] = "EPSG:99999"
    write_stac_geoparquet([d], tmp_path / "items.parquet")
    with pytest.raises(ValueError, match="STAC Item 'scene': proj:code: cannot interpret CRS 'EPSG:99999'"):
        stac_geoparquet_images(tmp_path / "items.parquet")


def test_a_further_crs_form_with_no_epsg_code_does_not_refuse_the_code_given(scene):
    d, _ = scene
    d["properties"]["proj:wkt2"] = CRS.from_proj4("+proj=utm +zone=33 +ellps=intl +units=m").to_wkt()
    assert item_images(d)[0].georeferencing.epsg == 32633   # proj:code says it; the WKT cannot be compared


def test_an_item_that_says_no_crs_for_a_georeferenced_file_is_refused_at_the_first_read(scene):
    from xarray_rumi import RumiFormatError

    d, _ = scene
    d["properties"]["proj:code"] = None   # the CRS dropped by hand, or a form this Item's maker did not write
    cube = xarray_rumi.open_cube([d])
    assert cube.rio.crs is None   # what the Item says, until the file is read
    with pytest.raises(RumiFormatError, match=r"STAC Item 'scene' says no CRS, PixelIsArea; the tags of .*scene.rumi "
                                              r"say EPSG:32633, PixelIsArea, transform \(10, 0, 500000, 0, -10, 5000000\)"):
        cube.band_data.values
