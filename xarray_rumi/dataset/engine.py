"""The ``rumi`` engine for ``xarray.open_dataset``: an image's Layout as lazily read xarray objects.

>>> import numpy as np, tempfile, os, xarray as xr, xarray_rumi
>>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
>>> blob = xarray_rumi.write(path, np.arange(2 * 60 * 50, dtype="uint16").reshape(2, 60, 50),
...                          tile_size=32, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
>>> ds = xr.open_dataset(path, engine="rumi", header=blob, chunks={})
>>> ds.band_data.chunks
((1, 1), (32, 28), (32, 18))
>>> int(ds.band_data[1, 59, 49])
5999
"""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pandas as pd
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing
from xarray.indexes import PandasIndex

from ..datamodel.variable import VARIABLE, Layout, image_layout
from ..format.geo import Georeferencing
from ..reading.image import RumiImage, read_windows
from ..reading.open import open_image
from .chunking import dask_array


class _WindowsAndPoints(BackendArray):
    """xarray's keys as ``read_window(ranges)`` (step 1) or ``read_points(indices)`` calls, for subclasses."""

    shape: tuple[int, ...]

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, tuple):  # Dask's getter hands over plain slices
            key = indexing.BasicIndexer(key)
        parts = key.tuple
        if isinstance(key, (indexing.BasicIndexer, indexing.OuterIndexer)) and all(
            _is_int(k) or (isinstance(k, slice) and k.step in (None, 1)) for k in parts
        ):
            # Dask's contiguous window: skipping xarray's adapter costs less than a small frame
            return self._read(parts)
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: tuple) -> np.ndarray:
        # xarray hands over integers it has bounds-checked and made non-negative
        squeeze = tuple(0 if _is_int(k) else slice(None) for k in key)
        key = tuple(slice(int(k), int(k) + 1) if _is_int(k) else k for k in key)
        if all(isinstance(k, slice) and k.step in (None, 1) for k in key):
            return self.read_window([range(*k.indices(n)) for k, n in zip(key, self.shape)])[squeeze]
        return self.read_points([_index_array(k, n) for k, n in zip(key, self.shape)])[squeeze]


class RumiBackendArray(_WindowsAndPoints):
    """A lazily read ``(band, y, x)`` rumi image."""

    def __init__(self, image: RumiImage):
        self.image = image
        self.shape = image.grid.shape
        self.dtype = image.sample_type.dtype

    def read_window(self, ranges: list[range]) -> np.ndarray:
        return self.image.read_window(*ranges)

    def read_points(self, indices: list[np.ndarray]) -> np.ndarray:
        return self.image.read_points(*indices)


class RumiCubeArray(_WindowsAndPoints):
    """Aligned rumi images stacked into ``(image, band, y, x)``: a window of several images is one read."""

    def __init__(self, images):
        self.images = tuple(images)
        self.shape = (len(self.images), *self.images[0].grid.shape)
        self.dtype = self.images[0].sample_type.dtype

    def read_window(self, ranges: list[range]) -> np.ndarray:
        which, *window = ranges
        if not which:
            return np.empty((0, *(len(r) for r in window)), self.dtype)
        return read_windows(self.images[which.start:which.stop], *window)

    def read_points(self, indices: list[np.ndarray]) -> np.ndarray:
        which, *points = indices
        if not which.size:
            return np.empty((0, *(p.size for p in points)), self.dtype)
        return np.stack([self.images[i].read_points(*points) for i in which.tolist()])


def _is_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, bool)


def _index_array(k, size: int) -> np.ndarray:
    return np.arange(size, dtype=np.int64)[k].ravel()   # numpy's bounds check and negative indices


def layout_variable(backend_array, layout: Layout, chunks, *, verify: bool) -> xr.Variable:
    """``band_data`` of ``layout`` read through ``backend_array``; ``chunks`` as ``xr.open_dataset`` takes them."""
    if chunks is None:  # xarray's meaning: lazy, no Dask
        data = indexing.LazilyIndexedArray(backend_array)
    else:
        data = dask_array(backend_array, layout, chunks, verify=verify)
    return xr.Variable(layout.dims, data, attrs=layout.attrs, encoding=layout.encoding)


