"""Read throughput and window latency: the rumi engine vs the bare decoder vs GeoTIFF.

Run from the repository root::

    python ci/benchmarks/read.py                  # ~1 minute on 2 cores
    python ci/benchmarks/read.py --size 4096 --repeats 7

One synthetic raster (smooth terrain plus noise, like a DEM or a reflectance
band) is written as rumi and as a GeoTIFF (ZSTD + horizontal predictor, same
512 px tiles, band-interleaved so a GeoTIFF block is one band like a rumi tile
frame).  Then, side by side in one run, interleaving the cases on every repeat
so machine noise hits them alike:

- ``rumi open_dataset``: ``xr.open_dataset(engine="rumi", header=blob,
  chunks={})`` computed on Dask's threaded scheduler;
- ``rumi persist``: the same dataset ``.persist()``-ed: every frame decoded into
  its own chunk, without Dask's final concatenation into one array;
- ``rumi BackendArray``: the engine's array asked for each frame's window on a
  thread pool, without Dask or xarray's indexing layers (what this project's
  code costs on its own);
- ``bare fetch+decode``: the loop the engine cannot beat: read each frame's byte
  range and decode it, on a thread pool of the same size, nothing assembled;
- ``bare +keep``: the same, keeping every decoded frame: fresh memory for each,
  as any read that returns the data needs (the discarding loop reuses one hot
  buffer, which no real read can);
- ``bare +place``: the same, plus copying each frame into one output array (the
  copy Dask's final concatenation also makes);
- ``GeoTIFF rioxarray``: ``xr.open_dataset(engine="rasterio", chunks={},
  lock=False)`` on the same scheduler.

Throughput is decoded MB/s, best of ``--repeats``; ratios are against the bare
loop at the same thread count.  Window latency is the median over random
256 x 256 px windows (all bands), opening the file for every window (what
cutting a training chip costs) and on an already open dataset.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr

import xarray_rumi
from xarray_rumi.frames.codec import decode_frame
from xarray_rumi.reading.open import open_image


def make_raster(bands: int, size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    layers = []
    for b in range(bands):
        terrain = 3000 * np.sin(3 * x + b) * np.cos(2 * y) + 1500 * x * y
        layers.append(terrain + rng.normal(0, 20, (size, size)))
    return np.clip(np.stack(layers) + 5000, 0, 65535).astype(np.uint16)


def write_geotiff(path: str, values: np.ndarray, transform, tile: int) -> None:
    import rasterio
    from affine import Affine

    bands, height, width = values.shape
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=bands, dtype=values.dtype,
                       crs="EPSG:32618", transform=Affine(*transform), tiled=True, blockxsize=tile,
                       blockysize=tile, compress="zstd", predictor=2, interleave="band") as dst:
        dst.write(values)


def best(times: list[float]) -> float:
    return min(times)


def bare_loop(path: str, blob: bytes, threads: int, mode: str) -> None:
    """Fetch and decode every frame on ``threads`` threads.

    ``mode``: ``"discard"`` drops each frame (its memory is reused by the next
    one, hot in cache), ``"keep"`` keeps them all (fresh memory, as any read that
    returns the data needs), ``"place"`` copies each into one output array.
    """
    image = open_image(path, blob, georeferencing=False)
    grid, sample, header = image.grid, image.sample_type, image.header
    starts, stops = header.ranges(np.arange(grid.frame_count))
    out = np.empty(grid.shape, sample.dtype) if mode == "place" else None

    def one(k: int):
        frame = decode_frame(image.source.read(int(starts[k]), int(stops[k])), sample, grid.frame_shape(k))
        if mode == "place":
            out[grid.frame_window(k)] = frame
        return frame if mode == "keep" else None

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(grid.frame_count)))


def rumi_full(path: str, blob: bytes, threads: int, transform, scheduler: str = "threads") -> np.ndarray:
    ds = xr.open_dataset(path, engine="rumi", header=blob, crs=32618, transform=transform, chunks={})
    return ds.band_data.data.compute(scheduler=scheduler, num_workers=threads)


def rumi_persist(path: str, blob: bytes, threads: int, transform):
    """Every frame decoded into its own chunk, without assembling one array."""
    ds = xr.open_dataset(path, engine="rumi", header=blob, crs=32618, transform=transform, chunks={})
    return ds.band_data.data.persist(scheduler="threads", num_workers=threads)


def backend_frames(path: str, blob: bytes, threads: int) -> list:
    """The engine's BackendArray asked for every frame window on a thread pool: no Dask, no xarray layers."""
    from xarray.core.indexing import BasicIndexer

    from xarray_rumi.dataset.engine import RumiBackendArray

    array = RumiBackendArray(open_image(path, header=blob, georeferencing=False))
    grid = array.image.grid
    windows = [grid.frame_window(k) for k in range(grid.frame_count)]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda window: array[BasicIndexer(window)], windows))


