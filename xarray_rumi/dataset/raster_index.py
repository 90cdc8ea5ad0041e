"""``index="raster"``: ``x`` and ``y`` indexed by a ``rasterix.RasterIndex``, the CRS assigned with xproj.

The index is built from the file's georeferencing (the GDAL-style corner
transform rioxarray reports, PixelIsPoint shifted back by half a pixel as
:func:`~xarray_rumi.datamodel.coords.corner_transform` does), never from
coordinate values, so slicing and alignment carry the exact affine.  Its
coordinates equal the default ones value for value: both add the half pixel
back with the same arithmetic.

This module imports rasterix and xproj, the ``rasterix`` extra; the engine
and :func:`~xarray_rumi.open_cube` import it only for ``index="raster"``.
"""

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
    """A ``rasterix.RasterIndex`` whose coordinate variables hold their values in memory.

    rasterix's own are lazy, and xarray chunks a lazy coordinate along with
    the data (``xr.open_dataset(..., chunks={})``, ``ds.chunk()``): ``x``
    then becomes a Dask array over the transform, whose ``x[0]`` has shape
    ``(1,)`` instead of ``()``, and ``.rio.transform()`` fails.  Held in
    memory (a 1-D coordinate as an ``IndexVariable``, which nothing chunks),
    they stay numpy through every copy xarray makes, and a slice's index is
    one of these too.  The values are computed once per index, by rasterix
    itself.

    >>> index = InMemoryRasterIndex.from_transform(Affine(10, 0, 0, 0, -10, 50), width=3, height=2)
    >>> variables = index.create_variables()
    >>> type(variables["x"]).__name__, variables["x"].values.tolist(), variables["y"].values.tolist()
    ('IndexVariable', [5.0, 15.0, 25.0], [45.0, 35.0])
    """

    def create_variables(self, variables=None) -> dict:
        held = self.__dict__.get("_held_coordinates")
        if held is None:  # the values come from the transform alone
            held = {name: (v.dims, np.asarray(v.values), v.attrs) for name, v in super().create_variables().items()}
            self._held_coordinates = held
        created = {}
        for name, (dims, values, attrs) in held.items():
            # A copy keeps what the caller set on the coordinate, as pandas indexes do; each variable gets
            # its own dicts, so that no two datasets share one.
            given = variables[name] if variables is not None and name in variables else None
            kind = xr.IndexVariable if len(dims) == 1 else xr.Variable
            created[name] = kind(dims, values, attrs=dict(attrs if given is None else given.attrs),
                                 encoding=None if given is None else dict(given.encoding))
        return created

    def isel(self, indexers):
        sliced = super().isel(indexers)
        if type(sliced) is rasterix.RasterIndex:  # a new index, which rasterix makes of its own class
            sliced.__class__ = InMemoryRasterIndex
        return sliced


def raster_indexed(dataset: xr.Dataset, georeferencing: Georeferencing | None, what: str) -> xr.Dataset:
    """``dataset`` (an image's or a Cube's) with its spatial coordinates indexed by an :class:`InMemoryRasterIndex`.

    The CRS is assigned first, with xproj (a ``CRSIndex`` on ``spatial_ref``,
    so that ``.proj.crs`` works), and the index carries the same CRS.  ``x``
    and ``y`` (``xc`` and ``yc`` on ``(y, x)`` for a rotated grid) replace the
    default ones; ``spatial_ref`` keeps every attribute, ``GeoTransform``
    included, so ``.rio`` reads the CRS and the transform as before.  Nothing
    of ``dataset`` is changed in place.  ``what`` names the image(s) in the
    ``ValueError`` raised when there is no georeferencing to build from: an
    index from the identity would make up coordinates a file does not have.

    >>> import numpy as np, tempfile, os, xarray as xr, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((1, 3, 4), "uint8"), crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6))
    >>> ds = raster_indexed(xr.open_dataset(path, engine="rumi", header=blob),
    ...                     xarray_rumi.open_image(path, header=blob).georeferencing, repr(path))
    >>> type(ds.xindexes["x"]).__name__, ds.proj.crs.to_epsg(), ds.x.values.tolist()
    ('InMemoryRasterIndex', 32633, [500005.0, 500015.0, 500025.0, 500035.0])
    """
    if georeferencing is None or not georeferencing.is_defined:
        raise ValueError(
            f'index="raster" needs georeferencing, and there is none in {what}: give crs= and transform=, '
            "or open with the default index"
        )
    dataset = dataset.proj.assign_crs({GRID_MAPPING: CRS.from_epsg(georeferencing.epsg)})
    index = InMemoryRasterIndex.from_transform(
        Affine(*corner_transform(georeferencing)), width=dataset.sizes["x"], height=dataset.sizes["y"],
        crs=dataset.proj.crs,
    )
    variables = index.create_variables()
    spatial = [name for name, c in dataset.coords.items() if c.dims and set(c.dims) <= {"y", "x"}]
    return dataset.drop_vars(spatial).assign_coords(xr.Coordinates(variables, indexes=dict.fromkeys(variables, index)))


__all__ = ["InMemoryRasterIndex", "raster_indexed"]
