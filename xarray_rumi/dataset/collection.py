"""Collections in the rumi data model: images grouped by grid into Cubes.

Images that share a grid (shape, bands, tiles, frame unit, sample type, CRS
and transform: :mod:`~xarray_rumi.datamodel.alignment`, the rule
:func:`~xarray_rumi.open_cube` checks) stack into a Cube ``(n, band, y,
x)``; images on different grids cannot, so a CubeCollection is an
``xr.DataTree`` with one Cube per grid.  Everything opens from catalog rows:
no file is read.
"""

from __future__ import annotations

import xarray as xr

from ..datamodel.alignment import aligned_groups
from ..stac.read import is_stac
from . import catalog as catalog_module
from .cube import cube_dataset


def open_collection(paths_or_catalog, *, dim: str = "n", chunks=None, storage_options=None) -> xr.DataTree:
    """Open images as a CubeCollection: one DataTree node (a Cube) per grid.

    ``paths_or_catalog`` is a list of paths/URLs (their IFDs are read once),
    a catalog Parquet path, a catalog DataFrame, or STAC Items of rumi files
    (``pystac`` Items, an ItemCollection or their dicts; nothing is read).
    From Items, each node also has a ``datetime`` coordinate along ``dim``.
    ``chunks`` are :func:`~xarray_rumi.open_cube`'s: ``{}`` (the default,
    one Dask chunk per frame), ``"auto"``, sizes by dimension, or ``False``
    (no Dask).  Each
    node ``grid_<i>`` holds ``band_data`` on ``(dim, band, y, x)`` and a
    ``url`` coordinate along ``dim``; nodes are numbered in order of first
    appearance.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> for i, size in enumerate([16, 16, 24]):
    ...     _ = xarray_rumi.write(os.path.join(d, f"{i}.rumi"), np.full((1, size, size), i, "uint8"), tile_size=8)
    >>> tree = open_collection([os.path.join(d, f"{i}.rumi") for i in range(3)])
    >>> {name: dict(node.dataset.sizes) for name, node in tree.children.items()}
    {'grid_0': {'n': 2, 'band': 1, 'y': 16, 'x': 16}, 'grid_1': {'n': 1, 'band': 1, 'y': 24, 'x': 24}}
    """
    import pandas as pd

    if isinstance(paths_or_catalog, (list, tuple)) and not is_stac(paths_or_catalog):
        if not paths_or_catalog:
            raise ValueError("open_collection needs at least one path or STAC Item, got an empty list")
        paths_or_catalog = pd.DataFrame([catalog_module._row(str(p), storage_options) for p in paths_or_catalog])
    table, images = catalog_module.table_and_images(paths_or_catalog, storage_options)
    all_urls = table["url"].to_numpy()  # one array: a pandas lookup a row costs seconds at 100,000 rows
    nodes = {}
    for number, members in enumerate(aligned_groups(images)):
        urls = all_urls[members].tolist()
        cube = cube_dataset([images[i] for i in members], dim, chunks, urls)
        cube = cube.assign_coords(url=(dim, urls))
        if "datetime" in table:
            cube = cube.assign_coords(datetime=(dim, table.datetime.iloc[members].to_numpy()))
        nodes[f"grid_{number}"] = cube
    return xr.DataTree.from_dict(nodes)
