"""Catalogs as stac-geoparquet: one Parquet table that STAC tools and rumi's catalog readers both open."""

from __future__ import annotations

import os

from .items import item_collection
from .read import stac_item_dicts


def write_stac_geoparquet(items, out) -> None:
    """Write STAC Items or their dicts to ``out`` as stac-geoparquet."""
    from stac_geoparquet.arrow import parse_stac_items_to_arrow, to_parquet

    dicts = stac_item_dicts(items)
    missing = [d.get("id") for d in dicts if d.get("geometry") is None]
    if missing:
        raise ValueError(f"stac-geoparquet needs a footprint; Items {missing} have none (their files have no CRS)")
    to_parquet(parse_stac_items_to_arrow(dicts), os.fspath(out))


def build_stac_catalog(paths, out, headers=None, **item_kwargs) -> list[dict]:
    """An Item for each rumi file (:func:`~xarray_rumi.stac.item`), written to ``out`` as stac-geoparquet.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"{i}.rumi") for i in range(2)]
    >>> for i, p in enumerate(paths):
    ...     _ = xarray_rumi.write(p, np.full((1, 32, 32), i, "uint8"), tile_size=16, crs=32633,
    ...                           transform=(10, 0, 500000, 0, -10, 5000000))
    >>> _ = build_stac_catalog(paths, os.path.join(d, "items.parquet"), datetime="2024-01-01T00:00:00Z")
    >>> [int(ds.band_data.max()) for ds in xarray_rumi.open_catalog(os.path.join(d, "items.parquet"))]
    [0, 1]
    """
    dicts = [i.to_dict(include_self_link=False) for i in item_collection(paths, headers, **item_kwargs)]
    write_stac_geoparquet(dicts, out)
    return dicts
