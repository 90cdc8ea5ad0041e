"""Catalogs: one row per image with its blob, so thousands open with no read.

A catalog is a Parquet table: URL, header blob, shape, grid, sample type,
CRS, transform and bounds of each image.  With geopandas installed it is a
GeoParquet file whose geometry is each image's footprint (in its own CRS, as
``bounds``; images in different CRSs share a table, so the ``geo`` metadata
names no single CRS).  ``open_catalog`` opens every image from its row:
frames are located by the blob, georeferencing comes from the row, and the
files are not touched until pixels are read.
"""

from __future__ import annotations

import base64
import contextlib
import os

import numpy as np

from ..format.blob import Header
from ..format.geo import Georeferencing, ModelType, RasterType, epsg_model_type
from ..reading.image import RumiImage
from ..reading.open import open_image

COLUMNS = (
    "url", "header", "bands", "height", "width", "tile_height", "tile_width", "frame_unit", "sample_type",
    "epsg", "raster_type", "transform", "minx", "miny", "maxx", "maxy",
)


#: What a STAC Item of a rumi file says (see docs/stac.md); written by ``xarray_rumi.stac``, read here.
STAC_MEDIA_TYPE = "image/tiff; application=rumi"
STAC_HEADER = "rumi:header"
STAC_RASTER_TYPE = "rumi:raster_type"
STAC_TRANSFORM = "rumi:transform"


def _row(url: str, storage_options) -> dict:
    image = open_image(url, storage_options=storage_options)
    return _image_row(url, image.header, image.georeferencing)


def _image_row(url: str, header: Header, georef: Georeferencing) -> dict:
    grid = header.grid
    minx, miny, maxx, maxy = _bounds(georef, grid.image_width, grid.image_length)
    return {
        "url": url, "header": header.to_bytes(), "bands": grid.samples_per_pixel,
        "height": grid.image_length, "width": grid.image_width, "tile_height": grid.tile_length,
        "tile_width": grid.tile_width, "frame_unit": grid.frame_unit.name.lower(),
        "sample_type": header.sample_type.name, "epsg": georef.epsg if georef.is_defined else None,
        "raster_type": georef.raster_type.name.lower(), "transform": list(georef.transform),
        "minx": minx, "miny": miny, "maxx": maxx, "maxy": maxy,
    }


def _bounds(georef: Georeferencing, width: int, height: int) -> tuple[float, float, float, float]:
    """Outer bounds of the pixels (pixel edges, also for PixelIsPoint)."""
    a, b, c, d, e, f = georef.transform
    shift = 0.5 if georef.raster_type is RasterType.POINT else 0.0
    cols = np.array([0, width, 0, width]) - shift
    rows = np.array([0, 0, height, height]) - shift
    xs, ys = a * cols + b * rows + c, d * cols + e * rows + f
    return float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())


def build(paths_or_urls, out, *, storage_options=None):
    """Write a catalog of rumi images to ``out`` (Parquet) and return it as a DataFrame.

    Each image's IFD is read once, here; nothing needs reading again to open it.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"{i}.rumi") for i in range(2)]
    >>> for p in paths:
    ...     _ = xarray_rumi.write(p, np.zeros((1, 32, 32), "uint8"), tile_size=16)
    >>> build(paths, os.path.join(d, "catalog.parquet"))["width"].tolist()
    [32, 32]
    """
    import pandas as pd

    table = pd.DataFrame([_row(os.fspath(u), storage_options) for u in paths_or_urls], columns=list(COLUMNS))
    table["epsg"] = table["epsg"].astype("Int64")
    try:
        import geopandas
        from shapely.geometry import box
    except ImportError:
        table.to_parquet(out, index=False)
        return table
    geometry = [box(r.minx, r.miny, r.maxx, r.maxy) for r in table.itertuples()]
    frame = geopandas.GeoDataFrame(table, geometry=geometry, crs=None)
    frame.to_parquet(out, index=False)
    return frame


def read(catalog):
    """A catalog as a DataFrame, from a Parquet path (a rumi catalog or stac-geoparquet), a DataFrame or STAC Items."""
    if hasattr(catalog, "itertuples"):
        return catalog
    if is_stac(catalog):
        return rows_from_items(catalog)
    import pandas as pd
    import pyarrow.parquet as pq

    if b"stac-geoparquet" in (pq.read_schema(catalog).metadata or {}):
        return rows_from_items(read_stac_geoparquet(catalog))
    return pd.read_parquet(catalog)


