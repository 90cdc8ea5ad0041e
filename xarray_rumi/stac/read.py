"""STAC in: the rumi image each STAC Item records (docs/stac.md, "The fields"), for ``dataset/`` to open unread."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import itertools
import json
from dataclasses import dataclass

import numpy as np

from ..format.geo import Georeferencing, RasterType, corner_to_centre, georeferencing, resolve_crs

#: Not ``image/*``: generic loaders would read the frames as GeoTIFF pixels (docs/stac.md, "Media type").
STAC_MEDIA_TYPE = "application/vnd.rumi+tiff"
STAC_HEADER = "rumi:header"
STAC_RASTER_TYPE = "rumi:raster_type"
STAC_TRANSFORM = "rumi:transform"
#: The projection extension's ways of giving a CRS: v2's code, WKT2 and PROJJSON, and v1's ``proj:epsg``.
STAC_CRS_FIELDS = ("proj:code", "proj:epsg", "proj:wkt2", "proj:projjson")


@dataclass(frozen=True)
class StacBand:
    """What an Item says of one band of an asset, as STAC spells it (``nodata`` may be ``"nan"``)."""

    name: str | None = None
    nodata: float | int | str | None = None
    scale: float | None = None
    offset: float | None = None
    unit: str | None = None


@dataclass(frozen=True)
class ItemImage:
    """A rumi image as a STAC Item records it; ``blob`` unparsed (the opener parses it under its limits)."""

    href: str
    blob: bytes
    georeferencing: Georeferencing
    id: str | None
    #: UTC, ``NaT`` when the Item has no date.
    datetime: np.datetime64
    asset: str | None = None
    bands: tuple[StacBand, ...] = ()

    @property
    def record(self) -> str:
        return _record(self.id)

    def __eq__(self, other) -> bool:
        # field-wise == would give numpy.bool_, and NaT would make an image unequal to itself
        if not isinstance(other, ItemImage):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def _compared(self) -> tuple:
        nanoseconds = int(self.datetime.astype("M8[ns]").astype(np.int64))  # NaT too: the lowest int64
        return self.href, self.blob, self.georeferencing, self.id, nanoseconds, self.asset, self.bands


def item_images(items, asset: str | None = None) -> list[ItemImage]:
    """Each STAC Item's rumi image, reading no file; ``asset=None``: the one asset with a blob, else ``ValueError``."""
    images = []
    for item in stac_item_dicts(items):
        key, fields = rumi_asset(item, asset)
        blob = decode_blob(fields[STAC_HEADER], _record(item.get("id")))
        images.append(ItemImage(fields["href"], blob, stac_georeferencing(item, key), item.get("id"),
                                stac_datetime(item), key, asset_bands(fields)))
    return images


def asset_bands(asset: dict) -> tuple[StacBand, ...]:
    """The bands an asset dict describes (``eo:bands``/``bands`` names, :func:`raster_bands` values)."""
    named = [band or {} for band in asset.get("eo:bands") or asset.get("bands") or []]
    return tuple(StacBand(names.get("name"), values.get("nodata"), values.get("scale"), values.get("offset"),
                          values.get("unit"))
                 for names, values in itertools.zip_longest(named, raster_bands(asset), fillvalue={}))


#: STAC 1.1's ``bands`` fields by the names ``raster:bands`` gives them.
_RASTER_NAMES = {"nodata": "nodata", "unit": "unit", "scale": "scale", "offset": "offset", "raster:scale": "scale",
                 "raster:offset": "offset"}


def raster_bands(asset: dict) -> list[dict]:
    """An asset's ``raster:bands``, else what its STAC 1.1 ``bands`` say of the same fields."""
    # stac-geoparquet gives a band null where an asset has fewer bands than another
    if asset.get("raster:bands"):
        return [dict(band or {}) for band in asset["raster:bands"]]
    return [{_RASTER_NAMES[k]: v for k, v in (band or {}).items() if k in _RASTER_NAMES}
            for band in asset.get("bands") or []]


def _record(item_id) -> str:
    return f"STAC Item {item_id!r}"


def decode_blob(encoded, record: str) -> bytes:
    """The blob of a base64 ``rumi:header``, or a ``ValueError`` naming ``record``."""
    if not isinstance(encoded, str | bytes):
        raise ValueError(f"{record}: {STAC_HEADER} must be the blob in base64 text, got {type(encoded).__name__}")
    try:
        return base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"{record}: {STAC_HEADER} is not base64 (standard alphabet, padded): {exc}") from None


