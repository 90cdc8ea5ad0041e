"""STAC Items for rumi files, field by field as docs/stac.md gives them."""

from __future__ import annotations

import base64
import datetime as dt
import math
import os
import posixpath
import re

import numpy as np

from ..datamodel.coords import corner_transform
from ..format.geo import Georeferencing, RasterType
from ..io.urls import absolute
from ..reading.open import open_image
from .read import STAC_HEADER, STAC_MEDIA_TYPE, STAC_RASTER_TYPE, STAC_TRANSFORM

PROJECTION = "https://stac-extensions.github.io/projection/v2.0.0/schema.json"
RASTER = "https://stac-extensions.github.io/raster/v1.1.0/schema.json"
FILE = "https://stac-extensions.github.io/file/v2.1.0/schema.json"
PROJECTION_FIELDS = ("proj:code", "proj:shape", "proj:transform")
#: Points along each edge of the footprint before reprojection, so curved edges stay inside the polygon.
EDGE_POINTS = 21

_STAC_DATA_TYPES = {"bool": "uint8", "uint2": "uint8", "uint4": "uint8", "int2": "int8", "int4": "int8",
                    "complex64": "cfloat32", "complex128": "cfloat64"}
_STAC_NAMES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
               "float64", "cint16", "cint32", "cfloat32", "cfloat64"}


def item(path, header=None, *, href=None, datetime=None, properties=None, nodata=None, storage_options=None):
    """A ``pystac.Item`` of the rumi file at ``path``, blob included; ``datetime`` defaults to the file's mtime.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((2, 64, 64), "uint16"), tile_size=32, crs=32633,
    ...                          transform=(10, 0, 500000, 0, -10, 5000000))
    >>> it = item(path, blob, datetime="2024-05-01T10:00:00Z")
    >>> it.id, it.properties["proj:code"], it.properties["proj:shape"]
    ('scene', 'EPSG:32633', [64, 64])
    """
    import pystac

    image = open_image(path, header, storage_options=storage_options)
    properties = dict(properties or {})
    given = properties.pop("datetime", None)
    when = _datetime(datetime if datetime is not None else given, path, storage_options)
    geometry, bbox = footprint(image.georeferencing, image.grid.image_width, image.grid.image_length)
    fields = image_fields(image, nodata)
    properties.update({name: fields.pop(name) for name in PROJECTION_FIELDS})
    result = pystac.Item(posixpath.basename(str(os.fspath(path)).rstrip("/")).removesuffix(".rumi"), geometry, bbox,
                         when, properties, stac_extensions=[PROJECTION, RASTER, FILE])
    result.add_asset("data", pystac.Asset(href or absolute(path), "rumi image", media_type=STAC_MEDIA_TYPE,
                                          roles=["data"], extra_fields=fields))
    return result


def image_fields(image, nodata=None) -> dict:
    """The STAC fields of an opened rumi image (docs/stac.md, "The fields")."""
    grid, georef = image.grid, image.georeferencing
    fields = {
        "proj:code": georef.crs_code,
        "proj:shape": [grid.image_length, grid.image_width],
        "proj:transform": list(corner_transform(georef)),
        "file:size": image.file_size,
        "raster:bands": [_band(image.sample_type, nodata)] * grid.samples_per_pixel,
        STAC_HEADER: base64.b64encode(image.header.to_bytes()).decode("ascii"),
        STAC_RASTER_TYPE: georef.raster_type.name.lower(),
    }
    if georef.is_defined and georef.raster_type is RasterType.POINT:
        fields[STAC_TRANSFORM] = list(georef.transform)  # pixel centres, which proj:transform cannot say
    return fields


def item_collection(paths, headers=None, **kwargs):
    """A ``pystac.ItemCollection`` of :func:`item` for each path."""
    import pystac

    paths = list(paths)
    headers = [None] * len(paths) if headers is None else list(headers)
    return pystac.ItemCollection([item(p, h, **kwargs) for p, h in zip(paths, headers, strict=True)])


def footprint(georef: Georeferencing, width: int, height: int):
    """The image's lon/lat GeoJSON polygon (not split at the antimeridian) and bbox; ``(None, None)`` without a CRS."""
    if not georef.is_defined:
        return None, None
    from pyproj import Transformer

    a, b, c, d, e, f = corner_transform(georef)
    steps = np.linspace(0.0, 1.0, EDGE_POINTS)[:-1]
    cols = np.concatenate([steps * width, np.full_like(steps, width), (1 - steps) * width, np.zeros_like(steps)])
    rows = np.concatenate([np.zeros_like(steps), steps * height, np.full_like(steps, height), (1 - steps) * height])
    xs, ys = a * cols + b * rows + c, d * cols + e * rows + f
    lons, lats = Transformer.from_crs(georef.epsg, 4326, always_xy=True).transform(xs, ys)
    ring = [[float(x), float(y)] for x, y in zip(lons, lats)]
    bbox = [float(np.min(lons)), float(np.min(lats)), float(np.max(lons)), float(np.max(lats))]
    return {"type": "Polygon", "coordinates": [ring + ring[:1]]}, bbox


def _band(sample_type, nodata=None) -> dict:
    name = sample_type.name
    data_type = name if name in _STAC_NAMES else _STAC_DATA_TYPES.get(name, "other")
    band = {"data_type": data_type}
    if data_type != name or name in ("cint16", "cint32"):
        band["bits_per_sample"] = sample_type.bits_per_sample
    if nodata is not None:
        band["nodata"] = stac_nodata(nodata, sample_type)
    return band


def stac_nodata(nodata, sample_type):
    """``nodata`` as the raster extension writes it; ``ValueError`` when no sample can equal it."""
    if isinstance(nodata, (bool, np.bool_)):
        raise TypeError(f"nodata must be a number, got {nodata!r}")
    if isinstance(nodata, (int, np.integer)) or (isinstance(nodata, str) and re.fullmatch(r"\s*[+-]?\d+\s*", nodata)):
        value = int(nodata)
    else:
        try:
            value = float(nodata)
        except (TypeError, ValueError):
            raise TypeError(f"nodata must be a number or 'nan', 'inf', '-inf', got {nodata!r}") from None
    signed = {1: False, 2: True, 5: True}.get(sample_type.sample_format)  # unsigned, signed, complex int
    if signed is None:  # JSON has no NaN nor infinities: the raster extension spells them "nan", "inf", "-inf"
        return value if math.isfinite(value) else str(value)
    bits = sample_type.bits_per_sample // sample_type.components
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if isinstance(value, float) and not value.is_integer() or not low <= value <= high:
        raise ValueError(f"nodata {nodata!r} is not a value of {sample_type.name} samples ({low} to {high})")
    return int(value)


def _datetime(value, path, storage_options) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if value is not None:
        raise TypeError(f"datetime must be a datetime or an ISO 8601 string, got {type(value).__name__}")
    import fsspec

    fs, target = fsspec.core.url_to_fs(os.fspath(path), **(storage_options or {}))
    try:
        return _datetime(fs.modified(target), path, storage_options)
    except (NotImplementedError, KeyError):  # a file system that keeps no modification time (HTTP)
        raise ValueError(f"{path}: no modification time to date the Item by; pass datetime= "
                         "(rumi stac --datetime)") from None
