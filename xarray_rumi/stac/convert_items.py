"""Migrating STAC Items of GeoTIFFs to rumi (docs/stac.md, "Migrating a STAC collection")."""

from __future__ import annotations

import base64
import copy
import json
import math
import os
import posixpath

import fsspec

from ..format.blob import Header
from ..io.urls import absolute, is_url
from .convert_files import FileJob, FileResult, SourceBands, run_jobs
from .items import FILE, PROJECTION, RASTER, stac_nodata
from .read import (STAC_CRS_FIELDS, STAC_HEADER, STAC_MEDIA_TYPE, raster_bands, read_stac_geoparquet,
                   stac_item_dicts)

EO = "https://stac-extensions.github.io/eo/v1.1.0/schema.json"
#: Media types of a GeoTIFF (COGs add parameters after ``;``); an asset with no type is one when its href says so.
GEOTIFF_TYPES = ("image/tiff", "image/geotiff", "image/x.geotiff")
#: The reason an asset's conversion failed, on the asset left as it was.
REFUSED = "rumi:refused"


def convert_items(items, destination, *, assets=None, tile_size=512, frame_unit="tile", compression="auto",
                  scheduler=None, processes=None, storage_options=None, progress=None) -> list:
    """Convert Items' GeoTIFF assets (or ``assets``) to rumi files under ``destination``; the new ``pystac.Item`` s.

    Valid outputs already there are kept; a failed asset stays, its reason in ``rumi:refused``.

    >>> import numpy as np, pystac, rasterio, tempfile, os, datetime
    >>> d = tempfile.mkdtemp()
    >>> with rasterio.open(os.path.join(d, "b1.tif"), "w", driver="GTiff", width=32, height=32, count=1,
    ...                    dtype="uint16", nodata=0, crs="EPSG:32633",
    ...                    transform=rasterio.Affine(10, 0, 5e5, 0, -10, 5e6)) as f:
    ...     f.write(np.ones((1, 32, 32), "uint16"))
    >>> scene = pystac.Item("scene", None, None, datetime.datetime(2024, 5, 1), {})
    >>> scene.add_asset("B01", pystac.Asset(os.path.join(d, "b1.tif"), media_type="image/tiff"))
    >>> [new] = convert_items([scene], os.path.join(d, "rumi"), processes=1)
    >>> new.assets["B01"].href.endswith("scene/B01.rumi"), new.assets["B01"].extra_fields["raster:bands"]
    (True, [{'data_type': 'uint16', 'nodata': 0}])
    """
    dicts = source_item_dicts(items)
    jobs = plan_jobs(dicts, destination, assets=assets, storage_options=storage_options,
                     options=dict(tile_size=tile_size, frame_unit=frame_unit, compression=compression))
    return converted_items(dicts, run_jobs(jobs, scheduler, processes, progress))


def source_item_dicts(items) -> list[dict]:
    """Item dicts, asset hrefs absolute, from what :func:`convert_items` takes."""
    if isinstance(items, (str, os.PathLike)):
        path = os.fspath(items)
        if path.endswith((".parquet", ".geoparquet")):
            return read_stac_geoparquet(path)
        with open(path) as f:
            dicts = stac_item_dicts(json.load(f))
        base = os.path.dirname(os.path.abspath(path))
        for item in dicts:
            for asset in item.get("assets", {}).values():
                if not is_url(asset["href"]) and not os.path.isabs(asset["href"]):
                    asset["href"] = os.path.normpath(os.path.join(base, asset["href"]))
        return dicts
    return stac_item_dicts(items)


def is_geotiff_asset(asset: dict) -> bool:
    """Whether an asset dict is a GeoTIFF, by media type (its parameters aside) or else by href."""
    if STAC_HEADER in asset:
        return False
    media = asset.get("type")
    if media:
        return media.split(";")[0].strip().lower() in GEOTIFF_TYPES
    return asset["href"].split("?")[0].lower().endswith((".tif", ".tiff"))


