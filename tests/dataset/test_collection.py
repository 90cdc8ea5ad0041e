"""A collection's Cubes are the ones ``open_cube`` makes: one rule decides which images stack."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi.dataset.catalog import build
from xarray_rumi.dataset.collection import open_collection

pytest.importorskip("pyarrow")

UTM = (10, 0, 500000, 0, -10, 5000000)


def _write(path, value, **georeferencing):
    xarray_rumi.write(path, np.full((2, 16, 16), value, "uint8"), tile_size=8, **georeferencing)
    return path


def test_images_without_a_crs_stack_whatever_their_raster_type(tmp_path):
    # Without a CRS the raster type places no pixel anywhere: open_cube stacks such images, so a collection does.
    paths = [_write(tmp_path / "area.rumi", 0), _write(tmp_path / "point.rumi", 1, raster_type="point")]
    assert xarray_rumi.open_cube(paths).band_data.shape == (2, 2, 16, 16)
    for given in (paths, build(paths, tmp_path / "c.parquet")):
        tree = open_collection(given)
        assert list(tree.children) == ["grid_0"]
        assert tree["grid_0"].dataset.band_data.max(("band", "y", "x")).values.tolist() == [0, 1]


def test_with_a_crs_the_raster_type_splits_them(tmp_path):
    # The same matrix read as PixelIsArea or PixelIsPoint puts pixels half a pixel apart: open_cube refuses them.
    paths = [_write(tmp_path / "area.rumi", 0, crs=32633, transform=UTM),
             _write(tmp_path / "point.rumi", 1, crs=32633, transform=UTM, raster_type="point")]
    with pytest.raises(ValueError, match="has transform"):
        xarray_rumi.open_cube(paths)
    tree = open_collection(paths)
    assert {name: node.dataset.sizes["time"] for name, node in tree.children.items()} == {"grid_0": 1, "grid_1": 1}


def test_each_node_names_its_own_files_and_is_lazy_without_dask_unless_chunked(tmp_path):
    # images of two grids, interleaved: each Cube's url coordinate lists its own members in order
    paths = [_write(tmp_path / f"{i}.rumi", i, crs=32633, transform=UTM) if i % 2 else
             _write(tmp_path / f"{i}.rumi", i) for i in range(5)]
    for given in (paths, build(paths, tmp_path / "c.parquet")):
        tree = open_collection(given)
        assert tree["grid_0"].dataset.url.values.tolist() == [str(p) for p in paths[0::2]]
        assert tree["grid_1"].dataset.url.values.tolist() == [str(p) for p in paths[1::2]]
        band_data = tree["grid_1"].dataset.band_data
        assert band_data.chunks is None and band_data[:, 0, 0, 0].values.tolist() == [1, 3]
        chunked = open_collection(given, chunks={})["grid_1"].dataset.band_data
        assert chunked.chunks == ((1, 1), (1, 1), (8, 8), (8, 8))  # one chunk per frame
        xr.testing.assert_identical(chunked.compute(), band_data.compute())


def test_from_items_the_stacking_coordinate_is_their_datetimes_as_open_cube_makes_it(tmp_path, write_images):
    pytest.importorskip("pystac")
    from xarray_rumi.dataset.catalog import read
    from xarray_rumi.stac import item

    (tmp_path / "other").mkdir()
    paths = write_images(range(2), (1, 32, 32)) + write_images([9], (1, 48, 48), directory=tmp_path / "other")
    items = [item(p, datetime=f"2024-05-0{i + 1}T10:00:00Z") for i, p in enumerate(paths)]
    tree = open_collection(items)
    assert tree["grid_0"].dataset.indexes["time"].equals(xarray_rumi.open_cube(items[:2]).indexes["time"])
    assert tree["grid_1"].dataset.indexes["time"].day.tolist() == [3]
    assert "datetime" not in tree["grid_0"].dataset.coords  # the index says it
    table = read(items)
    table.loc[1, "datetime"] = None  # a row without a datetime: no index, the datetimes kept as a coordinate
    cube = open_collection(table)["grid_0"].dataset
    assert "time" not in cube.indexes and cube.datetime.isnull().values.tolist() == [False, True]
