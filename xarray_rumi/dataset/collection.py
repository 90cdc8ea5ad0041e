"""CubeCollections: images grouped by grid (the rule ``open_cube`` checks), one Cube per grid, in an ``xr.DataTree``."""

from __future__ import annotations

import xarray as xr

from ..datamodel.alignment import aligned_groups
from ..datamodel.variable import VARIABLE
from ..stac.read import is_stac
from . import catalog as catalog_module
from .band_attrs import described_stack
from .cube import DEFAULT_DIM, asset_keys, cube_dataset, dated


def open_collection(paths_or_catalog, *, dim: str = DEFAULT_DIM, chunks=None, storage_options=None, assets=None,
                    mask_and_scale=False) -> xr.DataTree:
    """Paths, a catalog or STAC Items as a DataTree of one Cube per grid (``grid_<i>``, in order of first appearance).

    ``assets`` puts each key's grids under a node of its own; the rest is :func:`~xarray_rumi.open_cube`'s.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> for i, size in enumerate([16, 16, 24]):
    ...     _ = xarray_rumi.write(os.path.join(d, f"{i}.rumi"), np.full((1, size, size), i, "uint8"), tile_size=8)
    >>> tree = open_collection([os.path.join(d, f"{i}.rumi") for i in range(3)])
    >>> {name: dict(node.dataset.sizes) for name, node in tree.children.items()}
    {'grid_0': {'time': 2, 'band': 1, 'y': 16, 'x': 16}, 'grid_1': {'time': 1, 'band': 1, 'y': 24, 'x': 24}}
    """
    import pandas as pd

    if isinstance(paths_or_catalog, (list, tuple)) and not is_stac(paths_or_catalog):
        if not paths_or_catalog:
            raise ValueError("open_collection needs at least one path or STAC Item, got an empty list")
        paths_or_catalog = pd.DataFrame([catalog_module._row(str(p), storage_options) for p in paths_or_catalog])
    if assets is None:
        return xr.DataTree.from_dict(_grid_nodes(paths_or_catalog, None, dim, chunks, storage_options, mask_and_scale))
    return xr.DataTree.from_dict({f"{key}/{name}": cube for key in asset_keys(assets) for name, cube in
                                  _grid_nodes(paths_or_catalog, key, dim, chunks, storage_options,
                                              mask_and_scale).items()})


def _grid_nodes(catalog, asset, dim, chunks, storage_options, mask_and_scale) -> dict[str, xr.Dataset]:
    table, images, recorded = catalog_module.catalog_images(catalog, storage_options, asset)
    all_urls = table["url"].to_numpy()  # a pandas lookup a row costs seconds at 100,000 rows
    all_datetimes = table["datetime"].to_numpy() if "datetime" in table else None
    nodes = {}
    for number, members in enumerate(aligned_groups(images)):
        urls = all_urls[members].tolist()
        datetimes = None if all_datetimes is None else all_datetimes[members]
        stack = dim if datetimes is None else dated(dim, datetimes)
        cube = cube_dataset([images[i] for i in members], stack, chunks, urls)
        if recorded is not None:
            cube[VARIABLE] = described_stack(cube[VARIABLE].variable, [recorded[i] for i in members],
                                             mask_and_scale=mask_and_scale)
        cube = cube.assign_coords(url=(dim, urls))
        if datetimes is not None and stack is dim:  # some Items without a datetime: NaT where missing
            cube = cube.assign_coords(datetime=(dim, datetimes))
        nodes[f"grid_{number}"] = cube if asset is None else cube.rename({VARIABLE: asset})
    return nodes
