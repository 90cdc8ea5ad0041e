"""Cubes: grid-aligned rumi Images stacked into ``(dim, band, y, x)``.

The spec's data model stacks Images that share a grid into a Cube; Images
that do not share one stay an ImageCollection.  :func:`open_cube` checks
that, from the headers and georeferencing alone (no frame is read), and then
stacks the lazily opened images so every Dask chunk is still one frame.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import pandas as pd
import xarray as xr

from ..reading.image import RumiImage
from ..reading.open import open_image
from .catalog import georeferencing_of, is_stac, rows_from_items
from .engine import image_variable, layout_coordinates
from .layout import VARIABLE, cube_layout


def open_cube(paths_or_items, headers=None, dim="time", *, storage_options=None, chunks=None,
              **open_kwargs) -> xr.Dataset:
    """Open grid-aligned rumi images as one ``(dim, band, y, x)`` dataset, one Dask chunk per frame.

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
    ``chunks`` defaults to ``{}``: the frame grid.

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
    """
    if is_stac(paths_or_items):
        if headers is not None:
            raise ValueError("STAC Items carry their blobs; pass headers= only with paths")
        table = rows_from_items(paths_or_items)
        paths, headers = list(table.url), [bytes(h) for h in table.header]
        given = any(open_kwargs.get(k) is not None for k in _GEOREFERENCING_KWARGS)
        georefs = [{}] * len(paths) if given else [{"georeferencing": georeferencing_of(r)} for r in table.itertuples()]
        if isinstance(dim, str) and not table.datetime.isna().any():
            dim = pd.DatetimeIndex(table.datetime, name=dim)
    else:
        paths = [os.fspath(p) for p in paths_or_items]
        headers = _headers_for(paths, headers)
        georefs = [{}] * len(paths)
    if not paths:
        raise ValueError("open_cube needs at least one path")
    images = [
        open_image(path, header=header, storage_options=storage_options, **open_kwargs, **georef)
        for path, header, georef in zip(paths, headers, georefs)
    ]
    layout = cube_layout(images, _dimension_name(dim), paths)
    chunks = {} if chunks is None else chunks
    if chunks == {}:
        cube = _stack(images, layout, dim)
    else:
        # Hand over what is already known (re-opening reads nothing), and the rest as given.
        reopen = {k: v for k, v in open_kwargs.items() if k not in _GEOREFERENCING_KWARGS}
        datasets = [
            xr.open_dataset(path, engine="rumi", header=image.header, georeferencing=image.georeferencing,
                            storage_options=storage_options, chunks=chunks, **reopen)
            for path, image in zip(paths, images)
        ]
        cube = xr.concat(datasets, dim=dim, data_vars="all", coords="minimal", compat="override",
                         join="override", combine_attrs="override")
    cube.band_data.encoding = layout.encoding
    return cube


_GEOREFERENCING_KWARGS = ("crs", "transform", "raster_type", "georeferencing")


def _stack(images: Sequence[RumiImage], layout, dim) -> xr.Dataset:
    """The Cube ``xr.concat`` of the opened images gives, built in one step.

    The images are aligned, so they share every coordinate: stacking their
    frame-chunked arrays costs microseconds an image, where opening each
    through ``xr.open_dataset`` and concatenating costs milliseconds.
    """
    import dask.array

    with contextlib.suppress(ImportError):
        import rioxarray  # noqa: F401  (.rio on the Cube, as xr.open_dataset's plugins give it)

    data = dask.array.stack([image_variable(image, chunked=True).data for image in images])
    stacked = xr.Variable(layout.dims, data, attrs=layout.attrs)
    cube = xr.Dataset({VARIABLE: stacked}, coords=layout_coordinates(layout))
    return cube if layout.stack_dim is dim else cube.assign_coords({layout.stack_dim: dim})


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


__all__ = ["open_cube"]
