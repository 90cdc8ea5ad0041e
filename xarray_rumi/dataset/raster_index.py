"""``index="raster"``: ``x``/``y`` indexed by a ``rasterix.RasterIndex`` (the ``rasterix`` extra; docs/backend.md)."""

from __future__ import annotations

import numpy as np
import rasterix
import xarray as xr
import xproj  # noqa: F401  (the .proj accessor)
from affine import Affine
from pyproj import CRS

from ..datamodel.coords import GRID_MAPPING, corner_transform
from ..format.geo import Georeferencing


class InMemoryRasterIndex(rasterix.RasterIndex):
    """A ``rasterix.RasterIndex`` with in-memory coordinates: xarray chunks lazy ones, breaking ``.rio.transform()``."""

    def create_variables(self, variables=None) -> dict:
        held = self.__dict__.get("_held_coordinates")
        if held is None:
            held = {name: (v.dims, np.asarray(v.values), v.attrs) for name, v in super().create_variables().items()}
            self._held_coordinates = held
        created = {}
        for name, (dims, values, attrs) in held.items():
            # keeps the caller's attrs, as pandas indexes do, in dicts no two datasets share
            given = variables[name] if variables is not None and name in variables else None
            kind = xr.IndexVariable if len(dims) == 1 else xr.Variable
            created[name] = kind(dims, values, attrs=dict(attrs if given is None else given.attrs),
                                 encoding=None if given is None else dict(given.encoding))
        return created

    def isel(self, indexers):
        sliced = super().isel(indexers)
        if type(sliced) is rasterix.RasterIndex:
            sliced.__class__ = InMemoryRasterIndex
        return sliced


def raster_indexed(dataset: xr.Dataset, georeferencing: Georeferencing | None, what: str) -> xr.Dataset:
    """``dataset`` indexed by an :class:`InMemoryRasterIndex`, CRS set with xproj; ``ValueError`` naming ``what``."""
    if georeferencing is None or not georeferencing.is_defined:
        raise ValueError(f'index="raster" needs georeferencing, and there is none in {what}: give crs= and '
                         "transform=, or open with the default index")
    dataset = dataset.proj.assign_crs({GRID_MAPPING: CRS.from_epsg(georeferencing.epsg)})
    index = InMemoryRasterIndex.from_transform(Affine(*corner_transform(georeferencing)), width=dataset.sizes["x"],
                                               height=dataset.sizes["y"], crs=dataset.proj.crs)
    variables = index.create_variables()
    spatial = [name for name, c in dataset.coords.items() if c.dims and set(c.dims) <= {"y", "x"}]
    return dataset.drop_vars(spatial).assign_coords(xr.Coordinates(variables, indexes=dict.fromkeys(variables, index)))


__all__ = ["InMemoryRasterIndex", "raster_indexed"]
