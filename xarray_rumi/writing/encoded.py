"""Encoded frames in frame order, from a numpy array or a Dask array.

The writer consumes an iterator of compressed frames and writes them one
after another; this module produces it, keeping only a few frames (numpy) or
a few windows of frames (Dask) in memory.  Encoding releases the GIL, so
frames are compressed on the process's threads, a bounded number ahead
(:func:`~xarray_rumi.runtime.threads.ordered_map`); on a distributed
cluster each frame is compressed by a Dask task where its block lives.
"""

from __future__ import annotations

import functools

import numpy as np

from ..format.dtypes import SampleType
from ..format.grid import FrameGrid
from ..frames.recipes import Recipes
from ..frames.codec import ThreadCache
from ..runtime.threads import computing_threads, ordered_map
from .blocks import check_frame_block, checked_blocks
from .cluster import ClusterSession

#: Without a cluster, Dask computes about this many bytes of frames at a time, and at most two
#: such windows are in memory.
LOCAL_WINDOW_BYTES = 16 * 2**20


def _encode_one(block, index: int, grid: FrameGrid, dtype: np.dtype, sample: SampleType, recipes: Recipes,
                cache: ThreadCache | None = None) -> bytes:
    check_frame_block(block, index, grid, dtype)  # the IFD is built from the declared shape, the frame from this
    return recipes.encode(sample.encode(np.asarray(block)), cache)


# Each write encodes with graphs of its own (a ThreadCache), dropped when it ends.  Graphs kept by
# the pool's threads from one write to the next made later writes slower: each encode grows and
# shrinks the heap by a graph's worth, and glibc trims it back every time until it first frees a
# block that large, which dropping a frame's graph does (docs/benchmarks.md).


def threaded_encoded_frames(array, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...],
                             workers: int | None = None):
    """Encoded frames in frame order, ``2 * workers`` frames at most in flight (the encoder releases the GIL).

    ``recipes`` holds one :class:`Recipes` per band slot (``plan``'s result).

    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> grid = FrameGrid(64, 32, 32, 32, 1)
    >>> frames = threaded_encoded_frames(np.zeros((1, 32, 64), np.uint8), grid, sample_type_from_name("uint8"),
    ...                                  (Recipes(("id>zstd",)),))
    >>> [frame[0] for frame in frames]  # 0xC0 + the pinned OpenZL format version
    [216, 216]
    """
    workers = workers or computing_threads()
    cache = ThreadCache()

    def encode(k: int) -> bytes:
        bands, rows, cols = grid.frame_window(k)
        return _encode_one(array[bands, rows, cols], k, grid, array.dtype, sample,
                           recipes[k % grid.frames_per_position], cache)

    return ordered_map(encode, range(grid.frame_count), in_flight=2 * workers)


