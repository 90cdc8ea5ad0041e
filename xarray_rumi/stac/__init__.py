"""The EO ecosystem's face: STAC Items for rumi files, and quicklooks.

``item`` needs ``pystac`` (the ``stac`` extra), imported when it is called;
quicklooks need nothing beyond the core dependencies.
"""

from .items import MEDIA_TYPE, item, item_collection
from .quicklook import quicklook, write_quicklook

__all__ = ["MEDIA_TYPE", "item", "item_collection", "quicklook", "write_quicklook"]
