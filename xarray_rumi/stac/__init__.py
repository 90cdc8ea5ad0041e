"""STAC, for Earth-observation tools: Items for rumi files, what opening reads from them, migrating STAC
collections of GeoTIFFs to rumi, and quicklooks.

``item`` needs ``pystac`` and the stac-geoparquet functions ``stac-geoparquet``
(both in the ``stac`` extra), ``convert_items`` also rasterio, imported when called; quicklooks need nothing
beyond the core dependencies.
"""

from .convert_items import convert_items
from .geoparquet import build_stac_catalog, read_stac_geoparquet, write_stac_geoparquet
from .items import MEDIA_TYPE, item, item_collection
from .quicklook import quicklook, write_quicklook

#: odc-stac's reader driver and load (the ``odc`` extra): loaded on first use, so importing this imports no odc.
_LAZY = {"RumiDriver": "xarray_rumi.stac.odc", "load": "xarray_rumi.stac.odc"}

__all__ = ["MEDIA_TYPE", "RumiDriver", "build_stac_catalog", "convert_items", "item", "item_collection", "load", "quicklook",
           "read_stac_geoparquet", "write_stac_geoparquet", "write_quicklook"]


def __getattr__(name):
    import importlib  # here, not at the top, so that it is no attribute of the package

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'xarray_rumi.stac' has no attribute {name!r}")
