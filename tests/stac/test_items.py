"""STAC Items of rumi files: the fields docs/stac.md promises, JSON round trips, and Cubes opened from Items."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import pytest

import xarray_rumi
from xarray_rumi.stac import MEDIA_TYPE, item, item_collection

pystac = pytest.importorskip("pystac")

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0)
DATES = ["2024-05-01T10:00:00Z", "2024-05-11T10:00:00Z", "2024-05-21T10:00:00Z"]


def _scenes(root, count=3, *, crs=32633, transform=TRANSFORM, raster_type="area"):
    rng = np.random.default_rng(7)
    paths, arrays, blobs = [], [], []
    for i in range(count):
        data = rng.integers(0, 4000, (2, 48, 40), dtype=np.uint16)
        path = root / f"scene_{i}.rumi"
        blobs.append(xarray_rumi.write(path, data, tile_size=16, crs=crs, transform=transform,
                                       raster_type=raster_type))
        paths.append(path)
        arrays.append(data)
    return paths, arrays, blobs


def test_item_fields(tmp_path):
    (path,), _, (blob,) = _scenes(tmp_path, 1)
    it = item(path, blob, datetime=DATES[0], properties={"platform": "demo"})
    assert it.id == "scene_0"
    assert it.properties["proj:code"] == "EPSG:32633"
    assert it.properties["proj:shape"] == [48, 40]
    assert it.properties["proj:transform"] == list(TRANSFORM)
    assert it.properties["platform"] == "demo"
    assert it.datetime.isoformat() == "2024-05-01T10:00:00+00:00"
    asset = it.assets["data"]
    assert asset.href == str(path) and asset.media_type == MEDIA_TYPE == "application/vnd.rumi+tiff"
    assert asset.roles == ["data"]
    assert asset.extra_fields["file:size"] == path.stat().st_size
    assert asset.extra_fields["raster:bands"] == [{"data_type": "uint16"}] * 2
    assert base64.b64decode(asset.extra_fields["rumi:header"]) == blob
    assert asset.extra_fields["rumi:raster_type"] == "area"
    assert any("projection" in e for e in it.stac_extensions) and any("raster" in e for e in it.stac_extensions)


def test_footprint_is_the_image_outline_in_lonlat(tmp_path):
    from pyproj import Transformer

    (path,), _, _ = _scenes(tmp_path, 1)
    it = item(path, datetime=DATES[0])
    to_lonlat = Transformer.from_crs(32633, 4326, always_xy=True)
    corners = [to_lonlat.transform(x, y) for x, y in [(500000, 5000000), (500400, 5000000), (500400, 4999520),
                                                     (500000, 4999520)]]
    lons, lats = zip(*corners)
    assert it.bbox == pytest.approx([min(lons), min(lats), max(lons), max(lats)], abs=1e-9)
    ring = it.geometry["coordinates"][0]
    assert it.geometry["type"] == "Polygon" and ring[0] == ring[-1] and len(ring) > 5
    assert 14.9 < it.bbox[0] < 15.1 and 45.0 < it.bbox[1] < 45.2  # 500 km E, 5000 km N of zone 33's origin


def test_item_without_crs_has_no_geometry(tmp_path):
    path = tmp_path / "plain.rumi"
    xarray_rumi.write(path, np.zeros((1, 8, 8), "uint8"))
    it = item(path, datetime=DATES[0])
    assert it.geometry is None and it.bbox is None and it.properties["proj:code"] is None
    assert pystac.Item.from_dict(it.to_dict()).geometry is None


def test_datetime_defaults_to_the_files_modification_time(tmp_path):
    import datetime as dt
    import os

    (path,), _, _ = _scenes(tmp_path, 1)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    assert item(path).datetime == dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
    assert item(path, properties={"datetime": DATES[1]}).datetime.isoformat() == "2024-05-11T10:00:00+00:00"


def test_items_round_trip_through_json(tmp_path):
    paths, _, blobs = _scenes(tmp_path)
    collection = item_collection(paths, blobs, datetime=DATES[0])
    text = json.dumps(collection.to_dict())
    back = pystac.ItemCollection.from_dict(json.loads(text))
    assert [i.to_dict() for i in back] == [i.to_dict() for i in collection]
    one = collection.items[0]
    again = pystac.Item.from_dict(json.loads(json.dumps(one.to_dict())))
    assert again.to_dict() == one.to_dict()
    assert base64.b64decode(again.assets["data"].extra_fields["rumi:header"]) == blobs[0]


def test_item_validates_against_the_core_stac_schema_offline(tmp_path):
    """pystac ships the core schemas (Item, GeoJSON), so this check needs no network and never skips."""
    pytest.importorskip("jsonschema")
    from pystac.validation import validate_dict

    (path,), _, _ = _scenes(tmp_path, 1)
    stac = item(path, datetime=DATES[0]).to_dict()
    validate_dict(stac, extensions=[])
    undated = {**stac, "properties": {k: v for k, v in stac["properties"].items() if k != "datetime"}}
    with pytest.raises(pystac.errors.STACValidationError):   # the schemas were really applied
        validate_dict(undated, extensions=[])


@pytest.mark.parametrize("sample_type,expected", [
    ("uint4", {"data_type": "uint8", "bits_per_sample": 4}),
    ("bfloat16", {"data_type": "other", "bits_per_sample": 16}),
    ("complex64", {"data_type": "cfloat32", "bits_per_sample": 64}),
    ("float32", {"data_type": "float32"}),
])
def test_raster_band_data_types(tmp_path, sample_type, expected):
    import ml_dtypes

    dtypes = {"uint4": ml_dtypes.uint4, "bfloat16": ml_dtypes.bfloat16, "complex64": np.complex64,
              "float32": np.float32}
    path = tmp_path / "t.rumi"
    xarray_rumi.write(path, np.zeros((1, 8, 8), dtypes[sample_type]), compression="portable")
    bands = item(path, datetime=DATES[0]).assets["data"].extra_fields["raster:bands"]
    assert bands == [expected]


def test_cube_from_items_over_http_reads_nothing_to_open(tmp_path, http_server):
    paths, arrays, blobs = _scenes(tmp_path)
    items = [item(p, b, href=f"{http_server.url}/{p.name}", datetime=d) for p, b, d in zip(paths, blobs, DATES)]
    as_json = json.loads(json.dumps(pystac.ItemCollection(items).to_dict()))
    for given in (items, pystac.ItemCollection(items), as_json, [i.to_dict() for i in items]):
        http_server.requests.clear()
        cube = xarray_rumi.open_cube(given)
        assert http_server.requests == []  # not even a HEAD
        assert list(pd.DatetimeIndex(cube.time.values)) == list(pd.DatetimeIndex(DATES).tz_localize(None))
        assert cube.rio.crs.to_epsg() == 32633
        assert tuple(cube.rio.transform())[:6] == TRANSFORM
    np.testing.assert_array_equal(cube.band_data.values, np.stack(arrays))
    assert http_server.get_requests()  # the pixels did come over HTTP


def test_cube_from_items_with_chunks(tmp_path, http_server):
    paths, arrays, blobs = _scenes(tmp_path)
    items = [item(p, b, href=f"{http_server.url}/{p.name}", datetime=d) for p, b, d in zip(paths, blobs, DATES)]
    cube = xarray_rumi.open_cube(items, chunks={"time": 1, "y": 32, "x": 32})
    assert http_server.requests == []
    np.testing.assert_array_equal(cube.band_data.values, np.stack(arrays))


def test_point_rasters_keep_their_own_transform(tmp_path):
    paths, _, blobs = _scenes(tmp_path, 1, raster_type="point")
    it = item(paths[0], blobs[0], datetime=DATES[0])
    assert it.properties["proj:transform"] == [10.0, 0.0, 499995.0, 0.0, -10.0, 5000005.0]  # corners, as GDAL's
    direct = xarray_rumi.open_cube(paths)
    from_item = xarray_rumi.open_cube([it])
    assert from_item.x.values.tolist() == direct.x.values.tolist()
    assert from_item.y.values.tolist() == direct.y.values.tolist()
    assert from_item.spatial_ref.attrs == direct.spatial_ref.attrs


def test_items_on_different_grids_go_to_a_collection(tmp_path):
    paths, _, _ = _scenes(tmp_path, 2)
    other = tmp_path / "other.rumi"
    xarray_rumi.write(other, np.ones((2, 24, 24), "uint16"), tile_size=16, crs=32633, transform=TRANSFORM)
    items = [item(p, datetime=DATES[0]) for p in [*paths, other]]
    with pytest.raises(ValueError):
        xarray_rumi.open_cube(items)
    tree = xarray_rumi.open_collection(items)
    assert {name: node.dataset.sizes["time"] for name, node in tree.children.items()} == {"grid_0": 2, "grid_1": 1}
    assert tree["grid_1"].dataset.band_data.values.min() == 1


def test_an_item_without_a_rumi_asset_is_refused(tmp_path):
    (path,), _, _ = _scenes(tmp_path, 1)
    d = item(path, datetime=DATES[0]).to_dict()
    del d["assets"]["data"]["rumi:header"]
    with pytest.raises(ValueError, match="rumi:header"):
        xarray_rumi.open_cube([d])


def test_docs_name_every_field_an_item_has(tmp_path):
    import pathlib

    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "stac.md").read_text()
    paths, _, blobs = _scenes(tmp_path, 1, raster_type="point")
    it = item(paths[0], blobs[0], datetime=DATES[0])
    fields = [*it.properties, *it.assets["data"].extra_fields, it.assets["data"].media_type]
    assert [f for f in fields if f"`{f}`" not in doc] == []


def test_an_item_over_http_needs_a_datetime_when_the_server_gives_no_date(tmp_path, http_server):
    (path,), _, (blob,) = _scenes(tmp_path, 1)
    url = f"{http_server.url}/{path.name}"
    with pytest.raises(ValueError, match="--datetime"):
        item(url, blob)
    it = item(url, blob, datetime=DATES[0])
    assert it.assets["data"].href == url and it.id == "scene_0"


def test_relative_hrefs_resolve_against_the_items_file(tmp_path):
    paths, arrays, blobs = _scenes(tmp_path, 1)
    it = item(paths[0], blobs[0], href="scene_0.rumi", datetime=DATES[0])  # beside the Item's JSON
    (tmp_path / "catalog").mkdir()
    it.assets["data"].href = "../scene_0.rumi"
    it.save_object(include_self_link=True, dest_href=str(tmp_path / "catalog" / "scene_0.json"))
    loaded = pystac.Item.from_file(str(tmp_path / "catalog" / "scene_0.json"))
    cube = xarray_rumi.open_cube([loaded])
    np.testing.assert_array_equal(cube.band_data.values[0], arrays[0])
