"""Dying workers: a worker process killed (SIGKILL) during a read or a write.

One ``LocalCluster`` of 2 worker processes serves the module, with
``distributed.scheduler.allowed-failures`` at 1: a task survives one worker
dying under it (Dask reschedules it), and a second death raises
``KilledWorker``.  The kill comes from inside a task, on its first attempt
only, gated by a marker file created with ``O_EXCL`` (exactly one process wins).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import cloudpickle
import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import xarray_rumi

distributed = pytest.importorskip("distributed")
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import this test module

VALUES = np.random.default_rng(5).integers(0, 60000, (2, 96, 80), dtype=np.uint16)
TILE = 32
META = np.empty((0, 0, 0), VALUES.dtype)


@pytest.fixture(scope="module")
def client():
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as running:
        running.register_plugin(_WorkersChanged())
        yield running


def _die_first_time(marker: str, spare: int) -> None:
    """SIGKILL this process, unless it is ``spare`` (the test's), if none has died for ``marker`` yet."""
    if os.getpid() == spare:  # dask may call a block function in the client, to infer its output
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _install_killer_in_decode(marker: str, spare: int) -> None:
    """On a worker: the next frame decode (of any task) kills the process, once."""
    import xarray_rumi.reading.image as backend

    decode = backend.decode_frame

    def dying_decode(*args, **kwargs):
        _die_first_time(marker, spare)
        return decode(*args, **kwargs)

    backend.decode_frame = dying_decode


def _pids(client) -> set[int]:
    return set(client.run(os.getpid).values())


class _WorkersChanged(distributed.diagnostics.plugin.SchedulerPlugin):
    """On the scheduler: wakes whoever waits for its workers when one joins, leaves or changes status."""

    name = "rumi-tests-workers-changed"

    async def start(self, scheduler) -> None:
        self.changed = asyncio.Event()

    def add_worker(self, scheduler, worker: str) -> None:
        self.changed.set()

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        self.changed.set()

    def log_event(self, topic, msg) -> None:
        if isinstance(msg, dict) and msg.get("action") == "worker-status-change":
            self.changed.set()


async def _until_running(count: int, timeout: float, dask_scheduler=None) -> None:
    """On the scheduler's event loop: return once ``count`` workers run, woken by :class:`_WorkersChanged`."""
    changed = dask_scheduler.plugins[_WorkersChanged.name].changed

    async def running():
        # nothing runs between the check and clear() on this one loop, so no change is missed
        while sum(worker.status.name == "running" for worker in dask_scheduler.workers.values()) < count:
            changed.clear()
            await changed.wait()

    try:
        await asyncio.wait_for(running(), timeout)
    except asyncio.TimeoutError:
        statuses = {address: worker.status.name for address, worker in dask_scheduler.workers.items()}
        raise TimeoutError(f"waited {timeout} s for {count} workers running; the scheduler has {statuses}") from None


def _wait_for_two_workers(client, timeout: float = 180) -> None:
    """Until the nannies have replaced every killed worker, asking the scheduler only.

    Not ``client.wait_for_workers``: with a cluster it overwrites the
    cluster's list of workers with snapshots of the scheduler's, racing the
    cluster's own status watcher, and closing the cluster then fails with a
    KeyError for a worker removed that the list no longer held (seen with
    distributed 2026.7.1).  Nor a loop that asks and sleeps: the scheduler
    itself waits, and wakes when its workers change.
    """
    # generous: under load a nanny takes seconds to start each replacement
    client.run_on_scheduler(_until_running, 2, timeout)


def test_a_worker_killed_during_a_read_is_retried_and_the_result_is_exact(client, tmp_path):
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, VALUES, tile_size=TILE)
    marker = str(tmp_path / "killed-during-read")
    before = _pids(client)
    client.run(_install_killer_in_decode, marker, os.getpid())
    ds = xr.open_dataset(path, engine="rumi", header=blob, chunks={})
    values = ds.band_data.compute().values
    assert os.path.exists(marker)  # a worker did die inside a frame decode
    np.testing.assert_array_equal(values, VALUES)
    _wait_for_two_workers(client)
    assert _pids(client) != before  # the nanny replaced the killed process


def _kill_once_then_pass(block, marker: str, spare: int):
    _die_first_time(marker, spare)
    return block