class DaskFrames:
    """A Dask array rechunked to the frame grid (one block a frame), computed a window of frames at a time.

    Each frame's block is a ``Delayed`` (``to_delayed``), and a window is one
    ``Delayed`` that lists its blocks, computed by ``dask.compute`` on the
    active scheduler, which runs only what those blocks need.  One
    collection a window, not one a frame: Dask's expression layer costs,
    for each collection it is given, several times the work of slicing a
    block from memory.  Dask's array optimisation is a performance pass
    only; on the graphs measured (``from_array``, ``map_blocks`` chains,
    rechunks) it changed no task and cost time on every frame, so it is
    skipped (figures in docs/benchmarks.md).

    >>> import dask.array as da
    >>> grid = FrameGrid(64, 32, 32, 32, 1)
    >>> frames = DaskFrames(da.arange(2048, dtype="uint16").reshape(1, 32, 64), grid)
    >>> [int(block[0, 0, 0]) for block in frames.compute([1, 0])]
    [32, 0]
    """

    def __init__(self, array, grid: FrameGrid, cluster: ClusterSession | None = None):
        self.source = array
        self.source_chunks = array.chunks
        self.dtype = array.dtype
        self.cluster = cluster if cluster is not None else ClusterSession.active()
        self._grid = grid

    @functools.cached_property
    def array(self):
        """The source rechunked to the frame grid, one block a frame (the cluster cuts frames from the source)."""
        # a rechunk takes each block's declared rows, so a block longer than declared would be cut silently:
        # blocks are checked before it (blocks that are already frames are checked as frames, when encoded)
        source, frame_chunks = self.source, self._grid.frame_chunks
        return (source if source.chunks == frame_chunks else checked_blocks(source)).rechunk(frame_chunks)

    @functools.cached_property
    def _blocks(self):
        return self.array.to_delayed(optimize_graph=False)

    def block(self, k: int):
        """Frame ``k``'s block, a ``Delayed``."""
        row, col, band = self._grid.frame_location(k)
        return self._blocks[band, row, col]

    def frames_per_block(self) -> int | None:
        """Frames in each of the source's blocks when they span the width and whole frame rows, else ``None``.

        Such blocks (rioxarray's, as ``convert`` asks for them: a tile row each) hold a
        run of consecutive frames, the same number in each but the last.

        >>> import dask.array as da
        >>> DaskFrames(da.zeros((2, 96, 64), chunks=(2, 64, 64)), FrameGrid(64, 96, 32, 32, 2)).frames_per_block()
        8
        >>> DaskFrames(da.zeros((1, 64, 64), chunks=(1, 64, 32)), FrameGrid(64, 64, 32, 32, 1)).frames_per_block()
        """
        bands, rows, cols = self.source_chunks
        grid = self._grid
        if len(bands) != 1 or len(cols) != 1 or len(set(rows[:-1])) > 1 or rows[0] % grid.tile_length:
            return None
        frame_rows = -(-rows[0] // grid.tile_length)
        return frame_rows * grid.tiles_across * grid.frames_per_position

    def compute(self, indices) -> list:
        """The blocks of frames ``indices``, in order."""
        import dask
        from dask.base import tokenize

        if not len(indices):
            return []
        if self.cluster is not None:
            return self.cluster.frames(self.source, self._grid, list(indices))
        # named after the frame numbers: hashing the blocks themselves would cost more than listing them
        name = f"rumi-window-{self.array.name}-{tokenize(list(indices))}"
        window = dask.delayed(_listed)(*(self.block(k) for k in indices), dask_key_name=name)
        return dask.compute(window)[0]


def _listed(*blocks) -> list:
    return list(blocks)


def dask_encoded_frames(source: DaskFrames, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...],
                         workers: int | None = None):
    """Encoded frames in frame order, a window of frames at a time.

    On a distributed cluster each frame is compressed by a Dask task where
    its block lives, so raw frames never travel; otherwise Dask's scheduler
    computes a window of blocks while the shared pool compresses the window
    before it.  Either way only a few windows are in memory.

    >>> import dask.array as da
    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> grid = FrameGrid(64, 32, 32, 32, 1)
    >>> source = DaskFrames(da.zeros((1, 32, 64), "uint8", chunks=(1, 16, 16)), grid)
    >>> len(list(dask_encoded_frames(source, grid, sample_type_from_name("uint8"), (Recipes(("id>zstd",)),))))
    2
    """
    if source.cluster is not None:
        yield from _cluster_encoded_frames(source, grid, sample, recipes)
        return
    window = _window(source, grid, sample, workers or computing_threads())
    cache = ThreadCache()

    def blocks():
        for start in range(0, grid.frame_count, window):
            indices = range(start, min(start + window, grid.frame_count))
            # asked for when the previous window is handed out: computed while the pool compresses it
            yield from zip(indices, source.compute(indices))

    def encode(item) -> bytes:
        k, block = item
        return _encode_one(block, k, grid, source.dtype, sample, recipes[k % grid.frames_per_position], cache)

    # a window in flight while the next is computed: at most two windows of blocks in memory
    yield from ordered_map(encode, blocks(), in_flight=window)


def _window(source: DaskFrames, grid: FrameGrid, sample: SampleType, workers: int) -> int:
    """Frames computed at a time: about ``LOCAL_WINDOW_BYTES``, and whole source blocks when they span the width.

    A window that ends inside a source block computes the whole block again for
    the next window: a tile row of a 64k px GeoTIFF was read and decoded four
    times, and GDAL's block cache grew to hold it (docs/writing.md, "Memory").
    """
    window = max(2 * workers, LOCAL_WINDOW_BYTES // (grid.largest_frame_samples * sample.bytes_per_sample))
    per_block = source.frames_per_block()
    if per_block is None:
        return window
    return -(-window // per_block) * per_block


def _cluster_encoded_frames(source: DaskFrames, grid: FrameGrid, sample: SampleType, recipes: tuple[Recipes, ...]):
    threads = source.cluster.threads()
    window = max(2 * threads, LOCAL_WINDOW_BYTES // (grid.largest_frame_samples * sample.bytes_per_sample))
    group = max(1, window // (2 * threads))  # frames a task: two tasks a thread in each window
    windows = [[list(range(first, min(first + group, stop))) for first in range(start, stop, group)]
               for start in range(0, grid.frame_count, window) for stop in [min(start + window, grid.frame_count)]]

    def encoder(k: int):
        return functools.partial(_encode_one, index=k, grid=grid, dtype=source.dtype, sample=sample,
                                 recipes=recipes[k % grid.frames_per_position])

    return source.cluster.encoded(source.source, grid, windows, encoder)


__all__ = ["DaskFrames", "dask_encoded_frames", "threaded_encoded_frames"]
