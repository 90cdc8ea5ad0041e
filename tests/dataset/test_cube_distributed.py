"""Reductions on dask.distributed worker processes over HTTP and S3 (servers started here).

One ``LocalCluster`` (2 worker processes, 1 thread each) serves the module:
starting one is the slow part on a small machine.  Each task is shipped to
another process, so this also shows the graph pickles and holds no handle.
"""

from __future__ import annotations

import numpy as np
import pytest
from s3_server import s3_server

import xarray_rumi
from xarray_rumi import open_cube
from xarray_rumi.format.blob import Header

distributed = pytest.importorskip("distributed")

CRS, TRANSFORM = 3857, (20.0, 0.0, -8000000.0, 0.0, -20.0, 5000000.0)
SHAPE, TILE = (3, 90, 110), 32  # 3 x 4 grid positions, 36 tile frames per image


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as running:
        yield running


def _scene(i):
    rng = np.random.default_rng(i)
    return (rng.normal(1000 * (i + 1), 50, SHAPE)).astype("float32")


def _write_scenes(root, count=3):
    blobs, values = [], []
    for i in range(count):
        values.append(_scene(i))
        blobs.append(xarray_rumi.write(f"{root}/scene{i}.rumi", values[-1], tile_size=TILE,
                                       crs=CRS, transform=TRANSFORM))
    return blobs, np.stack(values)


def _worker_pids(client):
    return set(client.run(lambda: __import__("os").getpid()).values())


def test_reductions_over_http_on_worker_processes(client, http_server):
    blobs, values = _write_scenes(http_server.root)
    urls = [f"{http_server.url}/scene{i}.rumi" for i in range(3)]
    cube = open_cube(urls, blobs, crs=CRS, transform=TRANSFORM)
    assert http_server.requests == []  # blobs + georeferencing given: opening read nothing
    mean = cube.band_data.mean(("y", "x")).compute()  # the client is the default scheduler
    np.testing.assert_allclose(mean.values, values.mean(axis=(2, 3)), rtol=1e-5)
    maximum = cube.band_data.max().compute()
    assert float(maximum) == values.max()
    # Every frame of every image was fetched by a worker each time, in the read engine's
    # requests (xarray_rumi.io.engine: the ranges one read asks for share requests).
    requests = http_server.get_requests()
    for i in range(3):
        header = Header.from_bytes(blobs[i])
        starts, stops = header.ranges(np.arange(header.frame_count))
        got = [r.range for r in requests if r.path == f"/scene{i}.rumi"]
        for a, b in zip(starts.tolist(), stops.tolist()):
            # twice, or more where a head's request read through it to another frame
            assert sum(start <= a and b <= stop for start, stop in got) >= 2, (i, a, b)
    # Each worker process checks each blob against its file's IFD head once, on its first read of it,
    # in a request from the file's first byte.
    heads = [r for r in requests if r.range[0] == 0]
    assert 3 <= len(heads) <= 2 * 3 and len({r.path for r in heads}) == 3
    assert len(_worker_pids(client)) == 2 and __import__("os").getpid() not in _worker_pids(client)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 with a bucket holding three scenes and their blobs."""
    import fsspec

    with s3_server("scenes") as options:
        root = tmp_path_factory.mktemp("s3")
        blobs, values = _write_scenes(root)
        fs = fsspec.filesystem("s3", **options)
        for i in range(3):
            fs.put(f"{root}/scene{i}.rumi", f"scenes/scene{i}.rumi")
            fs.put(f"{root}/scene{i}.rumi.header", f"scenes/scene{i}.rumi.header")
        yield options, blobs, values


def test_reductions_over_s3_on_worker_processes(client, s3):
    options, blobs, values = s3
    urls = [f"s3://scenes/scene{i}.rumi" for i in range(3)]
    for headers in (blobs, "sidecar", None):  # blob bytes, blob objects beside the files, the IFD
        cube = open_cube(urls, headers, storage_options=options)
        assert cube.rio.crs.to_epsg() == CRS
        total = cube.band_data.sum(("band", "y", "x"), dtype="float64").compute()
        np.testing.assert_allclose(total.values, values.sum(axis=(1, 2, 3), dtype="float64"), rtol=1e-9)
    window = cube.band_data.isel(time=1, band=2, y=slice(10, 50), x=slice(40, 100)).compute()
    np.testing.assert_array_equal(window.values, values[1, 2, 10:50, 40:100])


def test_chunks_through_the_stack_on_worker_processes(client, tmp_path):
    """A chunk spanning images is one task on a worker, decoded by that worker's one thread, exactly."""
    from xarray_rumi.runtime.heap import _glibc, keep_heap_top
    from xarray_rumi.runtime.threads import computing_threads

    blobs, values = _write_scenes(tmp_path, count=5)
    cube = open_cube([tmp_path / f"scene{i}.rumi" for i in range(5)], blobs, chunks={"time": -1, "y": 64, "x": 64})
    assert cube.band_data.data.npartitions == 3 * 2 * 2
    on_workers = cube.band_data.mean("time").compute()
    threaded = cube.band_data.mean("time").compute(scheduler="threads")
    np.testing.assert_array_equal(on_workers.values, threaded.values)
    np.testing.assert_allclose(on_workers.values, values.mean(axis=0), rtol=1e-6)
    # Inside a task, the cores this worker may use are its own threads: no decoding threads of its own.
    assert client.submit(computing_threads, pure=False).result() == 1
    # distributed trims the heap eagerly there; the codec's buffers are kept in it.
    assert client.submit(keep_heap_top, pure=False).result() is (_glibc() is not None)
