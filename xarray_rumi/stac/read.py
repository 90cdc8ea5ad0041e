"""STAC in: the rumi image each STAC Item records, ready to open with no read of the file.

An Item written by :func:`xarray_rumi.stac.item` carries, on its rumi asset,
the file's address, its header blob and (with the Item's projection fields)
its georeferencing: everything :func:`~xarray_rumi.open_image` needs to open
the file without touching it.  :func:`item_images` takes those out of pystac
Items, an ItemCollection, their dicts or a stac-geoparquet file;
:func:`xarray_rumi.open_cube`, :func:`xarray_rumi.open_catalog` and
:func:`xarray_rumi.open_collection` open what it returns.  No xarray here:
``dataset/`` (the engine, Cubes, catalogs) comes after this module and calls it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from ..format.geo import Georeferencing, ModelType, RasterType, epsg_model_type

#: What a STAC Item of a rumi file says (see docs/stac.md); written by :mod:`.items`, read here.
#: Not ``image/*``: generic raster loaders (odc-stac without the rumi driver, stackstac, GDAL) would take the
#: file for a GeoTIFF and read its OpenZL frames as uncompressed pixels. Items written before carry
#: ``image/tiff; application=rumi``; a rumi asset is found by its ``rumi:header``, whatever its type.
STAC_MEDIA_TYPE = "application/vnd.rumi+tiff"
#: What Items of xarray-rumi 0.1.0's first builds said; still read.
LEGACY_MEDIA_TYPE = "image/tiff; application=rumi"
STAC_HEADER = "rumi:header"
STAC_RASTER_TYPE = "rumi:raster_type"
STAC_TRANSFORM = "rumi:transform"


@dataclass(frozen=True)
class ItemImage:
    """A rumi image as a STAC Item records it: where it is, its blob, its georeferencing, and the Item's id and date."""

    href: str
    #: The header blob as the Item carries it, unparsed: the opener parses it, under its own limits.
    blob: bytes
    georeferencing: Georeferencing
    id: str | None
    #: The Item's ``datetime`` (or ``start_datetime``) in UTC, ``NaT`` when it has none.
    datetime: np.datetime64


def item_images(items) -> list[ItemImage]:
    """The rumi image of each STAC Item, in order: nothing of the files is read.

    ``items`` is a pystac Item, an ItemCollection, their dicts, or a list of
    Items.  An Item without exactly one asset carrying a ``rumi:header``
    blob is refused (``ValueError``).

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((1, 16, 16), "uint8"), tile_size=8, crs=32633,
    ...                          transform=(10, 0, 500000, 0, -10, 5000000))
    >>> [image] = item_images(xarray_rumi.stac.item(path, blob, datetime="2024-05-01T10:00:00Z"))
    >>> image.blob == blob, image.georeferencing.epsg, bool(image.datetime == np.datetime64("2024-05-01T10:00"))
    (True, 32633, True)
    """
    images = []
    for item in stac_item_dicts(items):
        asset = rumi_asset(item)
        blob = base64.b64decode(asset[STAC_HEADER])
        images.append(ItemImage(asset["href"], blob, stac_georeferencing(item), item.get("id"), stac_datetime(item)))
    return images


def is_stac(value) -> bool:
    """Whether ``value`` is STAC: an Item, an ItemCollection, their dicts, or a list of Items."""
    if isinstance(value, dict):
        return value.get("type") in ("Feature", "FeatureCollection")
    if hasattr(value, "to_dict") and hasattr(value, "assets"):  # a pystac Item
        return True
    if type(value).__name__ == "ItemCollection":
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(is_stac(v) and not _is_collection(v) for v in value)
    return False


def _is_collection(value) -> bool:
    return type(value).__name__ == "ItemCollection" or (
        isinstance(value, dict) and value.get("type") == "FeatureCollection")


