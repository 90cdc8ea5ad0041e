"""Encoded frames in frame order, from a numpy array or a Dask array.

The writer consumes an iterator of compressed frames and writes them one
after another; this module produces it, keeping only a few frames (numpy) or
a few windows of frames (Dask) in memory.  Encoding releases the GIL, so
frames are compressed on a small thread pool; on a distributed cluster each
frame is compressed by a Dask task where its block lives.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..frames.choose import Recipes
from ..format.dtypes import SampleType
from ..format.grid import FrameGrid
from ..io.threads import default_threads

#: Without a cluster, Dask computes about this many bytes of frames at a time, and at most two
#: such windows are in memory.
LOCAL_WINDOW_BYTES = 16 * 2**20


def _encode_one(block, sample: SampleType, recipes: Recipes) -> bytes:
    return recipes.encode(sample.encode(np.asarray(block)))


def threaded_encoded_frames(array, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...],
                             workers: int | None = None):
    """Encoded frames in frame order from a thread pool (the encoder releases the GIL)."""
    workers = workers or default_threads()
    with ThreadPoolExecutor(workers) as pool:
        pending = deque()
        for k in range(grid.frame_count):
            bands, rows, cols = grid.frame_window(k)
            slot = recipes[k % grid.frames_per_position]
            pending.append(pool.submit(_encode_one, array[bands, rows, cols], sample, slot))
            if len(pending) >= 2 * workers:  # bounded: a few frames in memory, not the image
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class DaskFrames:
    """A Dask array rechunked to the frame grid (one block a frame), computed a window of frames at a time.

    Each ``dask.compute`` call spends milliseconds in Dask's expression layer
    whatever its size, so the graph is materialised once, and each window goes
    straight to the active scheduler, culled to what it needs.  Dask's array
    optimisation, which ``compute`` would apply, is a performance pass only;
    on the graphs measured (``from_array``, ``map_blocks`` chains, rechunks)
    it changed no task and cost ~40 us a frame, so the graph is used as it is.
    """

    def __init__(self, array, grid: FrameGrid):
        from dask.base import get_scheduler

        bands_per_frame = grid.bands_per_frame
        chunks = (
            (bands_per_frame,) * (grid.samples_per_pixel // bands_per_frame),
            _sizes(grid.image_length, grid.tile_length),
            _sizes(grid.image_width, grid.tile_width),
        )
        self.array = array.rechunk(chunks)
        self._grid = grid
        self._graph = dict(self.array.__dask_graph__())
        self._scheduler = get_scheduler(collections=[self.array])

    def key(self, k: int) -> tuple:
        row, col, band = self._grid.frame_location(k)
        return (self.array.name, band, row, col)

    def compute(self, indices) -> list:
        """The blocks of frames ``indices``, in order."""
        from dask.optimization import cull

        keys = [self.key(k) for k in indices]
        return list(self._scheduler(cull(self._graph, keys)[0], keys)) if keys else []


def dask_encoded_frames(source: DaskFrames, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...],
                         workers: int | None = None):
    """Encoded frames in frame order, a window of frames at a time.

    On a distributed cluster each frame is compressed by a Dask task where
    its block lives, so raw frames never travel; otherwise Dask's scheduler
    computes a window of blocks while the writer's pool compresses the
    window before it.  Either way only a few windows are in memory.
    """
    workers = workers or default_threads()
    client = _distributed_client()
    if client is not None:
        yield from _cluster_encoded_frames(client, source, grid, sample, recipes)
        return
    window = max(2 * workers, LOCAL_WINDOW_BYTES // (grid.largest_frame_samples * sample.bytes_per_sample))
    with ThreadPoolExecutor(workers) as pool:
        pending = deque()
        for start in range(0, grid.frame_count, window):
            indices = range(start, min(start + window, grid.frame_count))
            # computed while the pool still compresses the previous window
            blocks = source.compute(indices)
            pending.extend(pool.submit(_encode_one, block, sample, recipes[k % grid.frames_per_position])
                           for k, block in zip(indices, blocks))
            while len(pending) > window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _cluster_encoded_frames(client, source: DaskFrames, grid: FrameGrid, sample: SampleType,
                            recipes: tuple[Recipes, ...]):
    import dask

    blocks = source.array.to_delayed(optimize_graph=False)
    encode = dask.delayed(_encode_one, pure=True)
    window = 4 * len(client.scheduler_info()["workers"])
    for start in range(0, grid.frame_count, window):
        batch = []
        for k in range(start, min(start + window, grid.frame_count)):
            row, col, band = grid.frame_location(k)
            batch.append(encode(blocks[band, row, col], sample, recipes[k % grid.frames_per_position]))
        yield from client.gather(client.compute(batch))


def _sizes(extent: int, tile: int) -> tuple[int, ...]:
    full, rest = divmod(extent, tile)
    return (tile,) * full + ((rest,) if rest else ())


def _distributed_client():
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:  # no client is active
        return None


__all__ = ["DaskFrames", "dask_encoded_frames", "threaded_encoded_frames"]
