"""xarray-rumi: the rumi raster format for xarray, Dask and Zarr.

>>> import numpy as np, tempfile, os, xarray_rumi
>>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
>>> blob = xarray_rumi.write(path, np.zeros((3, 256, 256), "uint8"), tile_size=128)
>>> xarray_rumi.validate(path, blob)
>>> xarray_rumi.header_from_file(path) == blob
True
"""

from importlib.metadata import PackageNotFoundError, version

from . import accessor  # noqa: F401  (registers .rumi on DataArray and Dataset)
from .errors import RumiFormatError
from .format.limits import Limits
from .reader import header_from_file, open_image
from .validate import validate
from .write import write

try:
    __version__ = version("xarray-rumi")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

# Names whose modules pull in optional dependencies (zarr, kerchunk, ...) load on first use.
_LAZY = {
    "references": "xarray_rumi.refs",
    "RumiParser": "xarray_rumi.refs",
    "open_cube": "xarray_rumi.cube",
    "open_catalog": "xarray_rumi.catalog",
    "open_collection": "xarray_rumi.collection",
}


def __getattr__(name):
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in ("catalog", "collection", "convert"):  # submodules with optional dependencies
        return importlib.import_module(f"xarray_rumi.{name}")
    raise AttributeError(f"module 'xarray_rumi' has no attribute {name!r}")


__all__ = [
    "Limits", "RumiFormatError", "RumiParser", "__version__", "header_from_file", "open_catalog",
    "open_collection", "open_cube", "open_image", "references", "validate", "write",
]
