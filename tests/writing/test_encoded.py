"""Encoded frames on the process's shared threads: in order, the same bytes, never stalled by a busy pool."""

from __future__ import annotations

import logging
import threading

import dask
import dask.array as da
import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.runtime.threads import _shared_pool, computing_threads
from xarray_rumi.writing import encoded


def _smooth(shape, dtype="uint16"):
    bands, rows, cols = shape
    y, x = np.mgrid[0:rows, 0:cols]
    return np.stack([(1000 + 40 * b + 300 * np.sin(x / 17.0) * np.cos(y / 13.0)) for b in range(bands)]).astype(dtype)


def _finishes(work, timeout=60):
    """``work()``'s result, failing (not hanging) if it deadlocks."""
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(work()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert outcome, f"did not finish within {timeout} s: a deadlock"
    return outcome[0]


@pytest.fixture
def busy_pool():
    """Every thread of the shared pool blocked until the test ends."""
    release = threading.Event()
    started = threading.Barrier(computing_threads() + 1)

    def occupy():
        started.wait()
        release.wait()

    blockers = [_shared_pool().submit(occupy) for _ in range(computing_threads())]
    started.wait(timeout=30)
    yield
    release.set()
    for blocker in blockers:
        blocker.result(timeout=30)


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_a_write_finishes_while_every_pool_thread_is_busy(tmp_path, busy_pool, lazy):
    data = _smooth((2, 100, 90))
    source = da.from_array(data, chunks=(1, 40, 40)) if lazy else data
    with dask.config.set(scheduler="sync"):
        _finishes(lambda: xarray_rumi.write(tmp_path / "busy.rumi", source, tile_size=32))
    xarray_rumi.write(tmp_path / "free.rumi", data, tile_size=32, write_header=False)
    assert (tmp_path / "busy.rumi").read_bytes() == (tmp_path / "free.rumi").read_bytes()


def test_a_write_from_a_task_on_the_shared_pool_finishes(tmp_path):
    # The writer then waits for its own pool's tasks: it must run what no other thread has started.
    data = _smooth((2, 100, 90))
    futures = [_shared_pool().submit(xarray_rumi.write, tmp_path / f"{k}.rumi", data, tile_size=32)
               for k in range(2 * computing_threads())]
    blobs = _finishes(lambda: {future.result() for future in futures})
    assert len(blobs) == 1
    assert len({(tmp_path / f"{k}.rumi").read_bytes() for k in range(2 * computing_threads())}) == 1


def test_frames_come_in_frame_order_from_either_source():
    from xarray_rumi.format.dtypes import sample_type_from_name
    from xarray_rumi.format.grid import FrameGrid
    from xarray_rumi.frames.recipes import Recipes

    grid = FrameGrid(96, 64, 16, 16, 2)
    data = np.arange(2 * 64 * 96, dtype="uint16").reshape(2, 64, 96)
    sample, recipes = sample_type_from_name("uint16"), (Recipes("id>zstd"),) * 2
    expected = [Recipes("id>zstd").encode(data[grid.frame_window(k)]) for k in range(grid.frame_count)]
    assert list(encoded.threaded_encoded_frames(data, grid, sample, recipes, workers=2)) == expected
    source = encoded.DaskFrames(da.from_array(data, chunks=(1, 40, 50)), grid)
    assert list(encoded.dask_encoded_frames(source, grid, sample, recipes, workers=2)) == expected


def test_a_dask_window_computes_only_its_own_blocks():
    from xarray_rumi.format.grid import FrameGrid

    computed = []

    def noted(block, block_info=None):
        computed.append(tuple(block_info[None]["chunk-location"]))
        return block

    grid = FrameGrid(64, 64, 16, 16, 1)
    lazy = da.zeros((1, 64, 64), "uint8", chunks=(1, 16, 16)).map_blocks(noted, dtype="uint8")
    with dask.config.set(scheduler="sync"):
        encoded.DaskFrames(lazy, grid).compute([5, 6])
    assert sorted(computed) == [(0, 1, 1), (0, 1, 2)]


def test_a_write_is_logged_at_debug(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="xarray_rumi.writing"):
        xarray_rumi.write(tmp_path / "logged.rumi", _smooth((1, 40, 40)), tile_size=16)
    written = [r.getMessage() for r in caplog.records if r.name == "xarray_rumi.writing.write"]
    assert any("logged.rumi: 9 frames" in line for line in written), written
    assert any("logged.rumi.header" in line for line in written), written
