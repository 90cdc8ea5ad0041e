"""Writing on a distributed cluster: each source block computed once, a bounded number of windows in flight."""

from __future__ import annotations

import collections
import pickle
import time

import dask
import dask.array as da
import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.writing import encoded

distributed = pytest.importorskip("distributed")


def _recorded(block, block_info=None, log=None):
    """A block of a gradient; each computation appends its block's location to ``log``, from any process."""
    location = tuple(block_info[None]["chunk-location"])
    with open(log, "a") as f:
        f.write(f"{location}\n")
    (_, _), (y0, y1), (x0, x1) = block_info[None]["array-location"]
    y, x = np.mgrid[y0:y1, x0:x1]
    return np.broadcast_to(((x + 3 * y) % 1000).astype("uint16"), block.shape).copy()


def _computations(log) -> collections.Counter:
    with open(log) as f:
        return collections.Counter(f.read().splitlines())


def _scheduler_tasks(dask_scheduler=None) -> int:
    return len(dask_scheduler.tasks)


def _forgotten(client, timeout: float = 10) -> bool:
    """Whether the scheduler holds no task within ``timeout`` s (the client releases its futures asynchronously)."""
    deadline = time.monotonic() + timeout
    while client.run_on_scheduler(_scheduler_tasks):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("chunks", [(1, 100, 200), (1, 50, 40)], ids=["blocks-over-frames", "frames-over-blocks"])
@pytest.mark.parametrize("compression", ["auto", "id>zstd"])
def test_each_source_block_is_computed_once(tmp_path, client, compression, chunks):
    log = tmp_path / "calls.log"
    log.touch()
    # 64 px frames: a block of 100 rows spans two frame rows, and windows of 4 frames end inside blocks
    lazy = da.zeros((1, 800, 200), "uint16", chunks=chunks).map_blocks(_recorded, log=str(log), dtype="uint16")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encoded, "LOCAL_WINDOW_BYTES", 1)  # windows of 2 x 2 threads = 4 frames
        blob = xarray_rumi.write(tmp_path / "cluster.rumi", lazy, tile_size=64, compression=compression)
    calls = _computations(log)
    blocks = [str(location) for location in np.ndindex(lazy.numblocks)]
    assert sorted(calls) == sorted(blocks) and set(calls.values()) == {1}, calls
    with dask.config.set(scheduler="threads"):
        assert xarray_rumi.write(tmp_path / "threaded.rumi", lazy, tile_size=64, compression=compression) == blob
    assert (tmp_path / "cluster.rumi").read_bytes() == (tmp_path / "threaded.rumi").read_bytes()
    assert _forgotten(client)  # nothing held on the cluster after the write


def test_data_this_process_holds_is_compressed_here_not_sent_to_the_cluster(tmp_path, client):
    data = (np.arange(3 * 600 * 520) % 4099).astype("uint16").reshape(3, 600, 520)
    lazy = da.from_array(data, chunks=(3, 300, 520))  # nothing to compute: every block is data in the graph
    sent = []
    real_get = distributed.Client.get

    def noting_get(self, graph, keys, **kwargs):
        sent.append(keys)
        return real_get(self, graph, keys, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(distributed.Client, "get", noting_get)
        blob = xarray_rumi.write(tmp_path / "cluster.rumi", lazy, tile_size=128)
        assert sent == []  # the data alone: nothing submitted
        computed = xarray_rumi.write(tmp_path / "computed.rumi", lazy + np.uint16(0), tile_size=128)
        assert sent  # a computation: on the cluster
    assert blob == computed == xarray_rumi.write(tmp_path / "memory.rumi", data, tile_size=128)
    assert (tmp_path / "cluster.rumi").read_bytes() == (tmp_path / "memory.rumi").read_bytes()
    assert (tmp_path / "computed.rumi").read_bytes() == (tmp_path / "memory.rumi").read_bytes()


def test_no_more_than_two_windows_of_frames_are_on_the_cluster(tmp_path, client):
    log = tmp_path / "calls.log"
    lazy = da.zeros((1, 512, 512), "uint16", chunks=(1, 64, 512)).map_blocks(_recorded, log=str(log),
                                                                           dtype="uint16")
    seen = []

    def note(_):
        seen.append(client.run_on_scheduler(_encode_tasks))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encoded, "LOCAL_WINDOW_BYTES", 1)  # windows of 4 frames, 16 windows
        xarray_rumi.write(tmp_path / "bounded.rumi", lazy, tile_size=64, compression="id>zstd", progress=note)
    assert len(seen) == 64 and 0 < max(seen) <= 2 * 4, seen


def _encode_tasks(dask_scheduler=None) -> int:
    return sum(1 for key in dask_scheduler.tasks if isinstance(key, tuple) and key[0].startswith("encode_one"))


def test_a_failing_block_leaves_nothing_on_the_cluster_nor_at_the_target(tmp_path, client):
    lazy = da.zeros((1, 300, 64), "uint16", chunks=(1, 100, 64)).map_blocks(lambda b: b[:, 1:], dtype="uint16")
    with pytest.raises(ValueError, match="a Dask block must hold exactly what its chunks declare"):
        xarray_rumi.write(tmp_path / "short.rumi", lazy, tile_size=64, compression="id>zstd")
    assert list(tmp_path.iterdir()) == []
    assert _forgotten(client)


def test_a_persisted_array_is_written_from_the_blocks_already_on_the_workers(tmp_path, client):
    log = tmp_path / "calls.log"
    lazy = da.zeros((1, 300, 200), "uint16", chunks=(1, 100, 200)).map_blocks(_recorded, log=str(log),
                                                                             dtype="uint16")
    persisted = lazy.persist()
    distributed.wait(persisted)
    before = sum(_computations(log).values())
    blob = xarray_rumi.write(tmp_path / "persisted.rumi", persisted, tile_size=64)
    assert sum(_computations(log).values()) == before == 3  # nothing computed again
    assert blob == xarray_rumi.write(tmp_path / "memory.rumi", lazy.compute(), tile_size=64)
    assert (tmp_path / "persisted.rumi").read_bytes() == (tmp_path / "memory.rumi").read_bytes()
