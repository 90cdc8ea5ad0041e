"""Peak RSS and time of ``xarray_rumi.convert`` by source width, each conversion in a fresh process.

Generates 1-band uint16 DEFLATE GeoTIFFs, striped (GDAL's default rows per
strip) and tiled (512 px), at 16k, 32k and 64k px wide and ``--height`` rows,
plus the 64k ones at twice the height (the peak must not depend on height),
in a temporary directory.  Each conversion runs in a process of its own
(``one`` below): the peak is ``VmHWM`` reset after the imports, as in
``_peak_rss.py``; the time is the conversion's wall time.  Sources and
conversions alternate, ``--repeat`` rounds, best time and highest peak kept.

    python ci/benchmarks/convert_memory.py [--height 2048] [--repeat 2] [--before /tmp/conv-before]

``--before DIR`` also runs every conversion with the package imported from
``DIR`` (a git worktree of the previous code), alternated with the current one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTHS = (16384, 32768, 65536)
ROWS = 512   # rows generated at a time


def make_source(path: str, width: int, height: int, tiled: bool) -> None:
    """A compressible (gradient + noise) 1-band uint16 DEFLATE GeoTIFF."""
    import rasterio
    from rasterio.windows import Window

    layout = dict(tiled=True, blockxsize=512, blockysize=512) if tiled else {}
    rng = np.random.default_rng(0)
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=1, dtype="uint16",
                       compress="deflate", crs="EPSG:32618",
                       transform=rasterio.Affine(10, 0, 500000, 0, -10, 4000000), **layout) as f:
        x = (np.arange(width, dtype=np.uint32) // 8)[None, :]
        for top in range(0, height, ROWS):
            rows = min(ROWS, height - top)
            y = (np.arange(top, top + rows, dtype=np.uint32) // 8)[:, None]
            values = ((x + y) % 4096 + rng.integers(0, 64, (rows, width), dtype=np.uint32)).astype(np.uint16)
            f.write(values, 1, window=Window(0, top, width, rows))


def one(source: str, target: str) -> None:
    """Convert in this process and print ``{"peak", "baseline", "seconds"}`` (bytes, seconds)."""
    sys.path.insert(0, HERE)
    from _peak_rss import current_rss, high_water_mark, reset_high_water_mark

    import rasterio  # noqa: F401  (imported before the baseline)
    import rioxarray  # noqa: F401
    import dask.array  # noqa: F401
    import xarray_rumi
    from xarray_rumi.writing.convert import convert

    reset_high_water_mark()
    baseline = current_rss()
    start = time.perf_counter()
    convert(source, target)
    seconds = time.perf_counter() - start
    print(json.dumps({"peak": high_water_mark(), "baseline": baseline, "seconds": seconds,
                      "module": xarray_rumi.__file__}))


def run(source: str, target: str, package_root: str | None) -> dict:
    env = dict(os.environ)
    if package_root is not None:
        env["PYTHONPATH"] = package_root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, __file__, "--one", source, target], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--height", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--before", default=None)
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    parser.add_argument("--one", nargs=2, default=None)
    args = parser.parse_args()
    if args.one:
        return one(*args.one)
    widths = [int(w) for w in args.widths.split(",")]
    shapes = [(w, args.height) for w in widths] + [(widths[-1], 2 * args.height)]
    versions = {"after": None} | ({"before": args.before} if args.before else {})
    with tempfile.TemporaryDirectory() as root:
        sources = []
        for layout in ("striped", "tiled"):
            for width, height in shapes:
                path = os.path.join(root, f"{layout}-{width}x{height}.tif")
                make_source(path, width, height, layout == "tiled")
                sources.append((layout, width, height, path))
        results: dict = {}
        outputs: dict = {}
        for _ in range(args.repeat):
            for layout, width, height, path in sources:
                for version, package in versions.items():
                    target = os.path.join(root, f"{version}.rumi")
                    got = run(path, target, package)
                    with open(target, "rb") as f:
                        outputs.setdefault((layout, width, height), set()).add(hash(f.read()))
                    best = results.setdefault((layout, width, height, version), {"peak": 0, "seconds": 1e9})
                    best["peak"] = max(best["peak"], got["peak"] - got["baseline"])
                    best["seconds"] = min(best["seconds"], got["seconds"])
        header = f"| source | width x height | raw MB | " + " | ".join(
            f"{v} peak MB | {v} s" for v in versions) + " | identical |"
        print(header)
        print("|" + "---|" * (header.count("|") - 1))
        for layout, width, height, _ in sources:
            cells = []
            for version in versions:
                r = results[(layout, width, height, version)]
                cells += [f"{r['peak'] / 1e6:.0f}", f"{r['seconds']:.2f}"]
            same = "yes" if len(outputs[(layout, width, height)]) == 1 else "NO"
            print(f"| {layout} DEFLATE | {width} x {height} | {width * height * 2 / 1e6:.0f} | "
                  + " | ".join(cells) + f" | {same} |")


if __name__ == "__main__":
    main()
