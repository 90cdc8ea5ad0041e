"""`rumi convert items.json OUT_DIR`: a STAC migration from the command line, its summary, and its rerun."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

rasterio = pytest.importorskip("rasterio")
pystac = pytest.importorskip("pystac", reason="pystac is not installed (the stac extra)")

import xarray as xr  # noqa: E402

from cli_runs import run  # noqa: E402
from migration_samples import ASSETS, asset_pixels, make_items  # noqa: E402


@pytest.fixture
def collection(tmp_path):
    os.makedirs(tmp_path / "cogs")
    items = make_items(str(tmp_path / "cogs"))
    items[1].add_asset("broken", pystac.Asset(str(tmp_path / "cogs" / "missing.tif"), media_type="image/tiff"))
    path = tmp_path / "items.json"
    path.write_text(json.dumps(pystac.ItemCollection(items).to_dict()))
    return path


def test_converts_every_asset_writes_the_items_and_names_the_failure(collection, tmp_path, capsys):
    status, out, err = run(capsys, "convert", collection, tmp_path / "rumi", "--tile-size", "32", "-j", "2")
    assert status == 1
    assert "Item 'scene-1' asset 'broken'" in err and "missing.tif" in err
    assert "7 files: 6 converted, 0 already there and valid, 1 failed" in out
    written = json.loads((tmp_path / "rumi" / "items.json").read_text())["features"]
    assert [item["id"] for item in written] == ["scene-0", "scene-1"]
    for index, item in enumerate(written):
        for key in ASSETS:
            with xr.open_dataset(item["assets"][key]["href"], engine="rumi") as ds:
                np.testing.assert_array_equal(ds.band_data.values, asset_pixels(index, key))
    assert "rumi:refused" in written[1]["assets"]["broken"]


def test_a_rerun_writes_nothing_and_says_so(collection, tmp_path, capsys):
    run(capsys, "convert", collection, tmp_path / "rumi", "-j", "1")
    stamps = {p: os.stat(p).st_mtime_ns for p in (tmp_path / "rumi").rglob("*")}
    status, out, _ = run(capsys, "convert", collection, tmp_path / "rumi", "-j", "1")
    assert status == 1 and "0 converted, 6 already there and valid, 1 failed" in out
    assert {p: os.stat(p).st_mtime_ns for p in (tmp_path / "rumi").rglob("*")} == stamps


def test_crs_options_are_refused_for_items(collection, tmp_path, capsys):
    status, _, err = run(capsys, "convert", collection, tmp_path / "rumi", "--crs", "EPSG:4326")
    assert status == 1 and "--crs and --drop-georeferencing apply to raster inputs" in err
    assert not os.path.exists(tmp_path / "rumi")


def test_stac_geoparquet_in_gives_stac_geoparquet_out(tmp_path, capsys):
    pytest.importorskip("stac_geoparquet", reason="stac-geoparquet is not installed (the stac extra)")
    from xarray_rumi.stac import read_stac_geoparquet, write_stac_geoparquet

    os.makedirs(tmp_path / "cogs")
    write_stac_geoparquet(make_items(str(tmp_path / "cogs"), count=1), tmp_path / "items.parquet")
    status, out, _ = run(capsys, "convert", tmp_path / "items.parquet", tmp_path / "rumi", "-j", "1")
    assert status == 0 and "3 files: 3 converted" in out
    [item] = read_stac_geoparquet(str(tmp_path / "rumi" / "items.parquet"))
    with xr.open_dataset(item["assets"]["SWIR"]["href"], engine="rumi") as ds:
        np.testing.assert_array_equal(ds.band_data.values, asset_pixels(0, "SWIR"))
    stamps = {p: os.stat(p).st_mtime_ns for p in (tmp_path / "rumi").rglob("*")}
    status, out, _ = run(capsys, "convert", tmp_path / "items.parquet", tmp_path / "rumi", "-j", "1")
    assert status == 0 and "0 converted, 3 already there and valid" in out
    assert {p: os.stat(p).st_mtime_ns for p in (tmp_path / "rumi").rglob("*")} == stamps  # items.parquet too


def test_scheduler_converts_on_that_dask_cluster(collection, tmp_path, capsys):
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        status, out, _ = run(capsys, "convert", collection, tmp_path / "rumi", "--scheduler", cluster.scheduler_address)
        prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert status == 1 and "6 converted" in out
    assert "convert_file" in prefixes  # the files' tasks ran on this cluster