def is_stac(value) -> bool:
    """Whether ``value`` is STAC: an Item, an ItemCollection, their dicts, or a list of Items."""
    if isinstance(value, (list, tuple)):  # of Items: collections are given, not listed
        return bool(value) and all(_is_item(v) for v in value)
    return _is_item(value) or type(value).__name__ == "ItemCollection" or (
        isinstance(value, dict) and value.get("type") == "FeatureCollection")


def _is_item(value) -> bool:
    if isinstance(value, dict):
        return value.get("type") == "Feature"
    return hasattr(value, "to_dict") and hasattr(value, "assets")  # a pystac Item


def is_stac_geoparquet(path) -> bool:
    """Whether the Parquet file at ``path`` is stac-geoparquet (its schema says so), not a rumi catalog."""
    import pyarrow.parquet as pq

    return b"stac-geoparquet" in (pq.read_schema(path).metadata or {})


def read_stac_geoparquet(path) -> list[dict]:
    """The STAC Item dicts of a stac-geoparquet file (needs ``stac-geoparquet``, in the ``stac`` extra)."""
    import pyarrow.parquet as pq
    from stac_geoparquet.arrow import stac_table_to_items

    return list(stac_table_to_items(pq.read_table(path)))


#: The columns :func:`stac_geoparquet_images` reads.
_ITEM_PROPERTIES = ("datetime", "start_datetime", *STAC_CRS_FIELDS, "proj:transform")
_ASSET_FIELDS = ("href", STAC_HEADER, STAC_RASTER_TYPE, STAC_TRANSFORM, *STAC_CRS_FIELDS, "proj:transform",
                 "eo:bands", "bands", "raster:bands")


def stac_geoparquet_images(path, asset: str | None = None) -> list[ItemImage]:
    """``item_images(read_stac_geoparquet(path), asset)``, reading only the columns it needs with pyarrow."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    table = pq.read_table(path, columns=[c for c in ("id", "assets", *_ITEM_PROPERTIES) if c in names])
    properties = {name: table[name].to_pylist() for name in _ITEM_PROPERTIES[2:] if name in names}
    assets = _blob_assets(table["assets"].combine_chunks()) if "assets" in names else {}
    datetimes = _utc_datetimes(table)
    # Items that say the same of their georeferencing and bands share them, built once
    described: dict[str, tuple[Georeferencing, tuple]] = {}
    blobs: dict[str, bytes] = {}
    images = []
    for row, item_id in enumerate(table["id"].to_pylist()):
        key = _rumi_asset_key(item_id, [k for k, f in assets.items() if f[STAC_HEADER][row] is not None], asset)
        fields = _present({name: values[row] for name, values in assets[key].items()})
        said = _present({name: values[row] for name, values in properties.items()})
        said_key = repr((key, said, [(n, v) for n, v in fields.items() if n not in ("href", STAC_HEADER)]))
        if said_key not in described:
            item = {"id": item_id, "properties": said, "assets": {key: fields}}
            described[said_key] = stac_georeferencing(item, key), asset_bands(fields)
        encoded = fields[STAC_HEADER]
        if encoded not in blobs:
            blobs[encoded] = decode_blob(encoded, _record(item_id))
        georef, bands = described[said_key]
        images.append(ItemImage(fields["href"], blobs[encoded], georef, item_id, datetimes[row], key, bands))
    return images


def _present(fields: dict) -> dict:
    return {name: value for name, value in fields.items() if value is not None}


def _blob_assets(assets) -> dict[str, dict[str, list]]:
    """``{asset: {field: values}}`` of each asset that may carry a blob; flattening keeps the parents' nulls."""
    found = {}
    for field, values in zip(assets.type, assets.flatten()):
        fields = {f.name: column for f, column in zip(values.type, values.flatten()) if f.name in _ASSET_FIELDS}
        if STAC_HEADER in fields:
            found[field.name] = {name: column.to_pylist() for name, column in fields.items()}
    return found


def _utc_datetimes(table) -> np.ndarray:
    import pandas as pd

    dates = np.full(table.num_rows, np.datetime64("NaT", "ns"))
    # datetime last: it wins where both are given
    for name in [name for name in ("start_datetime", "datetime") if name in table.column_names]:
        values = pd.to_datetime(table[name].to_pandas(), utc=True, format="ISO8601")
        dates = np.where(values.isna(), dates, values.dt.tz_localize(None).to_numpy("M8[ns]"))
    return dates


