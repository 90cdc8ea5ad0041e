"""Encoded frames in frame order from numpy or Dask, a few frames or windows in memory."""

from __future__ import annotations

import functools

import numpy as np

from ..format.dtypes import SampleType
from ..format.grid import FrameGrid
from ..frames.recipes import Recipes
from ..frames.codec import ThreadCache
from ..runtime.threads import computing_threads, ordered_map
from .blocks import check_frame_block, checked_blocks
from .cluster import ClusterSession, holds_only_data

#: At most two such windows of frames are in memory.
LOCAL_WINDOW_BYTES = 16 * 2**20


def _encode_one(block, index: int, grid: FrameGrid, dtype: np.dtype, sample: SampleType, recipes: Recipes,
                cache: ThreadCache | None = None) -> bytes:
    check_frame_block(block, index, grid, dtype)  # the IFD is built from the declared shape, the frame from this
    return recipes.encode(sample.encode(np.asarray(block)), cache)


def threaded_encoded_frames(array, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...],
                             workers: int | None = None):
    """Encoded frames in frame order, ``2 * workers`` at most in flight; ``recipes``: one per band slot.

    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> grid = FrameGrid(64, 32, 32, 32, 1)
    >>> frames = threaded_encoded_frames(np.zeros((1, 32, 64), np.uint8), grid, sample_type_from_name("uint8"),
    ...                                  (Recipes("id>zstd"),))
    >>> [frame[0] for frame in frames]  # 0xC0 + the pinned OpenZL format version
    [216, 216]
    """
    frames = ((k, array[grid.frame_window(k)]) for k in range(grid.frame_count))
    return _encoded_in_order(frames, grid, array.dtype, sample, recipes, 2 * (workers or computing_threads()))


class DaskFrames:
    """A Dask array's frames, computed a window at a time on the cluster, else by ``dask.compute``."""

    def __init__(self, array, grid: FrameGrid, cluster: ClusterSession | None = None):
        self.source = array
        self.dtype = array.dtype
        self.cluster = cluster if cluster is not None else ClusterSession.active()
        # Data this process holds (``da.from_array``): nothing to compute, and compressing it on this process's
        # threads beats sending every pixel to the workers (docs/writing.md, "On a cluster").
        self._here = cluster is None and self.cluster is not None and holds_only_data(array)
        if self._here:
            self.cluster = None
        self._grid = grid

    @functools.cached_property
    def array(self):
        """The source rechunked to frames: one unoptimised ``Delayed`` a window (docs/benchmarks.md)."""
        # a rechunk cuts a longer block to its declared rows without a word: check before
        source, frame_chunks = self.source, self._grid.frame_chunks
        return (source if source.chunks == frame_chunks else checked_blocks(source)).rechunk(frame_chunks)

    @functools.cached_property
    def _blocks(self):
        return self.array.to_delayed(optimize_graph=False)

    def frames_per_block(self) -> int | None:
        """Frames in each source block when blocks span the width and whole frame rows, else ``None``."""
        bands, rows, cols = self.source.chunks
        grid = self._grid
        if len(bands) != 1 or len(cols) != 1 or len(set(rows[:-1])) > 1 or rows[0] % grid.tile_length:
            return None
        frame_rows = -(-rows[0] // grid.tile_length)
        return frame_rows * grid.tiles_across * grid.frames_per_position

    def compute(self, indices) -> list:
        import dask
        from dask.base import tokenize

        if not len(indices):
            return []
        if self.cluster is not None:
            return self.cluster.frames(self.source, self._grid, list(indices))
        # named after the frame numbers: hashing the blocks themselves would cost more than listing them
        name = f"rumi-window-{self.array.name}-{tokenize(list(indices))}"
        blocks = (self._blocks[band, row, col] for row, col, band in map(self._grid.frame_location, indices))
        window = dask.delayed(_listed)(*blocks, dask_key_name=name)
        return dask.compute(window, scheduler="threads" if self._here else None)[0]


def _listed(*blocks) -> list:
    return list(blocks)


def dask_encoded_frames(source: DaskFrames, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...],
                         workers: int | None = None):
    """Encoded frames in frame order, a window of frames at a time (compressed while the next is computed)."""
    if source.cluster is not None:
        yield from _cluster_encoded_frames(source, grid, sample, recipes)
        return
    # about LOCAL_WINDOW_BYTES, in whole source blocks (docs/writing.md, "Memory")
    per_block = source.frames_per_block() or 1
    window = -(-_frames_in_window(grid, sample, workers or computing_threads()) // per_block) * per_block

    def blocks():
        for start in range(0, grid.frame_count, window):
            indices = range(start, min(start + window, grid.frame_count))
            # asked for when the previous window is handed out: computed while the pool compresses it
            yield from zip(indices, source.compute(indices))

    yield from _encoded_in_order(blocks(), grid, source.dtype, sample, recipes, window)


def _encoded_in_order(frames, grid: FrameGrid, dtype: np.dtype, sample: SampleType, recipes: tuple[Recipes, ...],
                      in_flight: int):
    """``(index, block)`` pairs encoded on the shared pool, in order."""
    cache = ThreadCache()  # one a write: graphs kept across writes slow later ones (docs/benchmarks.md)

    def encode(item) -> bytes:
        k, block = item
        return _encode_one(block, k, grid, dtype, sample, recipes[k % grid.frames_per_position], cache)

    return ordered_map(encode, frames, in_flight=in_flight)


def _frames_in_window(grid: FrameGrid, sample: SampleType, threads: int) -> int:
    return max(2 * threads, LOCAL_WINDOW_BYTES // (grid.largest_frame_samples * sample.bytes_per_sample))


def _cluster_encoded_frames(source: DaskFrames, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...]):
    threads = source.cluster.threads()
    window = _frames_in_window(grid, sample, threads)
    group = max(1, window // (2 * threads))  # frames a task: two tasks a thread in each window
    windows = []
    for start in range(0, grid.frame_count, window):
        stop = min(start + window, grid.frame_count)
        windows.append([list(range(first, min(first + group, stop))) for first in range(start, stop, group)])

    def encoder(k: int):
        return functools.partial(_encode_one, index=k, grid=grid, dtype=source.dtype, sample=sample,
                                 recipes=recipes[k % grid.frames_per_position])

    return source.cluster.encoded(source.source, grid, windows, encoder)
