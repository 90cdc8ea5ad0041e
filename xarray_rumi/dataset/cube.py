"""Cubes: grid-aligned rumi Images stacked into ``(dim, band, y, x)``, checked from headers and georeferencing alone."""

from __future__ import annotations

import os

import pandas as pd
import xarray as xr

from ..datamodel.alignment import alignment_key
from ..datamodel.variable import VARIABLE, cube_layout
from ..reading.open import caller_georeferencing, open_images
from ..stac.read import is_stac, item_images
from .band_attrs import described_stack
from .engine import RumiCubeArray, index_kind, layout_coordinates, layout_variable, spatially_indexed

#: The stacking dimension of every opener that stacks images (open_cube, open_collection).
DEFAULT_DIM = "time"


def open_cube(paths_or_items, headers=None, dim=DEFAULT_DIM, *, storage_options=None, chunks=None, index=None,
              assets=None, mask_and_scale=False, **open_kwargs) -> xr.Dataset:
    """Grid-aligned rumi images (paths or STAC Items) as one ``(dim, band, y, x)`` dataset, reading no frame.

    ``headers``: ``None``, ``"sidecar"`` or one per path; ``dim`` as ``xr.concat`` takes it; ``assets`` (Items): a
    variable per key.  A misaligned image is a ``ValueError`` naming how (docs/backend.md, docs/stac.md).

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> paths = [os.path.join(tempfile.mkdtemp(), f"t{i}.rumi") for i in range(3)]
    >>> blobs = [xarray_rumi.write(p, np.full((2, 40, 30), i, "uint8"), tile_size=16) for i, p in enumerate(paths)]
    >>> cube = open_cube(paths, blobs)
    >>> cube.band_data.dims, cube.band_data[2, :, 5:8, 0].values.tolist()
    (('time', 'band', 'y', 'x'), [[2, 2, 2], [2, 2, 2]])
    """
    index = index_kind(index)
    # the caller's georeferencing built once for all images, not once an image
    supplied = caller_georeferencing(*(open_kwargs.pop(k, None) for k in _GEOREFERENCING_KWARGS))
    if supplied is not None:
        open_kwargs["georeferencing"] = supplied
    if is_stac(paths_or_items):
        if headers is not None:
            raise ValueError("STAC Items carry their blobs; pass headers= only with paths")
        return _items_cube(paths_or_items, dim, assets, storage_options=storage_options, chunks=chunks,
                           index=index, mask_and_scale=mask_and_scale, open_kwargs=open_kwargs)
    if assets is not None:
        raise ValueError("assets= chooses among the rumi assets of STAC Items; paths are one image each")
    if isinstance(paths_or_items, (str, bytes, os.PathLike)):
        # else each character would be taken for a path
        raise TypeError(f"open_cube takes a list of paths or URLs, got one: {paths_or_items!r}; pass "
                        f"[{paths_or_items!r}] for a Cube of one image, or open it with xr.open_dataset")
    paths = [os.fspath(p) for p in paths_or_items]
    images = open_images(paths, _headers_for(paths, headers), storage_options=storage_options, **open_kwargs)
    return cube_dataset(images, dim, chunks, paths, index=index)


def _items_cube(items, dim, assets, *, storage_options, chunks, index, mask_and_scale, open_kwargs) -> xr.Dataset:
    cubes = {}
    for key in [None] if assets is None else asset_keys(assets):
        recorded = item_images(items, key)
        claims = None if "georeferencing" in open_kwargs else [   # the Items' georeferencing, unless the caller's
            {"georeferencing": i.georeferencing, "claimed_by": i.record} for i in recorded]
        paths = [i.href for i in recorded]
        images = open_images(paths, [i.blob for i in recorded], claims, storage_options=storage_options, **open_kwargs)
        cube = cube_dataset(images, dated(dim, [i.datetime for i in recorded]), chunks, paths, index=index)
        cube[VARIABLE] = described_stack(cube[VARIABLE].variable, recorded, mask_and_scale=mask_and_scale)
        cubes[VARIABLE if key is None else key] = cube, images[0]
    return _as_variables(cubes)


def asset_keys(assets) -> list:
    """The keys ``assets=`` names (a key or several), each once; ``ValueError`` for none."""
    keys = [assets] if isinstance(assets, str) else list(dict.fromkeys(assets))
    if not keys:
        raise ValueError("assets= names no asset; give the key of at least one rumi asset of the Items")
    return keys


def dated(dim, datetimes):
    """``dim``, or a ``DatetimeIndex`` named ``dim`` when every image has a date."""
    if isinstance(dim, str) and not pd.isna(datetimes).any():
        return pd.DatetimeIndex(datetimes, name=dim)
    return dim


#: What assets must share to be variables of one Cube; tiles and sample types may differ.
_ONE_GRID = ("shape", "transform", "crs")


def _as_variables(cubes: dict[str, tuple[xr.Dataset, object]]) -> xr.Dataset:
    (first_name, (combined, first_image)), *others = cubes.items()
    if first_name != VARIABLE:
        combined = combined.rename({VARIABLE: first_name})
    grid = alignment_key(first_image)
    for name, (cube, image) in others:
        theirs = alignment_key(image)
        for prop in _ONE_GRID:
            if theirs[prop] != grid[prop]:
                raise ValueError(f"assets {first_name!r} and {name!r} are not on one grid: {prop} {grid[prop]} "
                                 f"and {theirs[prop]}; open them with separate calls, or together with "
                                 "open_collection or xarray_rumi.stac.load")
        combined[name] = cube[VARIABLE].variable
    return combined


def cube_dataset(images, dim=DEFAULT_DIM, chunks=None, names=None, *, index=None) -> xr.Dataset:
    """The Cube of opened, aligned images; ``names`` name them in errors."""
    layout = cube_layout(images, _dimension_name(dim), names)
    stacked = layout_variable(RumiCubeArray(images), layout, chunks, verify=images[0].verify)
    cube = xr.Dataset({VARIABLE: stacked}, coords=layout_coordinates(layout))
    cube = spatially_indexed(cube, index, layout.georeferencing, f"the Cube's {len(images)} images")
    return cube if layout.stack_dim is dim else cube.assign_coords({layout.stack_dim: dim})


_GEOREFERENCING_KWARGS = ("crs", "transform", "raster_type", "georeferencing")


def _dimension_name(dim):
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


__all__ = ["DEFAULT_DIM", "cube_dataset", "open_cube"]
