"""STAC, for Earth-observation tools: Items for rumi files and what opening reads from them, and quicklooks.

``item`` needs ``pystac`` and the stac-geoparquet functions ``stac-geoparquet``
(both in the ``stac`` extra), imported when called; quicklooks need nothing
beyond the core dependencies.
"""

from .geoparquet import build_stac_catalog, read_stac_geoparquet, write_stac_geoparquet
from .items import MEDIA_TYPE, item, item_collection
from .quicklook import quicklook, write_quicklook

__all__ = ["MEDIA_TYPE", "build_stac_catalog", "item", "item_collection", "quicklook", "read_stac_geoparquet",
           "write_stac_geoparquet", "write_quicklook"]