def plan_jobs(dicts: list[dict], destination, *, assets=None, options=None, storage_options=None) -> list[FileJob]:
    """One :class:`FileJob` per asset to convert, in order; makes the folders."""
    destination = os.fspath(destination)
    jobs = []
    for item in dicts:
        item_id = _segment(item.get("id"), "Item id")
        for key, asset in item.get("assets", {}).items():
            if (assets is None and is_geotiff_asset(asset)) or (assets is not None and key in assets):
                target = _join(destination, item_id, f"{_segment(key, 'asset key')}.rumi")
                jobs.append(FileJob(item_id, key, asset["href"], target, dict(options or {}), storage_options))
    if len({job.target for job in jobs}) != len(jobs):
        raise ValueError("two Items share an id: their files would replace each other under the destination")
    for folder in {_join(destination, job.item_id) for job in jobs}:
        fs, path = fsspec.core.url_to_fs(folder, **(storage_options or {}))
        fs.makedirs(path, exist_ok=True)
    return jobs


def converted_items(dicts: list[dict], results: list[FileResult]) -> list:
    """Each Item dict as a ``pystac.Item`` with its converted assets replaced."""
    import pystac

    new_items = [copy.deepcopy(item) for item in dicts]
    by_id = {new.get("id"): new for new in new_items}
    for new in new_items:
        new["links"] = [link for link in new.get("links", []) if link.get("rel") != "self"]
    for result in results:
        new, key = by_id[result.job.item_id], result.job.asset
        if result.status == "failed":
            new["assets"][key][REFUSED] = result.reason
            continue
        new["assets"][key] = rumi_asset(new["assets"][key], result, new.get("properties", {}))
        extensions = [PROJECTION, RASTER, FILE] + ([EO] if "eo:bands" in new["assets"][key] else [])
        new["stac_extensions"] = list(dict.fromkeys([*new.get("stac_extensions", []), *extensions]))
    return [pystac.Item.from_dict(new) for new in new_items]


def rumi_asset(source: dict, result: FileResult, properties: dict) -> dict:
    """The asset dict of a converted file."""
    fields = dict(result.fields)
    header = Header.from_bytes(base64.b64decode(fields[STAC_HEADER]))
    asset = {name: value for name, value in source.items()
             if not name.startswith("file:") and name not in ("alternate", "raster:bands", *STAC_CRS_FIELDS)}
    # a null overrides the Item's CRS fields: the asset's CRS is the rumi file's
    asset.update({name: None for name in STAC_CRS_FIELDS if name in properties})
    asset.update(fields)
    asset.update(href=absolute(result.job.target), type=STAC_MEDIA_TYPE, roles=source.get("roles") or ["data"])
    asset["raster:bands"] = band_fields(raster_bands(source), fields["raster:bands"], result.bands,
                                        header.sample_type)
    if "bands" in source:
        asset["bands"] = [{**band, **({"data_type": rumi["data_type"]} if "data_type" in band else {})}
                          for band, rumi in zip(source["bands"], asset["raster:bands"])]
    elif "eo:bands" not in source and any(result.bands.descriptions):
        asset["eo:bands"] = [{"name": name or f"b{index}"} for index, name in enumerate(result.bands.descriptions, 1)]
    return asset


def band_fields(described: list[dict], rumi: list[dict], geotiff: SourceBands, sample_type) -> list[dict]:
    """``raster:bands``: the Item's entries win, the rumi ``data_type``, the GeoTIFF's fields fill the rest."""
    bands = []
    for index, own in enumerate(rumi):
        band = {**(described[index] if index < len(described) else {}), **own}
        if "nodata" not in band and geotiff.nodata is not None:
            band["nodata"] = stac_nodata(geotiff.nodata, sample_type)
        defaults = (("scale", geotiff.scales, 1), ("offset", geotiff.offsets, 0), ("unit", geotiff.units, ""))
        for name, values, default in defaults:
            if name not in band and values[index] not in (default, None):
                band[name] = values[index]
        bands.append(band)
    return bands


def summary(results: list[FileResult]) -> dict:
    """A migration's counts (converted, kept, failed), bytes in and out, and their ratio."""
    counts = {status: sum(r.status == status for r in results) for status in ("converted", "kept", "failed")}
    source_bytes = sum(r.source_bytes or 0 for r in results)  # a failed file has no sizes
    target_bytes = sum(r.target_bytes or 0 for r in results)
    return {**counts, "bytes_in": source_bytes, "bytes_out": target_bytes,
            "ratio": source_bytes / target_bytes if target_bytes else math.nan}


def _segment(name, what: str) -> str:
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or os.sep in name:
        raise ValueError(f"{what} {name!r} cannot name a folder or file under the destination "
                         "(it must be non-empty, not '.' or '..', and hold no '/')")
    return name


def _join(root: str, *parts: str) -> str:
    return posixpath.join(root, *parts) if is_url(root) else os.path.join(root, *parts)
