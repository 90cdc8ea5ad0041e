"""Scenario 5: writing a large raster, against the bare encoder loop.

The bare loop encodes the same frames with the recipe the writer chose
(``compression.plan``, as ``write`` calls it) on a 2-thread pool and keeps
the frames in memory: no recipe choice, no file, no prefix.  The writer's
time includes choosing the recipe, writing and fsync-ing the file.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import xarray_rumi
from xarray_rumi.frames.choose import plan_frames
from xarray_rumi.format.dtypes import sample_type_for_dtype
from xarray_rumi.format.grid import FrameGrid
from xarray_rumi.frames.codec import encode_frame

from _report import Row, interleaved, speed_row

CRS = 32618
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
TILE = 512
WORKERS = 2


def _grid(values: np.ndarray) -> FrameGrid:
    bands, length, width = values.shape
    return FrameGrid(width, length, TILE, TILE, bands)


def chosen_recipes(values: np.ndarray, compression: str) -> list[str]:
    """The recipe the writer picks for each band slot (one per slot)."""
    grid, sample = _grid(values), sample_type_for_dtype(values.dtype)
    slots = plan_frames(grid, lambda k: sample.encode(values[grid.frame_window(k)]), compression)[1]
    return [slot.recipe for slot in slots]


def bare_encode(values: np.ndarray, recipes: list[str]) -> list[bytes]:
    """Encode every frame with its slot's recipe on ``WORKERS`` threads: the encoder's floor."""
    grid, sample = _grid(values), sample_type_for_dtype(values.dtype)

    def one(k: int) -> bytes:
        recipe, _, geometry = recipes[k % grid.frames_per_position].partition("@")
        return encode_frame(sample.encode(values[grid.frame_window(k)]), recipe, interband=bool(geometry))

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, range(grid.frame_count)))


def writing(root: str, values: np.ndarray, repeats: int) -> list[Row]:
    import dask
    import dask.array as da

    megabytes = values.nbytes / 1e6
    lazy = da.from_array(values, chunks=(1, TILE, TILE))
    target = os.path.join(root, "written.rumi")
    recipes = {c: chosen_recipes(values, c) for c in ("auto", "portable")}

    def write(data, compression):
        with dask.config.set(scheduler="threads", num_workers=WORKERS):
            return xarray_rumi.write(target, data, tile_size=TILE, crs=CRS, transform=TRANSFORM,
                                     compression=compression, write_header=False)

    cases = {}
    for c in ("auto", "portable"):
        cases[f"bare encode loop {c} {WORKERS}T"] = lambda c=c: bare_encode(values, recipes[c])
        cases[f"write numpy {c}"] = lambda c=c: write(values, c)
        cases[f"write Dask {c}"] = lambda c=c: write(lazy, c)
    times = interleaved(cases, repeats)
    rows = []
    for c in ("auto", "portable"):
        bare = times[f"bare encode loop {c} {WORKERS}T"]
        size = sum(len(f) for f in bare_encode(values, recipes[c])) / 1e6
        rows.append(speed_row(f"bare encode loop {c} {WORKERS}T", bare, f"bare {c}", bare,
                              note=f"{megabytes / bare:.0f} MB/s, {', '.join(sorted(set(recipes[c])))}, "
                                   f"{size:.1f} MB"))
        for source in ("numpy", "Dask"):
            seconds = times[f"write {source} {c}"]
            rows.append(speed_row(f"write {source} {c}", seconds, f"bare {c}", bare, 0.8,
                                  note=f"{megabytes / seconds:.0f} MB/s"))
    return rows
