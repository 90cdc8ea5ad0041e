"""stac_geoparquet_images: what item_images gives of a stac-geoparquet file's Items, from the columns it needs."""

from __future__ import annotations

import base64

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.stac import item, read_stac_geoparquet, write_stac_geoparquet
from xarray_rumi.stac.read import item_images, stac_geoparquet_images

pytest.importorskip("stac_geoparquet")

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0)


def _item_dicts(root, count=3):
    dicts = []
    for i in range(count):
        path = root / f"s{i}.rumi"
        blob = xarray_rumi.write(path, np.full((1, 24, 24), i, "uint8"), tile_size=16, crs=32633, transform=TRANSFORM)
        dicts.append(item(path, blob, datetime=f"2024-05-0{i + 1}T10:00:00+02:00").to_dict(include_self_link=False))
    return dicts


def _same(images, expected):
    """Equal ItemImages (NaT compares unequal to itself: dates are compared as text, in nanoseconds)."""
    def fields(i):
        return i.href, i.blob, i.georeferencing, i.id, str(np.datetime64(i.datetime, "ns"))

    assert [fields(i) for i in images] == [fields(i) for i in expected]


def test_what_item_images_gives_of_every_kind_of_item(tmp_path):
    dicts = _item_dicts(tmp_path, 6)
    # projection extension 1.x: proj:epsg instead of proj:code
    dicts[1]["properties"]["proj:epsg"] = int(dicts[1]["properties"].pop("proj:code").removeprefix("EPSG:"))
    # no datetime, a range's start; no datetime at all
    dicts[2]["properties"].update(datetime=None, start_datetime="2024-06-01T00:00:00Z")
    dicts[3]["properties"]["datetime"] = None
    # a PixelIsPoint file's own transform on the asset, and a second asset without a blob
    dicts[4]["assets"]["data"].update({"rumi:raster_type": "point", "rumi:transform": [20.0, 0, 1, 0, -20.0, 2]})
    dicts[4]["assets"]["thumbnail"] = {"href": "thumb.png", "type": "image/png"}
    # the same blob as another Item's
    dicts[5]["assets"]["data"]["rumi:header"] = dicts[0]["assets"]["data"]["rumi:header"]
    out = tmp_path / "items.parquet"
    write_stac_geoparquet(dicts, out)
    images = stac_geoparquet_images(out)
    _same(images, item_images(read_stac_geoparquet(out)))
    _same(images, item_images(dicts))
    assert images[5].blob is images[0].blob  # a repeated blob decoded once
    assert images[0].georeferencing is images[2].georeferencing  # the same georeferencing built once


@pytest.mark.parametrize("blobs", [0, 2])
def test_an_item_without_exactly_one_blob_is_refused_as_item_images_refuses_it(tmp_path, blobs):
    dicts = _item_dicts(tmp_path, 2)
    asset = dicts[1]["assets"]["data"]
    if blobs == 0:
        del asset["rumi:header"]
    else:
        dicts[1]["assets"]["copy"] = dict(asset)
    out = tmp_path / "items.parquet"
    write_stac_geoparquet(dicts, out)
    with pytest.raises(ValueError) as alone:
        item_images(dicts)
    with pytest.raises(ValueError, match=f"'s1' has {blobs} assets with a rumi:header blob") as fast:
        stac_geoparquet_images(out)
    assert str(fast.value) == str(alone.value)


def test_a_damaged_blob_in_a_stac_geoparquet_catalog_is_refused_naming_its_file(tmp_path):
    dicts = _item_dicts(tmp_path, 3)
    blob = base64.b64decode(dicts[2]["assets"]["data"]["rumi:header"])
    dicts[2]["assets"]["data"]["rumi:header"] = base64.b64encode(b"EVOL" + blob[4:]).decode()
    out = tmp_path / "items.parquet"
    write_stac_geoparquet(dicts, out)
    for opening in (xarray_rumi.open_catalog, xarray_rumi.open_collection):
        with pytest.raises(xarray_rumi.RumiFormatError, match=r"blob.magic: image 2 \('.*s2.rumi'\)"):
            opening(out)


@pytest.mark.parametrize("opening", ["open_catalog", "open_collection"])
@pytest.mark.parametrize("source", ["items", "stac-geoparquet"])
def test_blobs_from_stac_are_checked_once(tmp_path, monkeypatch, opening, source):
    # Each blob check is a pass over every blob (a second one cost 100,000 images
    # about a third of a second); the rows made from STAC are checked as they are
    # made, so opening their images must not check them again.
    from xarray_rumi.dataset import catalog
    from xarray_rumi.reading import open as open_module

    dicts = _item_dicts(tmp_path, 3)
    out = tmp_path / "items.parquet"
    write_stac_geoparquet(dicts, out)
    checked = []
    real = open_module.load_headers
    monkeypatch.setattr(catalog, "load_headers", lambda blobs, names, *a, **kw: checked.append(len(blobs))
                        or real(blobs, names, *a, **kw))
    opened = getattr(xarray_rumi, opening)(dicts if source == "items" else out)
    assert checked == [3]
    datasets = opened if opening == "open_catalog" else [opened["grid_0"].dataset.isel(time=i) for i in range(3)]
    assert [int(ds.band_data.max()) for ds in datasets] == [0, 1, 2]
