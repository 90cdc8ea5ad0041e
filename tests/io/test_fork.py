"""A file opened over HTTP or S3 in one process reads in a child forked from it.

PyTorch's DataLoader forks its workers by default on Linux, and a forked
worker inherits the dataset as it was: its byte sources included, with the
file systems they had looked up.  fsspec's HTTP and S3 file systems belong to
the process that made them ("This class is not fork-safe" in a child), so
each test reads in the parent first (which looks the file system up) and then
the same object, not a pickled copy, in a child started with the "fork"
context, and compares the child's pixels with the parent's.  The servers run
in the parent, on 127.0.0.1.
"""

from __future__ import annotations

import gc
import multiprocessing
import traceback
import weakref

import numpy as np
import pytest
import xarray as xr
from s3_server import s3_server
from servers import RangeServer

import xarray_rumi
from xarray_rumi.io.source import ByteSource

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="this platform cannot fork")

#: Several frames of 64 px tiles, cut at the right and bottom edges.
DATA = (np.arange(2 * 150 * 170, dtype=np.uint16).reshape(2, 150, 170) * 7) % 1009
#: Seconds a child may take before the test gives up on it.
CHILD_TIMEOUT = 60


@pytest.fixture(scope="module")
def blob(tmp_path_factory):
    root = tmp_path_factory.mktemp("forked")
    return root, xarray_rumi.write(root / "scene.rumi", DATA, tile_size=64)


@pytest.fixture(scope="module", params=["http", "s3"])
def remote(request, blob):
    """``(url, storage_options, header blob)`` of the scene on a loopback HTTP or S3 server."""
    root, header = blob
    if request.param == "http":
        with RangeServer(str(root)) as server:
            yield f"{server.url}/scene.rumi", {}, header
    else:
        s3fs = pytest.importorskip("s3fs")
        with s3_server("forked") as options:
            s3fs.S3FileSystem(**options).put(str(root / "scene.rumi"), "forked/scene.rumi")
            yield "s3://forked/scene.rumi", options, header


def in_forked_child(read):
    """What ``read()`` returns in a child forked from this process; the child's error fails the test."""
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe(duplex=False)

    def child():
        try:
            theirs.send(("value", read()))
        except BaseException:  # noqa: BLE001 - the parent reports it
            theirs.send(("error", traceback.format_exc()))

    process = context.Process(target=child)
    process.start()
    try:
        assert ours.poll(CHILD_TIMEOUT), "the forked child gave no answer"
        kind, value = ours.recv()
    finally:
        process.join(CHILD_TIMEOUT)
    assert kind == "value", f"the forked child failed:\n{value}"
    return value


def test_a_byte_source_read_in_the_parent_reads_in_a_forked_child(remote):
    url, options, _ = remote
    source = ByteSource.of(url, options)
    parent = source.read(0, 300), source.read_many([8, 400], [40, 900]), source.size()
    assert in_forked_child(lambda: (source.read(0, 300), source.read_many([8, 400], [40, 900]), source.size())) \
        == parent


def test_the_parents_file_system_outlives_a_forked_childs_own(remote):
    # Collected in the child, the parent's file system would close its session on the
    # parent's event loop, which no thread runs there, and wait a second for it.
    url, options, _ = remote
    source = ByteSource.of(url, options)
    source.read(0, 10)
    parents = weakref.ref(source._read_fs_path[0])

    def read_then_collect():
        source.read(0, 10)  # looks up the child's own file system
        gc.collect()
        return source._read_fs_path[0] is not parents(), parents() is not None

    assert in_forked_child(read_then_collect) == (True, True)


def test_an_image_read_in_the_parent_reads_in_a_forked_child(remote):
    url, options, header = remote
    image = xarray_rumi.open_image(url, header, storage_options=options)
    np.testing.assert_array_equal(image.read(), DATA)
    window = {"rows": slice(30, 140), "cols": slice(50, 170)}
    np.testing.assert_array_equal(in_forked_child(lambda: image.read(**window)), DATA[:, 30:140, 50:170])


def test_a_dataset_read_in_the_parent_reads_in_a_forked_child(remote):
    url, options, header = remote
    band_data = xr.open_dataset(url, engine="rumi", header=header, storage_options=options).band_data
    parent = band_data[:, 10:120, 60:150].values
    np.testing.assert_array_equal(parent, DATA[:, 10:120, 60:150])
    np.testing.assert_array_equal(in_forked_child(lambda: band_data[:, 10:120, 60:150].values), parent)


def test_a_dask_backed_dataset_computed_in_the_parent_computes_in_a_forked_child(remote):
    url, options, header = remote
    band_data = xr.open_dataset(url, engine="rumi", header=header, storage_options=options, chunks={}).band_data
    parent = band_data.compute(scheduler="synchronous").values
    np.testing.assert_array_equal(parent, DATA)
    np.testing.assert_array_equal(in_forked_child(lambda: band_data.compute(scheduler="synchronous").values),
                                  parent)