def geotiff_full(path: str, threads: int) -> np.ndarray:
    ds = xr.open_dataset(path, engine="rasterio", chunks={}, lock=False, mask_and_scale=False)
    try:
        return ds.band_data.data.compute(scheduler="threads", num_workers=threads)
    finally:
        ds.close()  # a fresh dataset per repeat: GDAL's block cache does not carry over


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2048, help="image width and height in px (default 2048)")
    parser.add_argument("--bands", type=int, default=3)
    parser.add_argument("--tile", type=int, default=512)
    parser.add_argument("--frame-unit", default="tile", choices=["tile", "cell"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--windows", type=int, default=40, help="random 256 px windows to time")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    values = make_raster(args.bands, args.size)
    transform = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    root = tempfile.mkdtemp(prefix="rumi-bench-")
    rumi, tif = os.path.join(root, "scene.rumi"), os.path.join(root, "scene.tif")
    blob = xarray_rumi.write(rumi, values, tile_size=args.tile, frame_unit=args.frame_unit, crs=32618,
                             transform=transform)
    write_geotiff(tif, values, transform, args.tile)
    megabytes = values.nbytes / 1e6
    np.testing.assert_array_equal(rumi_full(rumi, blob, 2, transform), values)
    np.testing.assert_array_equal(geotiff_full(tif, 2), values)

    cases = {}
    for threads in (1, 2):
        cases[f"rumi open_dataset {threads}T"] = lambda t=threads: rumi_full(rumi, blob, t, transform)
        cases[f"rumi persist {threads}T"] = lambda t=threads: rumi_persist(rumi, blob, t, transform)
        cases[f"rumi BackendArray {threads}T"] = lambda t=threads: backend_frames(rumi, blob, t)
        cases[f"bare fetch+decode {threads}T"] = lambda t=threads: bare_loop(rumi, blob, t, "discard")
        cases[f"bare +keep {threads}T"] = lambda t=threads: bare_loop(rumi, blob, t, "keep")
        cases[f"bare +place {threads}T"] = lambda t=threads: bare_loop(rumi, blob, t, "place")
        cases[f"GeoTIFF rioxarray {threads}T"] = lambda t=threads: geotiff_full(tif, t)
    times = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, run in cases.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)

    print(f"raster {args.bands} x {args.size} x {args.size} uint16 ({megabytes:.1f} MB decoded), "
          f"{args.tile} px {args.frame_unit} frames; rumi {os.path.getsize(rumi) / 1e6:.2f} MB, "
          f"GeoTIFF ZSTD+predictor {os.path.getsize(tif) / 1e6:.2f} MB; best of {args.repeats}")
    print(f"{'full read':<26}{'seconds':>9}{'MB/s':>9}{'x bare':>9}{'x GeoTIFF':>11}")
    for threads in (1, 2):
        bare = best(times[f"bare fetch+decode {threads}T"])
        geotiff = best(times[f"GeoTIFF rioxarray {threads}T"])
        for label in ("rumi open_dataset", "rumi persist", "rumi BackendArray", "bare fetch+decode", "bare +keep",
                      "bare +place", "GeoTIFF rioxarray"):
            t = best(times[f"{label} {threads}T"])
            print(f"{label + f' {threads}T':<26}{t:>9.3f}{megabytes / t:>9.0f}{bare / t:>9.2f}{geotiff / t:>11.2f}")

    rng = np.random.default_rng(1)
    corners = rng.integers(0, args.size - 256, (args.windows, 2))
    rumi_open = xr.open_dataset(rumi, engine="rumi", header=blob, crs=32618, transform=transform)
    tif_open = xr.open_dataset(tif, engine="rasterio", lock=False, mask_and_scale=False)
    window_cases = {
        "rumi open+window": lambda y, x: xr.open_dataset(rumi, engine="rumi", header=blob, crs=32618,
                                                         transform=transform).band_data[:, y:y + 256, x:x + 256].values,
        "GeoTIFF open+window": lambda y, x: _tif_window(tif, y, x),
        "rumi window (open)": lambda y, x: rumi_open.band_data[:, y:y + 256, x:x + 256].values,
        "GeoTIFF window (open)": lambda y, x: tif_open.band_data[:, y:y + 256, x:x + 256].values,
    }
    latency = {name: [] for name in window_cases}
    for y, x in corners.tolist():
        for name, run in window_cases.items():
            start = time.perf_counter()
            run(y, x)
            latency[name].append(time.perf_counter() - start)
    tif_open.close()
    print(f"\n{'256 px window, all bands':<26}{'median ms':>10}{'x GeoTIFF':>11}")
    for kind in ("open+window", "window (open)"):
        reference = statistics.median(latency[f"GeoTIFF {kind}"])
        for engine in ("rumi", "GeoTIFF"):
            t = statistics.median(latency[f"{engine} {kind}"])
            print(f"{engine + ' ' + kind:<26}{t * 1e3:>10.2f}{reference / t:>11.2f}")
    print("(GeoTIFF 'window (open)' may be served from GDAL's block cache; rumi caches nothing)")


def _tif_window(path: str, y: int, x: int) -> np.ndarray:
    ds = xr.open_dataset(path, engine="rasterio", lock=False, mask_and_scale=False)
    try:
        return ds.band_data[:, y:y + 256, x:x + 256].values
    finally:
        ds.close()


if __name__ == "__main__":
    main()
