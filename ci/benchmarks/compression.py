"""Compression ratio and write/read speed: rumi against GeoTIFF and JPEG 2000.

For every raster in ../shared/data that rumi can hold, and a large generated
one, measures side by side in one run (best of --repeat runs each):

- rumi ``auto`` and ``portable`` with tile frames, and ``auto`` with cell
  frames (which can predict one band from another), written by
  ``xarray_rumi.write`` and read back whole by ``open_image(...).read()``;
- GeoTIFF with ZSTD and DEFLATE, each with and without the horizontal
  predictor (``PREDICTOR=2``), and JPEG 2000 lossless (``JP2OpenJPEG``,
  ``REVERSIBLE=YES``), written and read by rasterio.

All at the same 512 px block size.  Prints one table per raster, then the
geometric mean of each method's ratio over the real rasters, and checks the
targets: ``auto`` >= the best alternative in geometric mean, and >= 0.9x the
best on every raster.

    python ci/benchmarks/compression.py [--repeat 3] [--large 4096]
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import tempfile
import time

import numpy as np
import rasterio

import xarray_rumi
from xarray_rumi.reading.open import open_image

DATA = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"
REAL = ["RGB.byte.tif", "shade.tif", "RGBA.uint16.tif", "small_dem_3m_merged.tif", "cint16.tif"]
BLOCK = 512
GTIFF = {
    "gtiff-zstd": dict(compress="zstd", zstd_level=9),
    "gtiff-zstd-pred": dict(compress="zstd", zstd_level=9, predictor=2),
    "gtiff-deflate": dict(compress="deflate", zlevel=9),
    "gtiff-deflate-pred": dict(compress="deflate", zlevel=9, predictor=2),
}


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure_rumi(data, sample_type, compression, frame_unit, path, repeat):
    write_s = best_of(repeat, lambda: xarray_rumi.write(path, data, tile_size=BLOCK, compression=compression,
                                                         frame_unit=frame_unit, sample_type=sample_type,
                                                         write_header=False))
    read_s = best_of(repeat, lambda: open_image(path).read())
    assert np.array_equal(open_image(path).read(), data)
    return os.path.getsize(path), write_s, read_s


def measure_gdal(data, driver, options, path, repeat, gdal_dtype=None):
    bands, rows, cols = data.shape
    profile = dict(driver=driver, width=cols, height=rows, count=bands, dtype=gdal_dtype or data.dtype, **options)
    if driver == "GTiff":
        profile.update(tiled=True, blockxsize=BLOCK, blockysize=BLOCK)

    def write():
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(data)

    write_s = best_of(repeat, write)

    def read():
        with rasterio.open(path) as src:
            return src.read()

    read_s = best_of(repeat, read)
    assert np.array_equal(read(), data)
    return os.path.getsize(path), write_s, read_s


def rasters(large: int):
    for name in REAL:
        path = DATA / name
        if not path.exists():
            continue
        with rasterio.open(path) as src:
            yield name, src.read(), ("cint16" if src.dtypes[0] == "complex_int16" else None), src.dtypes[0]
    y, x = np.mgrid[0:large, 0:large].astype(np.float32)
    rng = np.random.default_rng(0)
    terrain = 3000 + 900 * np.sin(x / 211) * np.cos(y / 157) + 200 * np.sin((x - y) / 37)
    generated = np.stack([terrain * (0.7 + 0.1 * b) + rng.normal(0, 8, terrain.shape) for b in range(2)])
    yield f"generated {large}x{large} (2 bands)", generated.astype(np.uint16), None, "uint16"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--large", type=int, default=4096, help="side of the generated raster")
    args = parser.parse_args()
    print(f"xarray-rumi {xarray_rumi.__version__}, rasterio {rasterio.__version__} (GDAL {rasterio.__gdal_version__}),"
          f" numpy {np.__version__}, {os.cpu_count()} cores; block {BLOCK} px; best of {args.repeat}")
    ratios: dict[str, dict[str, float]] = {}
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="rumi-bench-"))
    for name, data, sample_type, gdal_dtype in rasters(args.large):
        raw = data.size * (4 if sample_type == "cint16" else data.dtype.itemsize)
        rows = {}
        for compression, frame_unit in (("auto", "tile"), ("auto", "cell"), ("portable", "tile")):
            rows[f"rumi-{compression}-{frame_unit}"] = measure_rumi(data, sample_type, compression, frame_unit,
                                                                     tmp / "x.rumi", args.repeat)
        for method, options in GTIFF.items():
            if "pred" in method and data.dtype.kind == "c":
                continue  # GDAL's horizontal predictor is for integers and floats only
            rows[method] = measure_gdal(data, "GTiff", options, tmp / "x.tif", args.repeat, gdal_dtype)
        if data.dtype.kind in "iu":
            rows["jpeg2000-lossless"] = measure_gdal(data, "JP2OpenJPEG", dict(QUALITY="100", REVERSIBLE="YES"),
                                                     tmp / "x.jp2", args.repeat)
        print(f"\n{name}: {' x '.join(map(str, data.shape))} {sample_type or data.dtype}, {raw / 1e6:.1f} MB raw")
        print(f"  {'method':<20} {'ratio':>8} {'write MB/s':>11} {'read MB/s':>10}")
        for method, (size, write_s, read_s) in rows.items():
            print(f"  {method:<20} {raw / size:8.2f} {raw / write_s / 1e6:11.1f} {raw / read_s / 1e6:10.1f}")
        best_other = max(raw / size for m, (size, _, _) in rows.items() if not m.startswith("rumi"))
        for layout in ("tile", "cell"):
            print(f"  auto ({layout} frames) / best alternative: {raw / rows[f'rumi-auto-{layout}'][0] / best_other:.2f}x")
        if not name.startswith("generated"):
            ratios[name] = {m: raw / size for m, (size, _, _) in rows.items()}
    methods = sorted({m for r in ratios.values() for m in r})
    # JPEG 2000 and GDAL's predictor do not apply to complex samples: compare
    # every method on the rasters all of them apply to, too.
    complete = {n: r for n, r in ratios.items() if set(r) == set(methods)}
    print(f"\ngeometric mean of the ratio over the {len(complete)} real rasters every method applies to:")
    for method in methods:
        values = [r[method] for r in complete.values()]
        print(f"  {method:<20} {math.exp(sum(map(math.log, values)) / len(values)):8.2f}")
    print(f"geometric mean over all {len(ratios)} real rasters (methods that apply to all):")
    means = {}
    for method in methods:
        values = [r[method] for r in ratios.values() if method in r]
        if len(values) == len(ratios):
            means[method] = math.exp(sum(map(math.log, values)) / len(values))
            print(f"  {method:<20} {means[method]:8.2f}")
    for method in methods:  # the fair figure for the targets: the rasters everything applies to
        values = [r[method] for r in complete.values()]
        means[method] = math.exp(sum(map(math.log, values)) / len(values))
    best_other = max(v for m, v in means.items() if not m.startswith("rumi"))
    for layout in ("tile", "cell"):
        auto = f"rumi-auto-{layout}"
        worst = min(r[auto] / max(v for m, v in r.items() if not m.startswith("rumi")) for r in ratios.values())
        print(f"\ntarget ({layout} frames): auto >= best alternative in geometric mean: "
              f"{means[auto] / best_other:.2f}x ({'met' if means[auto] >= best_other else 'MISSED'})")
        print(f"target ({layout} frames): auto >= 0.9x the best on every raster: worst {worst:.2f}x "
              f"({'met' if worst >= 0.9 else 'MISSED'})")


if __name__ == "__main__":
    main()