def stac_item_dicts(items) -> list[dict]:
    """Item dicts from an Item, an ItemCollection, their dicts, or a list of Items."""
    if isinstance(items, dict):
        return list(items["features"]) if items.get("type") == "FeatureCollection" else [items]
    if type(items).__name__ == "ItemCollection":
        return stac_item_dicts(items.items)
    if not _is_item(items):
        return [d for i in items for d in stac_item_dicts(i)]
    as_dict = items.to_dict(include_self_link=False)  # a pystac Item, its asset hrefs made absolute
    for key, asset in items.assets.items():
        as_dict["assets"][key]["href"] = asset.get_absolute_href() or asset.href
    return [as_dict]


def rumi_asset(item: dict, asset: str | None = None) -> tuple[str, dict]:
    """``(key, asset dict)`` of an Item dict's rumi asset: ``asset``, else the one asset carrying a blob."""
    assets = item.get("assets", {})
    key = _rumi_asset_key(item.get("id"), [k for k, fields in assets.items() if STAC_HEADER in fields], asset)
    return key, assets[key]


def _rumi_asset_key(item_id, keys: list[str], asset: str | None) -> str:
    """``asset``, or the one key of ``keys`` (the assets with a blob) when ``None``; else ``ValueError``."""
    if asset is not None:
        if asset not in keys:
            raise ValueError(f"STAC Item {item_id!r} has no rumi asset {asset!r} (an asset with a {STAC_HEADER} "
                             f"blob); its rumi assets: {keys}")
        return asset
    if len(keys) != 1:
        named = f" ({', '.join(map(repr, keys))})" if keys else ""
        several = "; choose with assets=, or load by band name with xarray_rumi.stac.load" if len(keys) > 1 else ""
        raise ValueError(f"STAC Item {item_id!r} has {len(keys)} assets with a {STAC_HEADER} blob{named}; "
                         f"expected exactly one (see docs/stac.md){several}")
    return keys[0]


def stac_georeferencing(item: dict, asset: str | None = None) -> Georeferencing:
    """The georeferencing an Item records, the asset's fields over the Item's; ``ValueError`` naming a bad field."""
    asset = rumi_asset(item, asset)[1]
    fields = {**(item.get("properties") or {}), **asset}
    record = _record(item.get("id"))
    own_matrix = asset.get(STAC_TRANSFORM) is not None
    transform_field = STAC_TRANSFORM if own_matrix else "proj:transform"
    crs_fields = [(name, _crs_value(fields[name])) for name in STAC_CRS_FIELDS if fields.get(name) is not None]
    crs_field, crs = crs_fields[0] if crs_fields else (STAC_CRS_FIELDS[0], None)
    georef = georeferencing(crs, fields.get(transform_field), fields.get(STAC_RASTER_TYPE), record=record,
                            fields=(crs_field, transform_field, STAC_RASTER_TYPE))
    for name, value in crs_fields[1:]:
        try:
            other = resolve_crs(value)[0]
        except (TypeError, ValueError):  # a form pyproj cannot reduce to an EPSG code says nothing against the first
            continue
        if other != georef.epsg:
            raise ValueError(f"{record}: its CRS fields name different CRSs ({crs_field} EPSG:{georef.epsg}, "
                             f"{name} EPSG:{other})")
    if georef.is_defined and georef.raster_type is RasterType.POINT and not own_matrix:
        # proj:transform places pixel corners (GDAL's convention); a PixelIsPoint file's matrix places centres.
        return dataclasses.replace(georef, transform=corner_to_centre(georef.transform))
    return georef


def _crs_value(value):
    return json.dumps(_without_nulls(value), sort_keys=True) if isinstance(value, dict) else value


def _without_nulls(value):
    # Parquet gives a PROJJSON struct every member any row has
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def stac_datetime(item: dict):
    """The Item's ``datetime`` (or ``start_datetime``) as a UTC ``numpy.datetime64``, or ``NaT``."""
    import pandas as pd

    properties = item.get("properties", {})
    stamp = pd.Timestamp(properties.get("datetime") or properties.get("start_datetime"))  # NaT for None
    if stamp.tzinfo is not None:  # xarray's time coordinates are naive: UTC, as STAC's are
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return stamp.to_datetime64()
