"""Writing at scale: a distributed cluster, memory bounded by frames, a killed writer."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import textwrap

import dask.array as da
import numpy as np
import pytest

import xarray_rumi


def _pattern(block, block_info=None):
    """A cheap, deterministic, compressible block: any process computes the same values."""
    (b0, _), (y0, _), (x0, _) = block_info[None]["array-location"]
    bands, rows, cols = block_info[None]["chunk-shape"]
    y, x = np.mgrid[y0:y0 + rows, x0:x0 + cols]
    return np.broadcast_to(((x * 7 + y * 3) % 4096).astype("uint16"), (bands, rows, cols)).copy()


def _lazy(shape, chunks):
    return da.zeros(shape, dtype="uint16", chunks=chunks).map_blocks(_pattern, dtype="uint16")


def test_a_process_cluster_writes_the_same_bytes_as_memory(tmp_path, client):
    lazy = _lazy((2, 700, 900), (1, 256, 300))  # several times larger than one 128 px frame
    in_memory = xarray_rumi.write(tmp_path / "memory.rumi", lazy.compute(scheduler="threads"), tile_size=128)
    blob = xarray_rumi.write(tmp_path / "cluster.rumi", lazy, tile_size=128)
    assert "encode_one" in client.run_on_scheduler(_task_prefixes)  # the frames were compressed on the workers
    assert blob == in_memory
    assert (tmp_path / "cluster.rumi").read_bytes() == (tmp_path / "memory.rumi").read_bytes()


def _task_prefixes(dask_scheduler=None):
    return list(dask_scheduler.task_prefixes)


PEAK_MEMORY_SCRIPT = textwrap.dedent("""
    import resource, sys
    import dask, dask.array as da, numpy as np
    import xarray_rumi
    sys.path.insert(0, {tests!r})
    from test_write_scale import _lazy
    dask.config.set(scheduler="threads", num_workers=2)
    lazy = _lazy((1, 16384, 12288), (1, 512, 512))   # 384 MiB of uint16
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    xarray_rumi.write({target!r}, lazy, tile_size=512, compression="portable")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(lazy.nbytes, before * 1024, after * 1024)
""")


def test_peak_memory_is_bounded_by_frames_not_the_image(tmp_path):
    script = PEAK_MEMORY_SCRIPT.format(tests=os.path.dirname(__file__), target=str(tmp_path / "big.rumi"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    raster_bytes, before, after = map(int, out.stdout.split())
    growth = after - before
    allowed = 128 * 2**20  # a window of 512 KiB frames plus Dask's own bookkeeping, not the image
    assert raster_bytes >= 3 * allowed
    assert growth < allowed, f"peak RSS grew by {growth / 2**20:.0f} MiB writing {raster_bytes / 2**20:.0f} MiB"
    xarray_rumi.validate(tmp_path / "big.rumi")


KILLED_SCRIPT = textwrap.dedent("""
    import threading, dask.array as da, xarray_rumi
    held, never = threading.Lock(), threading.Event()

    def first_half_only(block, block_id=None):
        # 32 x 32 frames of 256 px, written in row order under a recipe given as is (nothing sampled before
        # the write): a block of the second half is asked for only once the staging file is open and the
        # first frames of the image are in it
        if block_id[1] >= 16:
            if held.acquire(blocking=False):
                print("held", flush=True)
            never.wait()   # the rest of the image never comes: the write cannot finish
        return block

    lazy = da.ones((1, 8192, 8192), dtype="uint8", chunks=(1, 256, 256)).map_blocks(first_half_only, dtype="uint8")
    xarray_rumi.write({target!r}, lazy, tile_size=256, compression="id>zstd")
""")


def _open_files(pid: int) -> list[str]:
    fds = f"/proc/{pid}/fd"
    return [os.readlink(os.path.join(fds, fd)) for fd in os.listdir(fds)] if os.path.isdir(fds) else []


def test_a_killed_writer_leaves_nothing_at_the_target(tmp_path):
    target = tmp_path / "killed.rumi"
    process = subprocess.Popen([sys.executable, "-c", KILLED_SCRIPT.format(target=str(target))],
                               stdout=subprocess.PIPE, text=True)
    try:
        with selectors.DefaultSelector() as selector:   # no FD_SETSIZE limit, unlike select.select
            selector.register(process.stdout, selectors.EVENT_READ)
            ready = selector.select(120)
        assert ready and process.stdout.readline().strip() == "held", "the writer never reached the image's second half"
        if sys.platform == "linux":   # the staged file is open in the target's directory: killed mid-write
            assert any(name.startswith(str(tmp_path)) for name in _open_files(process.pid))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert os.listdir(tmp_path) == []  # no file, no header, no temporary
