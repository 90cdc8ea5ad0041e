"""The backend's window read as proposed in docs/benchmarks.md, to measure it before it lands.

``RumiBackendArray._read_window`` (backend.py, not owned by the benchmark)
fetches every frame of the window in one batch, then decodes each frame into
a fresh array and copies it into the result.  The proposal: fetch in batches
of a few frames per decoding thread, and decode each frame straight into its
place in the result with ``decode_frame(..., out=)``.  Peak memory is then
the result plus a few compressed frames, and a frame covering whole rows of
the result is written where it belongs with no copy at all.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from xarray_rumi.io.frames import decode_frame
from xarray_rumi.reader import RumiImage

#: Frames fetched at a time per decoding thread: enough to keep the threads busy, few enough to bound memory.
BATCH_PER_THREAD = 4


def read_window(image: RumiImage, bands: range, rows: range, cols: range, pool: ThreadPoolExecutor,
                threads: int) -> np.ndarray:
    grid, sample = image.grid, image.sample_type
    window = (bands, rows, cols)
    out = np.empty(tuple(len(r) for r in window), sample.dtype)
    touched = grid.frames_touching(bands, rows, cols)

    def decode_and_place(k: int, payload: bytes) -> None:
        spans = [_overlap(f, r) for f, r in zip(grid.frame_window(k), window)]
        target = out[tuple(o for o, _ in spans)]
        if target.shape == grid.frame_shape(k):
            decode_frame(payload, sample, target.shape, out=target)  # the whole frame: straight into place
        else:
            target[...] = decode_frame(payload, sample, grid.frame_shape(k))[tuple(i for _, i in spans)]

    step = BATCH_PER_THREAD * threads
    for first in range(0, len(touched), step):
        batch = touched[first:first + step]
        starts, stops = image.header.ranges(batch)
        payloads = image.source.read_many(starts, stops)
        list(pool.map(decode_and_place, batch.tolist(), payloads))
    return out


def read_full(image: RumiImage, threads: int = 2) -> np.ndarray:
    """The whole image through :func:`read_window` on ``threads`` decoding threads."""
    b, y, x = image.grid.shape
    with ThreadPoolExecutor(threads) as pool:
        return read_window(image, range(b), range(y), range(x), pool, threads)


def _overlap(frame: slice, window: range) -> tuple[slice, slice]:
    lo, hi = max(frame.start, window.start), min(frame.stop, window.stop)
    return slice(lo - window.start, hi - window.start), slice(lo - frame.start, hi - frame.start)