def _always_kill(block, spare: int, live: str):
    """SIGKILL the worker while ``live`` exists: tasks the failed write left running stop killing once it is gone."""
    if os.getpid() != spare and os.path.exists(live):
        os.kill(os.getpid(), signal.SIGKILL)
    return block


def test_a_worker_killed_during_a_write_still_writes_the_exact_file(client, tmp_path):
    marker = str(tmp_path / "killed-during-write")
    lazy = da.from_array(VALUES, chunks=(1, TILE, TILE)).map_blocks(_kill_once_then_pass, marker, os.getpid(), meta=META)
    target = tmp_path / "out" / "scene.rumi"
    target.parent.mkdir()
    blob = xarray_rumi.write(target, lazy, tile_size=TILE, compression="portable")
    assert os.path.exists(marker)
    reference = tmp_path / "reference.rumi"
    assert blob == xarray_rumi.write(reference, VALUES, tile_size=TILE, compression="portable")
    assert target.read_bytes() == reference.read_bytes()
    assert sorted(os.listdir(target.parent)) == ["scene.rumi", "scene.rumi.header"]  # no temporary
    _wait_for_two_workers(client)


def test_a_write_whose_workers_keep_dying_leaves_nothing_and_keeps_an_old_file(client, tmp_path):
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "scene.rumi"
    target.write_bytes(b"the previous version")
    live = tmp_path / "killing"
    live.touch()
    lazy = da.from_array(VALUES, chunks=(1, TILE, TILE)).map_blocks(_always_kill, os.getpid(), str(live), meta=META)
    try:
        with pytest.raises(distributed.scheduler.KilledWorker):
            xarray_rumi.write(target, lazy, tile_size=TILE, compression="portable")
    finally:
        live.unlink()  # the next test's workers must not die for this one
    assert os.listdir(target.parent) == ["scene.rumi"]  # no header, no temporary
    assert target.read_bytes() == b"the previous version"
    _wait_for_two_workers(client)


def test_on_worker_processes_an_unchecked_blob_costs_at_most_one_head_request_each(client, http_server):
    """The array is pickled to the workers; each checks the blob once, on its first frame."""
    from xarray_rumi import RumiFormatError

    _wait_for_two_workers(client)  # the processes counted below are the ones that read
    from xarray_rumi.format.blob import Header

    georef = dict(crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    blob = xarray_rumi.write(f"{http_server.root}/scene.rumi", VALUES, tile_size=TILE, **georef)
    url = f"{http_server.url}/scene.rumi"
    ds = xr.open_dataset(url, engine="rumi", header=blob, chunks={}, **georef)
    assert http_server.requests == []  # the open reads nothing
    for _ in range(2):
        np.testing.assert_array_equal(ds.band_data.compute().values, VALUES)
    ranges = [r.range for r in http_server.get_requests()]
    # the IFD head shares a request with the checking task's frame (xarray_rumi.io.engine)
    heads = [r for r in ranges if r[0] == 0]
    assert 1 <= len(heads) <= len(_pids(client))  # once per worker process, however many tasks it ran
    # and whole frames only, each at least once per compute: tasks of neighbouring frames may share
    # a read-ahead's requests (xarray_rumi.reading.readahead), and a process's read-ahead may fetch
    # frames whose tasks ran in the other process, so each process reads a frame once per compute
    header = Header.from_bytes(blob)
    frames = [(header.offset(k), header.offset(k) + header.byte_count(k)) for k in range(header.frame_count)]
    others = [r for r in ranges if r[0] != 0]
    held = [f for f in frames for r in others if r[0] <= f[0] and f[1] <= r[1]]
    assert sum(b - a for a, b in others) == sum(b - a for a, b in held)
    assert all(held.count(f) >= 2 - sum(r[0] == 0 and f[1] <= r[1] for r in heads) for f in frames)
    assert len(held) <= 2 * header.frame_count * len(_pids(client))
    lying = blob[:21] + bytes([3]) + blob[22:]  # float16, as wide as uint16
    with pytest.raises(RumiFormatError, match="blob.matches-file"):
        xr.open_dataset(url, engine="rumi", header=lying, chunks={}, **georef).band_data.compute()
