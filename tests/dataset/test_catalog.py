"""Catalogs and collections: open thousands of images from their rows, reading nothing."""

from __future__ import annotations

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.dataset.catalog import build, open_catalog, read
from xarray_rumi.dataset.collection import open_collection

pytest.importorskip("pyarrow")


def test_catalog_records_what_opening_needs(tmp_path, write_images):
    paths = write_images(range(3))
    table = build(paths, tmp_path / "c.parquet")
    back = read(tmp_path / "c.parquet")
    assert list(back.url) == [str(p) for p in paths]
    assert [bytes(h) for h in back.header] == [p.with_name(p.name + ".header").read_bytes() for p in paths]
    row = back.iloc[0]
    assert (row.bands, row.height, row.width, row.sample_type, row.epsg) == (2, 32, 32, "uint16", 32633)
    assert (row.minx, row.miny, row.maxx, row.maxy) == (500000, 4000000 - 320, 500000 + 320, 4000000)
    assert list(table.columns)[:2] == ["url", "header"]


def test_catalog_is_geoparquet_when_geopandas_is_there(tmp_path, write_images):
    geopandas = pytest.importorskip("geopandas")
    build(write_images(range(1)), tmp_path / "c.parquet")
    frame = geopandas.read_parquet(tmp_path / "c.parquet")
    assert frame.geometry.iloc[0].bounds == (500000, 4000000 - 320, 500000 + 320, 4000000)


def test_open_catalog_reads_no_file(tmp_path, write_images, http_server):
    paths = write_images(range(4))
    local = read(build(paths, tmp_path / "c.parquet"))
    local["url"] = [f"{http_server.url}/{p.name}" for p in paths]
    datasets = open_catalog(local, chunks={})
    assert http_server.get_requests() == []
    assert [ds.band_data.rio.crs.to_epsg() for ds in datasets] == [32633] * 4
    assert datasets[0].band_data.data.chunksize == (1, 16, 16)
    assert [int(ds.band_data[0, 0, 0]) for ds in datasets] == [0, 1, 2, 3]
    requests = http_server.get_requests()
    # One frame each, and each image's first read checks its blob against the file's IFD head,
    # which shares the frame's request (xarray_rumi.io.engine).
    assert len(requests) == 4 and all(r.range[0] == 0 for r in requests)


def test_collection_groups_images_by_grid(tmp_path, write_images):
    first = write_images(range(3))
    other = tmp_path / "other"
    other.mkdir()
    second = write_images(range(2), (2, 48, 48), directory=other, crs=4326)
    table = build([first[0], second[0], first[1], first[2], second[1]], tmp_path / "c.parquet")
    tree = open_collection(table, chunks={})
    assert sorted(tree.children) == ["grid_0", "grid_1"]
    cube = tree["grid_0"].dataset
    assert cube.band_data.dims == ("time", "band", "y", "x")
    assert cube.band_data.shape == (3, 2, 32, 32)
    assert cube.band_data.data.chunksize == (1, 1, 16, 16)
    assert cube.band_data.sel(band=1).mean(("y", "x")).values.tolist() == [0, 1, 2]
    assert list(cube.url.values) == [str(first[0]), str(first[1]), str(first[2])]
    assert tree["grid_1"].dataset.band_data.shape == (2, 2, 48, 48)
    assert tree["grid_1"].dataset.rio.crs.to_epsg() == 4326
    assert cube.band_data.encoding["sources"] == [str(p) for p in first]  # each image's own blob and address
    # Each grid is a Cube: chunks through the stack, one task each, as open_cube makes them.
    deep = open_collection(table, chunks={"time": -1, "x": 32})["grid_0"].dataset.band_data
    assert deep.chunks == ((3,), (1, 1), (16, 16), (32,))
    np.testing.assert_array_equal(deep.values, cube.band_data.values)


@pytest.mark.parametrize("chunks", [None, {}, "auto", {"band": 2, "y": 32, "x": 32}, {"y": None, "x": -1}], ids=repr)
def test_open_catalog_gives_what_open_dataset_gives(tmp_path, write_images, chunks, monkeypatch):
    import xarray as xr

    paths = write_images(range(2))
    table = build(paths, tmp_path / "c.parquet")
    opened_by_xarray = [xr.open_dataset(path, engine="rumi", chunks=chunks) for path in paths]
    monkeypatch.setattr(xr, "open_dataset", lambda *a, **k: pytest.fail("open_catalog went through xr.open_dataset"))
    for ds, slow in zip(open_catalog(table, chunks=chunks), opened_by_xarray):
        xr.testing.assert_identical(ds, slow)
        assert ds.band_data.chunks == slow.band_data.chunks
        assert ds.band_data.encoding == slow.band_data.encoding


def test_open_catalog_builds_each_dataset_when_first_asked_for_and_keeps_it(tmp_path, write_images, monkeypatch):
    import xarray_rumi.dataset.engine as engine

    table = build(write_images(range(4)), tmp_path / "c.parquet")
    built = []
    variable = engine.image_variable
    monkeypatch.setattr(engine, "image_variable", lambda image, **k: built.append(image) or variable(image, **k))
    datasets = open_catalog(table)
    assert len(datasets) == 4 and built == []  # opened, nothing built yet
    assert int(datasets[-1].band_data.max()) == 3 and datasets[3] is datasets[-1] and len(built) == 1
    assert [int(ds.band_data.max()) for ds in datasets[1:3]] == [1, 2]
    assert [int(ds.band_data.max()) for ds in datasets] == [0, 1, 2, 3] and len(built) == 4
    assert repr(datasets) == "<CatalogDatasets: 4 images, 4 built>"
    with pytest.raises(IndexError):
        datasets[4]


def test_open_catalog_refuses_a_damaged_blob_and_bad_chunks_at_open(tmp_path, write_images):
    table = build(write_images(range(3)), tmp_path / "c.parquet")
    with pytest.raises(ValueError, match="chunks"):
        open_catalog(table, chunks="nonsense")
    damaged = table.copy()
    damaged.loc[1, "header"] = bytes(damaged.header[1])[:-3]
    with pytest.raises(xarray_rumi.RumiFormatError, match="img1.rumi"):
        open_catalog(damaged)
