"""Cubes: grid-aligned rumi Images stacked into ``(dim, band, y, x)``.

The spec's data model stacks Images that share a grid into a Cube; Images
that do not share one stay an ImageCollection.  :func:`open_cube` checks
that, from the headers and georeferencing alone (no frame is read), and then
makes one Dask array over all of them (:mod:`xarray_rumi.dataset.chunking`):
a chunk is a block of whole frames, which may span several images, read by
one task.  With ``chunks=False`` the same array is lazily indexed instead,
for many small reads where a Dask computation each would cost more than
the read.
"""

from __future__ import annotations

import contextlib
import os

import pandas as pd
import xarray as xr
from xarray.core import indexing

from ..datamodel.variable import VARIABLE, cube_layout
from ..reading.open import caller_georeferencing, load_headers, open_image
from ..stac.read import is_stac, item_images
from .chunking import dask_array
from .engine import RumiCubeArray, index_kind, layout_coordinates, spatially_indexed


def open_cube(paths_or_items, headers=None, dim="time", *, storage_options=None, chunks=None, index=None,
              **open_kwargs) -> xr.Dataset:
    """Open grid-aligned rumi images as one ``(dim, band, y, x)`` dataset, lazily, on Dask.

    ``paths_or_items`` is a list of paths/URLs, or STAC Items of rumi files
    (``pystac`` Items, an ItemCollection, or their dicts, as
    :func:`xarray_rumi.stac.item` makes them).  From Items, the blobs and the
    georeferencing come from the Items, so opening reads nothing, and when
    ``dim`` is a name its coordinate is the Items' datetimes (UTC).

    ``headers`` is ``None`` (rebuild each blob from its IFD), ``"sidecar"``
    (``<path>.header`` beside each file), or one entry per path (blob bytes, a
    blob path/URL, or ``None``).  ``dim`` is the new dimension's name, or a
    ``pandas.Index`` / ``DataArray`` that also gives its coordinate, as in
    ``xr.concat``.  ``open_kwargs`` (``crs=``, ``transform=``,
    ``georeferencing=False``, ...) go to the engine for every image.
    ``chunks`` is ``{}`` (the default: one chunk per frame of each image),
    ``"auto"`` (chunks of about Dask's ``array.chunk-size`` in whole frames,
    several images deep), or a dict such as ``{"time": 8, "y": 1024, "x":
    1024}``; each chunk is read by one task, its frames decoded in parallel.
    ``chunks=False`` gives no Dask at all: the Cube is lazily indexed, as
    ``xr.open_dataset`` without ``chunks`` gives an image, and each selection
    reads only the frames it touches when its values are asked for.  It is
    the form for many small reads one at a time, such as training chips,
    where going through Dask costs more than the read (docs/backend.md,
    "Choosing chunks").
    ``index`` is the engine's: ``None``/``"default"`` (pandas indexes over
    ``x``/``y``) or ``"raster"`` (a ``rasterix.RasterIndex`` from the shared
    georeferencing, the CRS assigned with xproj; the ``rasterix`` extra).

    Raises ``ValueError`` naming the first of shape, transform, CRS, tile
    size, frame unit and sample type in which an image differs.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> root = tempfile.mkdtemp()
    >>> paths = [os.path.join(root, f"t{i}.rumi") for i in range(3)]
    >>> blobs = [xarray_rumi.write(p, np.full((2, 40, 30), i, "uint8"), tile_size=16) for i, p in enumerate(paths)]
    >>> cube = open_cube(paths, blobs)
    >>> cube.band_data.dims, cube.band_data.chunks[:2]
    (('time', 'band', 'y', 'x'), ((1, 1, 1), (1, 1)))
    >>> cube.band_data.mean(("band", "y", "x")).values.tolist()
    [0.0, 1.0, 2.0]
    >>> open_cube(paths, blobs, chunks=False).band_data[2, :, 5:8, 0].values.tolist()
    [[2, 2, 2], [2, 2, 2]]
    """
    index = index_kind(index)  # before anything is opened
    if is_stac(paths_or_items):
        if headers is not None:
            raise ValueError("STAC Items carry their blobs; pass headers= only with paths")
        recorded = item_images(paths_or_items)
        paths, headers = [i.href for i in recorded], [i.blob for i in recorded]
        given = any(open_kwargs.get(k) is not None for k in _GEOREFERENCING_KWARGS)
        georefs = [{}] * len(paths) if given else [
            {"georeferencing": i.georeferencing, "claimed_by": i.record} for i in recorded]
        if isinstance(dim, str) and not any(pd.isna(i.datetime) for i in recorded):
            dim = pd.DatetimeIndex([i.datetime for i in recorded], name=dim)
    else:
        if isinstance(paths_or_items, (str, bytes, os.PathLike)):
            # a string is a sequence too: each of its characters would be taken for a path
            raise TypeError(f"open_cube takes a list of paths or URLs, got one: {paths_or_items!r}; pass "
                            f"[{paths_or_items!r}] for a Cube of one image, or open it with xr.open_dataset")
        paths = [os.fspath(p) for p in paths_or_items]
        headers = _headers_for(paths, headers)
        georefs = [{}] * len(paths)
    if not paths:
        raise ValueError("open_cube needs at least one path")
    # What the images share (the caller's georeferencing) is built once, not once an image; so are the
    # blobs' checks: each distinct blob once, those of one grid together (reading.open.load_headers).
    shared = _shared_georeferencing(open_kwargs)
    headers = load_headers(headers, paths, storage_options, **_header_kwargs(open_kwargs))
    images = [
        open_image(path, header=header, storage_options=storage_options, **shared, **georef)
        for path, header, georef in zip(paths, headers, georefs)
    ]
    return cube_dataset(images, dim, chunks, paths, index=index)


