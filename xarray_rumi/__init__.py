"""xarray-rumi: the rumi raster format for xarray, Dask and Zarr.

>>> import numpy as np, tempfile, os, xarray_rumi
>>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
>>> blob = xarray_rumi.write(path, np.zeros((3, 256, 256), "uint8"), tile_size=128)
>>> xarray_rumi.validate(path, blob)
>>> xarray_rumi.header_from_file(path) == blob
True
"""

from importlib import import_module as _import_module
from importlib import metadata as _metadata
from importlib.util import find_spec as _find_spec

from . import accessor  # noqa: F401  (registers .rumi on DataArray and Dataset)
from . import stac  # noqa: F401  (public by its name: xarray_rumi.stac.item; pystac loads only when called)
from .errors import RumiFormatError
from .format.geo import Georeferencing
from .format.limits import Limits
from .io.retry import RetryPolicy
from .reading.batch import read_windows
from .reading.open import header_from_file, open_image
from .reading.validate import validate
from .writing.data_array import (BandLabelsNotStoredWarning, GcpsNotStoredWarning, NodataNotStoredWarning,
                                 ScaleNotStoredWarning)
from .writing.write import write

try:
    __version__ = _metadata.version("xarray-rumi")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

# Loaded on first use (their modules need optional dependencies): name -> (module, its name there, needs).
_LAZY = {
    "references": ("xarray_rumi.virtual.kerchunk", "references", ("zarr", "numcodecs")),
    "RumiParser": ("xarray_rumi.virtual.parser", "RumiParser", ("zarr", "numcodecs")),
    "open_cube": ("xarray_rumi.dataset.cube", "open_cube", ()),
    "open_catalog": ("xarray_rumi.dataset.catalog", "open_catalog", ()),
    "build_catalog": ("xarray_rumi.dataset.catalog", "build", ("pyarrow",)),
    "open_collection": ("xarray_rumi.dataset.collection", "open_collection", ()),
    "convert": ("xarray_rumi.writing.convert", "convert", ("rasterio", "rioxarray")),
}


def __getattr__(name):
    if name in _LAZY:
        module, attribute, _ = _LAZY[name]
        return getattr(_import_module(module), attribute)
    raise AttributeError(f"module 'xarray_rumi' has no attribute {name!r}")


def _installed(packages) -> bool:
    try:
        return all(_find_spec(package) is not None for package in packages)
    except (ImportError, ValueError):  # a package made unimportable (sys.modules[name] = None)
        return False


# only names whose extra is installed: pydoc and ``import *`` fetch every listed name
__all__ = sorted([
    "BandLabelsNotStoredWarning", "GcpsNotStoredWarning", "Georeferencing", "Limits", "NodataNotStoredWarning",
    "RetryPolicy", "RumiFormatError", "ScaleNotStoredWarning", "__version__", "header_from_file", "open_image",
    "read_windows", "validate", "write", *(name for name, (_, _, needs) in _LAZY.items() if _installed(needs)),
])


def __dir__():
    # stac is the one submodule users reach by its name (xarray_rumi.stac.item); the others are the package's inside
    return sorted({*__all__, "stac"})
