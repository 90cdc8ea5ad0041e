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

import xarray as xr

from .engine import VARIABLE, image_coordinates, image_variable, open_rumi_image
from ..reading.image import RumiImage

#: What must agree for Images to form a Cube, in the order they are checked.
ALIGNMENT = ("shape", "transform", "crs", "tile size", "frame unit", "sample type")


def alignment_key(image: RumiImage) -> dict:
    """The properties :func:`open_cube` compares, named as in its error messages."""
    grid, georef = image.grid, image.georeferencing
    defined = georef is not None and georef.is_defined
    return {
        "shape": grid.shape,
        # The raster type belongs with the transform: the same matrix read as
        # PixelIsArea or PixelIsPoint puts pixels half a pixel apart.
        "transform": (georef.transform, georef.raster_type.name.lower()) if defined else None,
        "crs": f"EPSG:{georef.epsg}" if defined else None,
        "tile size": (grid.tile_length, grid.tile_width),
        "frame unit": grid.frame_unit.name.lower(),
        "sample type": image.sample_type.name,
    }


def check_aligned(images: Sequence[RumiImage], names: Sequence[str] | None = None) -> None:
    """Raise ``ValueError`` naming the first property in which an image differs from the first one.

    Misaligned images are each valid rumi files, so this is not a
    ``RumiFormatError``: they simply form an ImageCollection, not a Cube.
    """
    names = list(names) if names is not None else [img.source.url for img in images]
    reference = alignment_key(images[0])
    for position, image in enumerate(images[1:], start=1):
        key = alignment_key(image)
        for prop in ALIGNMENT:
            if key[prop] != reference[prop]:
                raise ValueError(
                    f"cannot stack into a Cube: image {position} ({names[position]!r}) has {prop} "
                    f"{_describe(key[prop])}, but image 0 ({names[0]!r}) has {_describe(reference[prop])}"
                )


def _describe(value) -> str:
    return "none (no georeferencing)" if value is None else str(value)


def open_cube(paths, headers=None, dim="time", *, storage_options=None, chunks=None, **open_kwargs) -> xr.Dataset:
    """Open grid-aligned rumi images as one ``(dim, band, y, x)`` dataset, one Dask chunk per frame.

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
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("open_cube needs at least one path")
    headers = _headers_for(paths, headers)
    images = [
        open_rumi_image(path, header=header, storage_options=storage_options, **open_kwargs)
        for path, header in zip(paths, headers)
    ]
    check_aligned(images, paths)
    chunks = {} if chunks is None else chunks
    if chunks == {}:
        cube = _stack(images, dim, verify=open_kwargs.get("verify", True))
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
    encoding = cube.band_data.encoding
    # One blob per image: the stacked variable records them all, in stacking order.
    encoding.pop("header", None)
    encoding.pop("source", None)
    encoding["headers"] = [image.header.to_bytes() for image in images]
    encoding["sources"] = paths
    return cube


_GEOREFERENCING_KWARGS = ("crs", "transform", "raster_type", "georeferencing")


def _stack(images: Sequence[RumiImage], dim, *, verify: bool) -> xr.Dataset:
    """The Cube ``xr.concat`` of the opened images gives, built in one step.

    The images are aligned, so they share every coordinate: stacking their
    frame-chunked arrays costs microseconds an image, where opening each
    through ``xr.open_dataset`` and concatenating costs milliseconds.
    """
    import dask.array

    with contextlib.suppress(ImportError):
        import rioxarray  # noqa: F401  (.rio on the Cube, as xr.open_dataset's plugins give it)

    variables = [image_variable(image, chunked=True, verify=verify) for image in images]
    name = _dimension_name(dim)
    first = variables[0]
    data = dask.array.stack([variable.data for variable in variables])
    stacked = xr.Variable((name, *first.dims), data, attrs=first.attrs, encoding=dict(first.encoding))
    cube = xr.Dataset({VARIABLE: stacked}, coords=image_coordinates(images[0]))
    return cube if name is dim else cube.assign_coords({name: dim})


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


__all__ = ["ALIGNMENT", "alignment_key", "check_aligned", "open_cube"]
