"""Scenarios 1 (full read), 2 (random windows) and 7 (peak memory of a full read).

All three use one raster, written once as rumi and as a GeoTIFF (ZSTD +
horizontal predictor, the same 512 px tiles, band-interleaved so a GeoTIFF
block is one band like a rumi tile frame), built with the helpers of
``read.py`` so the two benchmarks measure the same thing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import xarray as xr

import xarray_rumi
from read import bare_loop, geotiff_full, make_raster, rumi_full, rumi_persist, write_geotiff
from xarray_rumi.frames.codec import decode_frame
from xarray_rumi.reading.open import open_image

from _report import Row, interleaved, speed_row, time_row

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
CRS = 32618
WINDOW = 256
PEAK_RSS_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_peak_rss.py")


@dataclass
class Raster:
    """One raster on disk in both formats."""

    values: np.ndarray
    rumi: str
    blob: bytes
    tif: str

    @property
    def megabytes(self) -> float:
        return self.values.nbytes / 1e6


def make(root: str, bands: int, size: int, tile: int = 512) -> Raster:
    values = make_raster(bands, size)
    rumi, tif = os.path.join(root, "scene.rumi"), os.path.join(root, "scene.tif")
    blob = xarray_rumi.write(rumi, values, tile_size=tile, crs=CRS, transform=TRANSFORM)
    write_geotiff(tif, values, TRANSFORM, tile)
    # Check once that every path reads the same pixels: a fast wrong read is no result.
    np.testing.assert_array_equal(rumi_full(rumi, blob, 2, TRANSFORM), values)
    np.testing.assert_array_equal(geotiff_full(tif, 2), values)
    np.testing.assert_array_equal(lazy_full(rumi, blob), values)
    np.testing.assert_array_equal(bare_into(rumi, blob, 2), values)
    return Raster(values, rumi, blob, tif)


def bare_into(path: str, blob: bytes, threads: int) -> np.ndarray:
    """The bare loop for a read that returns one array: each frame decoded into its place (``out=``)."""
    image = open_image(path, blob, georeferencing=False)
    grid, sample = image.grid, image.sample_type
    starts, stops = image.header.ranges(np.arange(grid.frame_count))
    out = np.empty(grid.shape, sample.dtype)

    def one(k: int) -> None:
        decode_frame(image.source.read(int(starts[k]), int(stops[k])), sample, grid.frame_shape(k),
                     out=out[grid.frame_window(k)])

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(grid.frame_count)))
    return out


def lazy_full(path: str, blob: bytes) -> np.ndarray:
    """The whole image through the lazy backend (``chunks=None``): no Dask at all."""
    ds = xr.open_dataset(path, engine="rumi", header=blob, crs=CRS, transform=TRANSFORM)
    return ds.band_data.values


def full_read(raster: Raster, repeats: int) -> list[Row]:
    """Scenario 1: ``open_dataset(chunks={})`` on 1 and 2 threads vs the bare loop vs GeoTIFF."""
    cases = {}
    for t in (1, 2):
        cases[f"open_dataset chunks={{}} {t}T"] = lambda t=t: rumi_full(raster.rumi, raster.blob, t, TRANSFORM)
        cases[f"bare fetch+decode {t}T"] = lambda t=t: bare_loop(raster.rumi, raster.blob, t, "discard")
        cases[f"bare +keep {t}T"] = lambda t=t: bare_loop(raster.rumi, raster.blob, t, "keep")
        cases[f"GeoTIFF rioxarray {t}T"] = lambda t=t: geotiff_full(raster.tif, t)
    cases["lazy .values (no Dask) 2T"] = lambda: lazy_full(raster.rumi, raster.blob)
    cases["persist 2T"] = lambda: rumi_persist(raster.rumi, raster.blob, 2, TRANSFORM)
    cases["bare +place 2T"] = lambda: bare_loop(raster.rumi, raster.blob, 2, "place")
    cases["bare decode into (out=) 2T"] = lambda: bare_into(raster.rumi, raster.blob, 2)
    cases["compute, Dask's synchronous scheduler"] = lambda: rumi_full(raster.rumi, raster.blob, 1, TRANSFORM,
                                                                       scheduler="sync")
    times = interleaved(cases, repeats)
    rows = []
    for t in (1, 2):
        bare, tif = times[f"bare fetch+decode {t}T"], times[f"GeoTIFF rioxarray {t}T"]
        rumi = times[f"open_dataset chunks={{}} {t}T"]
        target = t == 2
        rows += [
            speed_row(f"bare fetch+decode {t}T", bare, f"bare fetch+decode {t}T", bare,
                      note=f"{raster.megabytes / bare:.0f} MB/s"),
            speed_row(f"bare +keep {t}T", times[f"bare +keep {t}T"], f"bare fetch+decode {t}T", bare,
                      note="every frame kept: fresh memory per frame"),
            speed_row(f"open_dataset chunks={{}} {t}T", rumi, f"bare fetch+decode {t}T", bare,
                      0.9 if target else None, note=f"{raster.megabytes / rumi:.0f} MB/s"),
            speed_row(f"open_dataset chunks={{}} {t}T", rumi, f"GeoTIFF rioxarray {t}T", tif,
                      1.5 if target else None),
            speed_row(f"GeoTIFF rioxarray {t}T", tif, f"bare fetch+decode {t}T", bare,
                      note=f"{raster.megabytes / tif:.0f} MB/s"),
        ]
    bare2 = times["bare fetch+decode 2T"]
    rows += [
        speed_row("persist 2T", times["persist 2T"], "bare fetch+decode 2T", bare2,
                  note="open_dataset(chunks={}) without the final concatenation"),
        speed_row("bare +place 2T", times["bare +place 2T"], "bare fetch+decode 2T", bare2,
                  note="decode, then copy into one array"),
        speed_row("bare decode into (out=) 2T", times["bare decode into (out=) 2T"], "bare fetch+decode 2T", bare2,
                  note="decode_frame(out=) into one array"),
        speed_row("lazy .values (no Dask) 2T", times["lazy .values (no Dask) 2T"], "bare fetch+decode 2T", bare2,
                  note="the process's shared pool (2 threads), frames placed into one array"),
        speed_row("compute, Dask's synchronous scheduler", times["compute, Dask's synchronous scheduler"],
                  "bare fetch+decode 1T", times["bare fetch+decode 1T"],
                  note="open_dataset(chunks={}) on one thread without the threaded scheduler's hand-offs"),
    ]
    return rows


def windows(raster: Raster, count: int) -> list[Row]:
    """Scenario 2: random 256 px windows (all bands) on the lazy backend vs decoding the frames they touch."""
    rng = np.random.default_rng(1)
    _, height, width = raster.values.shape
    corners = rng.integers(0, [height - WINDOW, width - WINDOW], (count, 2)).tolist()
    opened = xr.open_dataset(raster.rumi, engine="rumi", header=raster.blob, crs=CRS, transform=TRANSFORM)
    image = open_image(raster.rumi, raster.blob, georeferencing=False)
    grid, sample = image.grid, image.sample_type
    # The same pool size as the backend's decoding pool, so only the work differs.
    pool = ThreadPoolExecutor(min(4, os.cpu_count() or 1))

    def decode_touched(y: int, x: int) -> None:
        touched = grid.frames_touching(range(grid.samples_per_pixel), range(y, y + WINDOW), range(x, x + WINDOW))
        starts, stops = image.header.ranges(touched)
        payloads = image.source.read_many(starts, stops)
        list(pool.map(lambda k, p: decode_frame(p, sample, grid.frame_shape(k)), touched.tolist(), payloads))

    def window(y: int, x: int) -> np.ndarray:
        return opened.band_data[:, y:y + WINDOW, x:x + WINDOW].values

    from xarray.core.indexing import BasicIndexer

    from xarray_rumi.dataset.engine import RumiBackendArray

    array = RumiBackendArray(image)

    def backend_window(y: int, x: int) -> np.ndarray:
        return array[BasicIndexer((slice(None), slice(y, y + WINDOW), slice(x, x + WINDOW)))]

    def open_and_window(y: int, x: int) -> np.ndarray:
        ds = xr.open_dataset(raster.rumi, engine="rumi", header=raster.blob, crs=CRS, transform=TRANSFORM)
        return ds.band_data[:, y:y + WINDOW, x:x + WINDOW].values

    np.testing.assert_array_equal(window(*corners[0]), raster.values[:, corners[0][0]:corners[0][0] + WINDOW,
                                                                     corners[0][1]:corners[0][1] + WINDOW])
    cases = {"decode touched frames": decode_touched, "lazy window": window, "backend array window": backend_window,
             "open + lazy window": open_and_window}
    per_case = {name: [] for name in cases}
    for y, x in corners:
        for name, run in cases.items():
            per_case[name].append(_seconds(run, y, x))
    pool.shutdown()
    median = {name: float(np.median(v)) for name, v in per_case.items()}
    frames = np.median([len(grid.frames_touching(range(grid.samples_per_pixel), range(y, y + WINDOW),
                                                 range(x, x + WINDOW))) for y, x in corners])
    anchor = median["decode touched frames"]
    return [
        time_row("decode touched frames", anchor, "decode touched frames", anchor,
                 note=f"median {frames:g} frames a window, {count} windows"),
        time_row("lazy window", median["lazy window"], "decode touched frames", anchor, 1.25),
        time_row("backend array window", median["backend array window"], "decode touched frames", anchor,
                 note="RumiBackendArray alone: no xarray indexing layers"),
        time_row("open + lazy window", median["open + lazy window"], "decode touched frames", anchor,
                 note="open_dataset with blob + crs/transform each time (cutting a chip)"),
    ]


def _seconds(run, *args) -> float:
    import time

    start = time.perf_counter()
    run(*args)
    return time.perf_counter() - start


def peak_memory(raster: Raster, root: str) -> list[Row]:
    """Scenario 7: peak RSS of a full read in a fresh process, relative to the result's size."""
    header = os.path.join(root, "scene.rumi.blob")
    with open(header, "wb") as f:
        f.write(raster.blob)
    modes = {
        "bare +place (anchor)": "bare-place",
        "bare decode into (out=)": "bare-into",
        "lazy .values (no Dask)": "lazy",
        "open_dataset chunks={} compute 2T": "dask",
        "GeoTIFF rioxarray compute 2T": "geotiff",
    }
    measured = {}
    for label, mode in modes.items():
        # One process per mode: ru_maxrss only ever grows, so modes must not share one.
        out = subprocess.run([sys.executable, PEAK_RSS_SCRIPT, mode, raster.rumi, header, raster.tif],
                             check=True, capture_output=True, text=True).stdout
        measured[label] = json.loads(out.strip().splitlines()[-1])
    rows = []
    for label, m in measured.items():
        multiple = (m["peak"] - m["baseline"]) / m["nbytes"]
        target = 1.2 if label.startswith(("lazy", "open_dataset")) else None
        rows.append(Row(label, (m["peak"] - m["baseline"]) / 1e6, "MB above baseline", "result size",
                        multiple, target, False,
                        note=f"result {m['nbytes'] / 1e6:.0f} MB, baseline RSS {m['baseline'] / 1e6:.0f} MB"))
    return rows
