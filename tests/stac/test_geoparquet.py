"""Catalogs as stac-geoparquet: written from Items, read by stac-geoparquet and by rumi's catalog readers alike."""

from __future__ import annotations

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.cli import main
from xarray_rumi.stac import build_stac_catalog, item, read_stac_geoparquet, write_stac_geoparquet

pytest.importorskip("pystac")
pytest.importorskip("stac_geoparquet")
pq = pytest.importorskip("pyarrow.parquet")

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0)


def _files(root, shapes=((40, 40), (40, 40), (24, 32)), raster_type="area"):
    paths, arrays = [], []
    for i, (rows, cols) in enumerate(shapes):
        data = (np.arange(2 * rows * cols, dtype=np.uint16).reshape(2, rows, cols) + 100 * i)
        path = root / f"s{i}.rumi"
        xarray_rumi.write(path, data, tile_size=16, crs=32633, transform=TRANSFORM, raster_type=raster_type)
        paths.append(path)
        arrays.append(data)
    return paths, arrays


def test_the_table_is_stac_geoparquet(tmp_path):
    paths, _ = _files(tmp_path)
    out = tmp_path / "items.parquet"
    dicts = build_stac_catalog(paths, out, datetime="2024-01-01T00:00:00Z")
    schema = pq.read_schema(out)
    assert {b"geo", b"stac-geoparquet"} <= set(schema.metadata)
    assert {"id", "geometry", "bbox", "assets", "datetime", "proj:code", "proj:transform"} <= set(schema.names)
    back = read_stac_geoparquet(out)
    assert [d["id"] for d in back] == [d["id"] for d in dicts]
    assert [d["assets"]["data"]["rumi:header"] for d in back] == [d["assets"]["data"]["rumi:header"] for d in dicts]


def test_open_catalog_and_collection_from_stac_geoparquet_read_no_file(tmp_path, http_server):
    paths, arrays = _files(tmp_path, raster_type="point")
    items = [item(p, href=f"{http_server.url}/{p.name}", datetime=f"2024-01-0{i + 1}T00:00:00Z")
             for i, p in enumerate(paths)]
    out = tmp_path / "items.parquet"
    write_stac_geoparquet(items, out)
    http_server.requests.clear()
    datasets = xarray_rumi.open_catalog(out)
    tree = xarray_rumi.open_collection(out)
    cube = xarray_rumi.open_cube(read_stac_geoparquet(out)[:2])
    assert http_server.requests == []
    direct = xarray_rumi.open_cube(paths[:2])
    assert cube.x.values.tolist() == direct.x.values.tolist()  # point rasters: the file's own transform
    for ds, data in zip(datasets, arrays):
        np.testing.assert_array_equal(ds.band_data.values, data)
    assert {name: node.dataset.sizes["time"] for name, node in tree.children.items()} == {"grid_0": 2, "grid_1": 1}
    assert tree["grid_0"].dataset.time.dt.day.values.tolist() == [1, 2]
    np.testing.assert_array_equal(cube.band_data.values, np.stack(arrays[:2]))


def test_items_without_a_footprint_are_refused(tmp_path):
    path = tmp_path / "plain.rumi"
    xarray_rumi.write(path, np.zeros((1, 8, 8), "uint8"))
    with pytest.raises(ValueError, match="no CRS"):
        write_stac_geoparquet([item(path, datetime="2024-01-01")], tmp_path / "x.parquet")


def test_rumi_stac_writes_stac_geoparquet(capsys, tmp_path):
    paths, arrays = _files(tmp_path)
    out = tmp_path / "items.parquet"
    assert main(["stac", *map(str, paths), "-o", str(out), "--datetime", "2024-03-01"]) == 0
    assert "as stac-geoparquet" in capsys.readouterr().err
    datasets = xarray_rumi.open_catalog(out)
    np.testing.assert_array_equal(datasets[2].band_data.values, arrays[2])