def cube_dataset(images, dim="time", chunks=None, names=None, *, index=None) -> xr.Dataset:
    """The Cube of opened, aligned images: one Dask array over all of them, chunked by ``chunks``.

    ``dim``, ``chunks`` and ``index`` are :func:`open_cube`'s (``chunks=False``:
    lazily indexed, no Dask); ``names`` name the images in the error that a
    misaligned one raises.
    """
    layout = cube_layout(images, _dimension_name(dim), names)
    array = RumiCubeArray(images)
    if chunks is False:
        data = indexing.LazilyIndexedArray(array)
    else:
        data = dask_array(array, layout, chunks, verify=images[0].verify)
    with contextlib.suppress(ImportError):
        import rioxarray  # noqa: F401  (.rio on the Cube, as xr.open_dataset's plugins give it)
    stacked = xr.Variable(layout.dims, data, attrs=layout.attrs, encoding=layout.encoding)
    cube = xr.Dataset({VARIABLE: stacked}, coords=layout_coordinates(layout))
    cube = spatially_indexed(cube, index, layout.georeferencing, f"the Cube's {len(images)} images")
    return cube if layout.stack_dim is dim else cube.assign_coords({layout.stack_dim: dim})


_GEOREFERENCING_KWARGS = ("crs", "transform", "raster_type", "georeferencing")


def _shared_georeferencing(open_kwargs: dict) -> dict:
    """``open_kwargs`` with the caller's georeferencing, if any, as one :class:`Georeferencing`."""
    given = {k: open_kwargs[k] for k in _GEOREFERENCING_KWARGS if k in open_kwargs}
    rest = {k: v for k, v in open_kwargs.items() if k not in given}
    supplied = caller_georeferencing(**given)
    return rest if supplied is None else {**rest, "georeferencing": supplied}


def _header_kwargs(open_kwargs: dict) -> dict:
    """What of ``open_kwargs`` governs reading the blobs: the limits they are held to, how blob files are fetched."""
    return {k: open_kwargs[k] for k in ("limits", "retry") if k in open_kwargs}


def _dimension_name(dim):
    """The new dimension's name, as ``xr.concat`` takes it from a name, an index or a 1-D array."""
    if isinstance(dim, xr.DataArray | xr.Variable):
        (name,) = dim.dims
        return name
    try:
        hash(dim)  # a pandas Index claims to be Hashable, then refuses to be hashed
    except TypeError:
        return getattr(dim, "name", None) or "concat_dim"
    return dim


def _headers_for(paths: list[str], headers) -> list:
    if headers is None:
        return [None] * len(paths)
    if isinstance(headers, str) and headers == "sidecar":
        return [f"{path}.header" for path in paths]
    if isinstance(headers, (bytes, bytearray, str)):
        raise TypeError("headers must be None, 'sidecar' or one header per path")
    headers = list(headers)
    if len(headers) != len(paths):
        raise ValueError(f"{len(paths)} paths but {len(headers)} headers")
    return headers


__all__ = ["cube_dataset", "open_cube"]
