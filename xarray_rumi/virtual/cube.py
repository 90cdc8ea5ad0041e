"""A Cube through VirtualiZarr: ``rumi refs --cube``."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from urllib.parse import urlsplit

import numpy as np

from ..datamodel.coords import GRID_MAPPING
from ..datamodel.variable import VARIABLE, cube_layout, image_layout
from ..io.urls import as_url
from .kerchunk import compact_json
from .parser import RumiParser

IMAGE_DIMS = ("band", "y", "x")


def check_stack_dim(dim: str) -> None:
    """Refuse a stacking dimension that is not a new name."""
    if not isinstance(dim, str) or not dim or dim in IMAGE_DIMS:
        raise ValueError(f"the stacking dimension must be new, not one of {', '.join(IMAGE_DIMS)}: got {dim!r}")


def virtual_cube_references(images: Sequence, dim: str) -> dict:
    """Kerchunk references stacking opened, aligned images along ``dim``, built through VirtualiZarr."""
    import virtualizarr
    import xarray as xr

    check_stack_dim(dim)
    layout = cube_layout(list(images), dim)   # checks the alignment
    urls = [as_url(image.source.url) for image in images]
    registry = object_store_registry(urls)
    # 2-D coordinates (rotated grids) load only when named
    loadable = [name for name in image_layout(images[0]).coords if name != GRID_MAPPING]
    parts = [
        virtualizarr.open_virtual_dataset(
            url, registry=registry, loadable_variables=loadable,
            parser=RumiParser(header=image.header, georeferencing=image.georeferencing, verify=False),
        )
        for url, image in zip(urls, images)
    ]
    cube = xr.concat(parts, dim=dim, coords="minimal", compat="override")
    refs = readable_with_defaults(cube.vz.to_kerchunk(format="dict"))
    attrs = json.loads(refs["refs"][f"{VARIABLE}/.zattrs"])
    attrs["rumi_sources"] = list(layout.sources)
    refs["refs"][f"{VARIABLE}/.zattrs"] = compact_json(attrs)
    return refs


def readable_with_defaults(refs: dict) -> dict:
    """``refs`` with null fill values, no ``_FillValue`` attributes and chunkless scalars inlined, as
    :func:`~xarray_rumi.virtual.kerchunk.references` writes them."""
    out = dict(refs["refs"])
    for key in [k for k in out if k.endswith("/.zarray") or k == ".zarray"]:
        name = key[: -len(".zarray")]
        zarray = json.loads(out[key])
        if not zarray["shape"] and f"{name}0" not in out:
            value = np.array(zarray.get("fill_value") or 0, np.dtype(zarray["dtype"]))
            out[f"{name}0"] = "base64:" + base64.b64encode(value.tobytes()).decode()
            out.pop(name, None)   # VirtualiZarr's 0-d key, which zarr never asks for
        zarray["fill_value"] = None
        out[key] = compact_json(zarray)
        if f"{name}.zattrs" in out:
            attrs = json.loads(out[f"{name}.zattrs"])
            out[f"{name}.zattrs"] = compact_json({k: v for k, v in attrs.items() if k != "_FillValue"})
    return {**refs, "refs": out}


def object_store_registry(urls: Sequence[str]):
    """An obstore registry for ``urls``: one store per scheme and host, configured from the environment."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import from_url

    prefixes = dict.fromkeys(f"{p.scheme}://{p.netloc}" for p in map(urlsplit, urls))
    # plain HTTP only for a URL that asks for it
    return ObjectStoreRegistry({prefix: from_url(prefix, client_options={"allow_http": prefix.startswith("http:")})
                                for prefix in prefixes})


__all__ = ["check_stack_dim", "object_store_registry", "readable_with_defaults", "virtual_cube_references"]
