"""STAC in: what each Item of a rumi file records, taken out with no read of the file."""

from __future__ import annotations

import json

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.format.geo import RasterType
from xarray_rumi.stac import item
from xarray_rumi.stac.read import ItemImage, is_stac, item_images

pystac = pytest.importorskip("pystac")

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0)

#: What Items of xarray-rumi 0.1.0's first builds said for the media type; still read.
LEGACY_MEDIA_TYPE = "image/tiff; application=rumi"


def _items(tmp_path, count=2, **write_kwargs):
    write_kwargs = {"crs": 32633, "transform": TRANSFORM, **write_kwargs}
    found = []
    for i in range(count):
        path = tmp_path / f"scene_{i}.rumi"
        blob = xarray_rumi.write(path, np.full((1, 16, 16), i, "uint8"), tile_size=8, **write_kwargs)
        found.append((item(path, blob, datetime=f"2024-05-0{i + 1}T10:00:00+02:00"), path, blob))
    return found


def test_every_form_of_items_gives_the_same_images(tmp_path, http_server):
    found = _items(tmp_path)
    items = [it for it, _, _ in found]
    forms = [items, pystac.ItemCollection(items), [i.to_dict() for i in items],
             json.loads(json.dumps(pystac.ItemCollection(items).to_dict()))]
    for form in forms:
        assert is_stac(form)
        images = item_images(form)
        assert [type(image) for image in images] == [ItemImage, ItemImage]
        assert [image.href for image in images] == [str(path) for _, path, _ in found]
        assert [image.blob for image in images] == [blob for _, _, blob in found]
        assert [image.id for image in images] == ["scene_0", "scene_1"]
        # STAC dates are UTC; xarray's are naive: 10:00 at +02:00 is 08:00.
        assert [image.datetime for image in images] == [np.datetime64("2024-05-01T08:00"),
                                                        np.datetime64("2024-05-02T08:00")]
        assert {image.georeferencing.epsg for image in images} == {32633}
        assert {image.georeferencing.transform for image in images} == {TRANSFORM}


def test_an_item_reads_nothing_of_its_file(tmp_path, http_server):
    (it, path, blob), = _items(tmp_path, 1)
    it.assets["data"].href = f"{http_server.url}/{path.name}"
    [image] = item_images(it)
    assert http_server.requests == []
    opened = xarray_rumi.open_image(image.href, header=image.blob, georeferencing=image.georeferencing)
    assert http_server.requests == []
    assert opened.read().max() == 0


def test_the_file_without_a_crs_is_recorded_without_one(tmp_path):
    (it, _, _), = _items(tmp_path, 1, crs=None, transform=None, raster_type="point")
    [image] = item_images(it)
    assert not image.georeferencing.is_defined
    assert image.georeferencing.raster_type is RasterType.POINT


def test_projection_extension_1_names_the_crs_by_proj_epsg(tmp_path):
    (it, _, _), = _items(tmp_path, 1)
    older = it.to_dict()
    older["properties"]["proj:epsg"] = int(older["properties"].pop("proj:code").removeprefix("EPSG:"))
    [image] = item_images(older)
    assert image.georeferencing.epsg == 32633 and image.georeferencing.transform == TRANSFORM


def test_a_crs_that_is_no_epsg_code_is_refused(tmp_path):
    (it, _, _), = _items(tmp_path, 1)
    other = it.to_dict()
    other["properties"]["proj:code"] = "IAU_2015:30100"
    with pytest.raises(ValueError, match="STAC Item 'scene_0': proj:code: rumi stores a CRS only as an EPSG code"):
        item_images(other)


def test_an_item_without_a_date_has_nat_and_a_range_its_start(tmp_path):
    (it, _, _), = _items(tmp_path, 1)
    undated = it.to_dict()
    undated["properties"]["datetime"] = None
    assert np.isnat(item_images(undated)[0].datetime)
    undated["properties"]["start_datetime"] = "2024-06-01T00:00:00Z"
    assert item_images(undated)[0].datetime == np.datetime64("2024-06-01T00:00")


@pytest.mark.parametrize(("value", "expected"), [
    ([], False), ("scene.rumi", False), (["scene.rumi"], False), ({"type": "Polygon"}, False),
    ({"type": "Feature"}, True), ({"type": "FeatureCollection", "features": []}, True),
    ([{"type": "FeatureCollection", "features": []}], False),   # collections are not listed, they are given
])
def test_what_counts_as_stac(value, expected):
    assert is_stac(value) is expected


def test_items_of_either_media_type_open_to_the_same_cube(tmp_path):
    # Items say application/vnd.rumi+tiff; earlier ones said image/tiff; application=rumi: the asset is the one
    # carrying rumi:header, whatever its type
    from xarray_rumi.stac.read import STAC_MEDIA_TYPE

    items = [each for each, _, _ in _items(tmp_path)]
    assert {i.assets["data"].media_type for i in items} == {STAC_MEDIA_TYPE}
    new = xarray_rumi.open_cube(items).band_data.values
    for each in items:
        each.assets["data"].media_type = LEGACY_MEDIA_TYPE
    np.testing.assert_array_equal(xarray_rumi.open_cube(items).band_data.values, new)