def image_variable(image: RumiImage, *, chunks=None) -> xr.Variable:
    """``band_data`` of an opened image."""
    return layout_variable(RumiBackendArray(image), image_layout(image), chunks, verify=image.verify)


def layout_coordinates(layout: Layout) -> xr.Coordinates:
    """The layout's coordinates with the indexes xarray would infer (built directly: inferring costs more)."""
    with contextlib.suppress(ImportError):
        import rioxarray  # noqa: F401  (.rio on every dataset built here, as xr.open_dataset's plugins give it)
    variables = {name: xr.Variable(c.dims, c.values, attrs=dict(c.attrs)) for name, c in layout.coords.items()}
    indexes = {name: PandasIndex(pd.Index(variable.values, name=name), name)
               for name, variable in variables.items() if variable.dims == (name,)}
    return xr.Coordinates(variables, indexes=indexes)


def image_dataset(image: RumiImage, *, index=None) -> xr.Dataset:
    """The dataset of an opened image; ``index`` as the engine's."""
    dataset = xr.Dataset({VARIABLE: image_variable(image)}, coords=layout_coordinates(image_layout(image)))
    return spatially_indexed(dataset, index, image.georeferencing, repr(image.source.url))


#: What ``index=`` takes, besides ``None``.
INDEXES = ("default", "raster")


def index_kind(index) -> str:
    """``index=`` checked: ``"default"`` or ``"raster"``; ``ImportError`` for ``"raster"`` without rasterix."""
    if index is not None and (not isinstance(index, str) or index not in INDEXES):
        allowed = ", ".join(repr(i) for i in (None, *INDEXES))
        raise ValueError(f"index={index!r} is not one of {allowed}")
    if index == "raster":
        _raster_index()
    return index or "default"


def _raster_index():
    try:
        from . import raster_index
    except ModuleNotFoundError as err:
        if err.name not in ("rasterix", "xproj"):
            raise
        # cli/shared.install_hint's words: the layering keeps it out of reach
        raise ImportError(f'index="raster" needs rasterix and xproj ({err.name} is not installed), the rasterix '
                          'extra: pip install "xarray-rumi[rasterix]" (in a clone: pip install ".[rasterix]")') from err
    return raster_index


def spatially_indexed(dataset: xr.Dataset, index, georeferencing: Georeferencing | None, what: str) -> xr.Dataset:
    """``dataset`` with ``x``/``y`` indexed by pandas or a ``rasterix.RasterIndex``; ``what`` names it in errors."""
    if index_kind(index) == "default":
        return dataset
    return _raster_index().raster_indexed(dataset, georeferencing, what)


class RumiBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(path_or_url, engine="rumi", ...)`` with :func:`xarray_rumi.open_image`'s parameters."""

    description = "Open rumi rasters (BigTIFF + OpenZL frames + header blob) lazily; chunks={}: one Dask chunk a frame"
    url = "https://pypi.org/project/xarray-rumi/"
    open_dataset_parameters = (
        "filename_or_obj", "drop_variables", "header", "storage_options",
        "crs", "transform", "raster_type", "georeferencing", "limits", "verify", "retry", "index",
    )

    def open_dataset(self, filename_or_obj, *, drop_variables=None, index=None, **open_kwargs) -> xr.Dataset:
        # open_kwargs: open_image's, with its defaults (open_dataset_parameters lists them for xarray)
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            raise TypeError(f"the rumi engine opens a path or an fsspec URL, not {type(filename_or_obj).__name__}")
        index = index_kind(index)   # refused before any read
        dataset = image_dataset(open_image(filename_or_obj, **open_kwargs), index=index)
        return dataset if drop_variables is None else dataset.drop_vars(drop_variables, errors="ignore")

    def guess_can_open(self, filename_or_obj) -> bool:
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        return isinstance(path, str) and path.split("?", 1)[0].lower().endswith(".rumi")


__all__ = [
    "INDEXES", "RumiBackendArray", "RumiBackendEntrypoint", "RumiCubeArray", "image_dataset", "image_variable",
    "index_kind", "layout_coordinates", "layout_variable", "spatially_indexed",
]
