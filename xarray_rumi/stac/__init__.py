"""STAC Items, stac-geoparquet, migration and quicklooks; extras are imported when called (docs/stac.md)."""

from .convert_items import convert_items
from .geoparquet import build_stac_catalog, write_stac_geoparquet
from .items import item, item_collection
from .quicklook import quicklook, write_quicklook
from .read import STAC_MEDIA_TYPE as MEDIA_TYPE, read_stac_geoparquet

#: Loaded on first use, so importing this imports no odc.
_LAZY = {"RumiDriver": "xarray_rumi.stac.odc", "load": "xarray_rumi.stac.odc"}

__all__ = ["MEDIA_TYPE", "RumiDriver", "build_stac_catalog", "convert_items", "item", "item_collection", "load",
           "quicklook", "read_stac_geoparquet", "write_stac_geoparquet", "write_quicklook"]


def __getattr__(name):
    import importlib  # here, so that it is no attribute of the package

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'xarray_rumi.stac' has no attribute {name!r}")