def is_stac_geoparquet(path) -> bool:
    """Whether the Parquet file at ``path`` is stac-geoparquet (its schema says so), not a rumi catalog."""
    import pyarrow.parquet as pq

    return b"stac-geoparquet" in (pq.read_schema(path).metadata or {})


def read_stac_geoparquet(path) -> list[dict]:
    """The STAC Item dicts of a stac-geoparquet file (needs ``stac-geoparquet``, in the ``stac`` extra)."""
    import pyarrow.parquet as pq
    from stac_geoparquet.arrow import stac_table_to_items

    return list(stac_table_to_items(pq.read_table(path)))


def stac_item_dicts(items) -> list[dict]:
    """Item dicts from an Item, an ItemCollection, their dicts, or a list of Items."""
    if isinstance(items, dict):
        return list(items["features"]) if items.get("type") == "FeatureCollection" else [items]
    if hasattr(items, "to_dict") and hasattr(items, "assets"):
        return [_pystac_item_dict(items)]
    if type(items).__name__ == "ItemCollection":
        return [_pystac_item_dict(i) for i in items.items]
    return [d for i in items for d in stac_item_dicts(i)]


def _pystac_item_dict(item) -> dict:
    """A pystac Item as a dict, its asset hrefs made absolute (relative ones resolve against the Item's file)."""
    as_dict = item.to_dict(include_self_link=False)
    for key, asset in item.assets.items():
        as_dict["assets"][key]["href"] = asset.get_absolute_href() or asset.href
    return as_dict


def rumi_asset(item: dict) -> dict:
    """The asset of a STAC Item dict that is a rumi file: the one carrying the blob."""
    found = [a for a in item.get("assets", {}).values() if STAC_HEADER in a]
    if len(found) != 1:
        raise ValueError(f"STAC Item {item.get('id')!r} has {len(found)} assets with a {STAC_HEADER} blob; "
                         "expected exactly one (see docs/stac.md)")
    return found[0]


def stac_georeferencing(item: dict) -> Georeferencing:
    """The georeferencing a STAC Item of a rumi file records (its file's own, exactly)."""
    asset = rumi_asset(item)
    properties = {**item.get("properties", {}), **asset}
    raster_type = RasterType[str(asset.get(STAC_RASTER_TYPE) or "area").upper()]
    code = properties.get("proj:code")
    if code is None and properties.get("proj:epsg") is not None:  # projection extension 1.x
        code = f"EPSG:{properties['proj:epsg']}"
    if code is None:
        return Georeferencing(None, ModelType.UNDEFINED, raster_type)
    authority, _, number = str(code).partition(":")
    if authority.upper() != "EPSG" or not number.isdigit():
        raise ValueError(f"STAC Item {item.get('id')!r}: proj:code {code!r} is not an EPSG code")
    epsg = int(number)
    transform = asset.get(STAC_TRANSFORM) or properties.get("proj:transform")
    return Georeferencing(epsg, epsg_model_type(epsg), raster_type, tuple(transform[:6]))


def stac_datetime(item: dict):
    """The Item's ``datetime`` (or ``start_datetime``) as a UTC ``numpy.datetime64``, or ``NaT``."""
    import pandas as pd

    properties = item.get("properties", {})
    value = properties.get("datetime") or properties.get("start_datetime")
    if value is None:
        return np.datetime64("NaT", "ns")
    stamp = pd.Timestamp(value)
    if stamp.tzinfo is not None:  # xarray's time coordinates are naive: UTC, as STAC's are
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return stamp.to_datetime64()


__all__ = ["ItemImage", "LEGACY_MEDIA_TYPE", "STAC_HEADER", "STAC_MEDIA_TYPE", "STAC_RASTER_TYPE", "STAC_TRANSFORM", "is_stac",
           "is_stac_geoparquet", "item_images", "read_stac_geoparquet", "rumi_asset", "stac_datetime",
           "stac_georeferencing", "stac_item_dicts"]