def read_stac_geoparquet(path) -> list[dict]:
    """The STAC Item dicts of a stac-geoparquet file (needs ``stac-geoparquet``, in the ``stac`` extra)."""
    import pyarrow.parquet as pq
    from stac_geoparquet.arrow import stac_table_to_items

    return list(stac_table_to_items(pq.read_table(path)))


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


def rows_from_items(items):
    """A catalog DataFrame (with ``id`` and ``datetime`` columns) from STAC Items: nothing is read."""
    import pandas as pd

    rows = []
    for item in stac_item_dicts(items):
        asset = rumi_asset(item)
        header = Header.from_bytes(base64.b64decode(asset[STAC_HEADER]))
        row = _image_row(asset["href"], header, stac_georeferencing(item))
        rows.append({**row, "id": item.get("id"), "datetime": stac_datetime(item)})
    table = pd.DataFrame(rows, columns=[*COLUMNS, "id", "datetime"])
    table["epsg"] = table["epsg"].astype("Int64")
    return table


def georeferencing_of(row) -> Georeferencing:
    """The georeferencing a catalog row records."""
    import pandas as pd

    if pd.isna(row.epsg):
        return Georeferencing(None, ModelType.UNDEFINED, RasterType[row.raster_type.upper()])
    code = int(row.epsg)
    return Georeferencing(code, epsg_model_type(code), RasterType[row.raster_type.upper()], tuple(row.transform))


def images_of(catalog, storage_options=None) -> list[RumiImage]:
    """The opened image of every row of a catalog (a Parquet path or a DataFrame): nothing is read.

    Each opens through :func:`~xarray_rumi.open_image` with the row's blob
    and georeferencing, so the blob is held to the opener's limits, remote
    reads are retried and the blob is checked against the file on its
    first read, as for any image.
    """
    return [open_image(row.url, header=bytes(row.header), storage_options=storage_options,
                       georeferencing=georeferencing_of(row)) for row in read(catalog).itertuples()]


def open_catalog(catalog, *, chunks=None, storage_options=None) -> list:
    """Open every image of a catalog with zero reads of the files.

    ``catalog`` is a Parquet path or a DataFrame from :func:`build`.  Returns
    one Dataset per row, in order, each as ``xr.open_dataset(...,
    engine="rumi", chunks=chunks)`` gives it.  With ``chunks`` ``None``
    (lazy) or ``{}`` (one Dask chunk per frame) the datasets are built
    directly, and images on one grid share their coordinate indexes: well
    under a millisecond an image.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "a.rumi")
    >>> _ = xarray_rumi.write(path, np.arange(64, dtype="uint8").reshape(8, 8), tile_size=4,
    ...                       crs=4326, transform=(1, 0, 10, 0, -1, 50))
    >>> _ = build([path], os.path.join(d, "c.parquet"))
    >>> [ds] = open_catalog(os.path.join(d, "c.parquet"))
    >>> int(ds.band_data.sum()), ds.rio.crs.to_epsg()
    (2016, 4326)
    """
    import xarray as xr

    from .engine import image_coordinates, image_variable
    from .layout import VARIABLE

    with contextlib.suppress(ImportError):
        import rioxarray  # noqa: F401  (.rio on what is returned, as xr.open_dataset gives it)

    if chunks not in (None, {}):
        return [
            xr.open_dataset(row.url, engine="rumi", header=bytes(row.header), georeferencing=georeferencing_of(row),
                            chunks=chunks, storage_options=storage_options)
            for row in read(catalog).itertuples()
        ]
    shared: dict[tuple, xr.Coordinates] = {}  # coordinates by grid, built once
    datasets = []
    for image in images_of(catalog, storage_options):
        key = (image.grid.shape, image.georeferencing)
        if key not in shared:
            shared[key] = image_coordinates(image)
        datasets.append(xr.Dataset({VARIABLE: image_variable(image, chunked=chunks == {})}, coords=shared[key]))
    return datasets
