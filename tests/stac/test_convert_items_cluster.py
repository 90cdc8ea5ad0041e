"""convert_items on local processes and on a Dask cluster: one task per file, and a killed worker changes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

rasterio = pytest.importorskip("rasterio", reason="rasterio is not installed (the geo extra)")
pystac = pytest.importorskip("pystac", reason="pystac is not installed (the stac extra)")

import xarray as xr  # noqa: E402

from migration_samples import write_cog  # noqa: E402
from xarray_rumi.stac import convert_items  # noqa: E402
from xarray_rumi.stac.convert_files import kept_output  # noqa: E402

#: Files large enough that a conversion is under way when the run is killed.
FILES, SIDE = 6, 1024


def make_collection(root) -> str:
    """An ItemCollection file of one Item with :data:`FILES` GeoTIFF assets; its path."""
    item = pystac.Item("big", None, None, pystac.utils.str_to_datetime("2024-01-01T00:00:00Z"), {})
    for index in range(FILES):
        path = os.path.join(root, f"band{index}.tif")  # named for its asset key
        data = np.random.default_rng(index).integers(0, 4000, (1, SIDE, SIDE)).astype("uint16")
        write_cog(path, data, 10, 500000, 5000000)
        item.add_asset(f"band{index}", pystac.Asset(path, media_type="image/tiff"))
    collection = os.path.join(root, "items.json")
    with open(collection, "w") as f:
        json.dump(pystac.ItemCollection([item]).to_dict(), f)
    return collection


def assert_converted_exactly(items, sources) -> None:
    """Every asset of the converted Item is a rumi file holding its source's pixels (``sources/<key>.tif``)."""
    for key, asset in items[0].assets.items():
        assert asset.media_type == "application/vnd.rumi+tiff", key
        with xr.open_dataset(asset.href, engine="rumi") as ds, rasterio.open(sources / f"{key}.tif") as src:
            np.testing.assert_array_equal(ds.band_data.values, src.read())


def leftovers(root) -> list[str]:
    """Files under ``root`` that are not a whole output: staging files, or a rumi file its blob does not vouch for."""
    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".header") and os.path.exists(path.removesuffix(".header")):
                continue
            image = kept_output(path) if name.endswith(".rumi") else None
            if image is None or image.grid.image_length != SIDE or image.grid.image_width != SIDE:
                found.append(path)
    return found


@pytest.fixture
def collection(tmp_path):
    os.makedirs(tmp_path / "cogs")
    return make_collection(str(tmp_path / "cogs"))


def test_a_run_killed_mid_file_leaves_whole_outputs_only_and_the_rerun_finishes(collection, tmp_path):
    destination = tmp_path / "rumi"
    script = ("import sys, xarray_rumi.stac as s; "
              "s.convert_items(sys.argv[1], sys.argv[2], processes=1)")
    run = subprocess.Popen([sys.executable, "-c", script, collection, str(destination)], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(destination.glob("big/*.rumi.header")) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the run and its worker process, whatever they were writing
        run.wait()
    done = list(destination.glob("big/*.rumi"))
    assert 1 <= len(done) < FILES, "the run was not killed mid-way: nothing here tests a restart"
    assert leftovers(destination) == []
    progress = []
    converted = convert_items(collection, destination, processes=1, progress=progress.append)
    assert sorted(r.status for r in progress).count("kept") >= len(done)
    assert_converted_exactly(converted, tmp_path / "cogs")


def test_on_a_cluster_a_killed_worker_changes_nothing_in_the_result(collection, tmp_path):
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        import threading

        destination = tmp_path / "rumi"
        result = {}
        runner = threading.Thread(target=lambda: result.update(items=convert_items(collection, destination)))
        runner.start()
        deadline = time.monotonic() + 120
        while not list(destination.glob("big/*.rumi.header")) and time.monotonic() < deadline:
            time.sleep(0.02)
        victim = next(iter(client.run(os.getpid).values()))
        os.kill(victim, signal.SIGKILL)  # the cluster gives the file it was converting to the other worker
        runner.join(300)
        assert_converted_exactly(result["items"], tmp_path / "cogs")
        assert leftovers(destination) == []
        progress = []
        convert_items(collection, destination, scheduler=client, progress=progress.append)
        assert {r.status for r in progress} == {"kept"}
