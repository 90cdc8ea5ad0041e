"""odc-stac over rumi Items (xarray_rumi.stac.RumiDriver) against odc-stac over their ZSTD GeoTIFF twins.

Run from the repository root (needs the odc extra)::

    python ci/benchmarks/odc_load.py                 # ~2 min on 2 cores
    python ci/benchmarks/odc_load.py --size 1024 --repeats 3

One run, side by side: three images in two UTM zones (3 bands uint16, 512 px
tile frames; two on zone 32's grid a day, one in zone 33 the next day) and
their GeoTIFF twins (same pixels, same 512 px tiles, ZSTD), loaded by the same
``odc.stac.load(items, crs="EPSG:3857", resolution=10, chunks=512 px)`` and
computed, the two alternated on every repeat so machine noise hits them alike:

1. time, median and range of the ratio GeoTIFF / rumi (> 1: rumi is faster),
   and how many pixels differ;
2. equality sweep: pixels that differ from the twins' for several resampling
   methods, resolutions and chunk sizes (docs/stac.md);
3. a small bbox over HTTP (the loopback server of tests/servers.py): requests
   to build the lazy load, and frames fetched against frames in the images;
4. chunk-size guidance: frames decoded per frame of the images, and time,
   for several chunk sizes (a frame on a chunk border is decoded once per
   chunk whose source window overlaps it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

import xarray_rumi
import xarray_rumi.reading.image as image_module
import xarray_rumi.stac

SCENES = [(32632, 700000, 5560000, "2024-05-01"), (32632, 712000, 5550000, "2024-05-01"),
          (32633, 275000, 5555000, "2024-05-02")]


def make_scenes(root: str, size: int, *, href_prefix: str | None = None):
    """Three rumi Items and their ZSTD GeoTIFF twins: smooth fields with noise, 3 bands uint16, 512 px tiles."""
    import rasterio
    from affine import Affine

    items, twins = [], []
    rows, cols = np.mgrid[0:size, 0:size]
    for index, (epsg, x0, y0, day) in enumerate(SCENES):
        noise = np.random.default_rng(index).integers(0, 64, (3, size, size))
        data = (np.stack([(np.sin(rows / (40 + 9 * b)) + np.cos(cols / (55 + 7 * b))) * 900 + 2000
                          for b in range(3)]) + noise).astype("uint16")
        transform = (10, 0, x0, 0, -10, y0)
        path = os.path.join(root, f"scene-{index}.rumi")
        blob = xarray_rumi.write(path, data, tile_size=512, crs=epsg, transform=transform)
        href = f"{href_prefix}/scene-{index}.rumi" if href_prefix else None
        items.append(xarray_rumi.stac.item(path, blob, href=href, datetime=f"{day}T10:00:00Z"))
        tif = os.path.join(root, f"scene-{index}.tif")
        with rasterio.open(tif, "w", driver="GTiff", width=size, height=size, count=3, dtype="uint16",
                           crs=f"EPSG:{epsg}", transform=Affine(*transform), tiled=True, blockxsize=512,
                           blockysize=512, compress="zstd") as out:
            out.write(data)
        twin = items[-1].clone()
        twin.assets["data"].href = tif
        twin.assets["data"].media_type = "image/tiff; application=geotiff"
        for field in ("rumi:header", "rumi:raster_type"):
            twin.assets["data"].extra_fields.pop(field)
        twins.append(twin)
    return items, twins


def differing(a, b) -> int:
    return int(sum(np.sum(a[name].values != b[name].values) for name in a.data_vars))


def timed_load(items, driver, **kwargs):
    import odc.stac

    start = time.perf_counter()
    loaded = odc.stac.load(items, driver=driver, **kwargs).compute()
    return time.perf_counter() - start, loaded


def speed(items, twins, repeats: int) -> None:
    kwargs = dict(crs="EPSG:3857", resolution=10, chunks={"x": 512, "y": 512})
    rumi_times, tiff_times, ratios = [], [], []
    for _ in range(repeats):
        tiff_time, expected = timed_load(twins, None, **kwargs)
        rumi_time, loaded = timed_load(items, xarray_rumi.stac.RumiDriver(), **kwargs)
        tiff_times.append(tiff_time)
        rumi_times.append(rumi_time)
        ratios.append(tiff_time / rumi_time)
    size = sum(loaded[name].size for name in loaded.data_vars)
    print("\n1. odc.stac.load(crs=EPSG:3857, resolution=10, 512 px chunks), computed")
    print(f"{'reader':<28}{'median s':>10}{'min s':>9}{'max s':>9}")
    for name, times in (("GeoTIFF twins (odc's reader)", tiff_times), ("rumi Items (RumiDriver)", rumi_times)):
        print(f"{name:<28}{statistics.median(times):>10.2f}{min(times):>9.2f}{max(times):>9.2f}")
    print(f"ratio GeoTIFF / rumi: median {statistics.median(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x "
          f"over {repeats} alternated repeats; pixels differing: {differing(expected, loaded)} of {size}")


def sweep(items, twins) -> None:
    print("\n2. equality sweep: pixels differing from the GeoTIFF twins' (EPSG:3857)")
    print(f"{'resampling':<12}{'res m':>6}{'chunk':>7}{'differing':>11}{'pixels':>11}")
    for resampling, resolution, chunk in [("nearest", 10, 512), ("bilinear", 10, 512), ("bilinear", 30, 256),
                                          ("cubic", 45, 256), ("lanczos", 10, 300), ("average", 25, 512),
                                          ("mode", 30, 512), ("bilinear", 10, 128)]:
        kwargs = dict(crs="EPSG:3857", resolution=resolution, resampling=resampling, chunks={"x": chunk, "y": chunk})
        _, expected = timed_load(twins, None, **kwargs)
        _, loaded = timed_load(items, xarray_rumi.stac.RumiDriver(), **kwargs)
        size = sum(loaded[name].size for name in loaded.data_vars)
        print(f"{resampling:<12}{resolution:>6}{chunk:>7}{differing(expected, loaded):>11}{size:>11}")


def small_bbox(size: int) -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
    from servers import RangeServer

    from xarray_rumi.format.blob import Header

    with tempfile.TemporaryDirectory() as root, RangeServer(root) as server:
        items, _ = make_scenes(root, size, href_prefix=server.url)
        server.requests.clear()
        x0, y0 = SCENES[0][1], SCENES[0][2]
        lazy = xarray_rumi.stac.load(items, crs="EPSG:3857", resolution=10, chunks={"x": 512, "y": 512},
                                     geopolygon=_box(x0 + 1000, y0 - 1800, x0 + 1800, y0 - 1000, "EPSG:32632"))
        built = len(server.get_requests())
        lazy.compute()
        frames = sum(Header.from_bytes(xarray_rumi.header_from_file(os.path.join(root, f"scene-{i}.rumi")))
                     .grid.frame_count for i in range(3))
        fetched = [r for r in server.get_requests() if r.range and r.range[1] - r.range[0] > 300]
        print("\n3. a 800 m x 800 m bbox inside the first image, over HTTP (loopback)")
        print(f"requests to build the lazy load: {built}; frames fetched to compute it: {len(fetched)} of {frames} "
              f"(3 bands of the one tile position it touches); other requests: "
              f"{len(server.get_requests()) - built - len(fetched)} (the IFD head each blob is checked against)")


def _box(x0, y0, x1, y1, crs):
    from odc.geo.geom import box

    return box(x0, y0, x1, y1, crs)


def chunk_sizes(items) -> None:
    from xarray_rumi.format.blob import Header

    decoded = []
    decode = image_module.decode_frame

    def counting(payload, *args, **kwargs):
        decoded.append(1)
        return decode(payload, *args, **kwargs)

    frames = sum(Header.from_bytes(xarray_rumi.header_from_file(item.assets["data"].href)).grid.frame_count
                 for item in items)
    print("\n4. chunk size: frames decoded per frame of the images, and time (EPSG:3857, 10 m, bilinear)")
    print(f"{'chunk':>6}{'decoded / frames':>18}{'seconds':>9}")
    image_module.decode_frame = counting
    try:
        for chunk in (256, 512, 1024, 2048):
            decoded.clear()
            seconds, _ = timed_load(items, xarray_rumi.stac.RumiDriver(), crs="EPSG:3857", resolution=10,
                                    resampling="bilinear", chunks={"x": chunk, "y": chunk})
            print(f"{chunk:>6}{len(decoded) / frames:>18.2f}{seconds:>9.2f}")
    finally:
        image_module.decode_frame = decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=2048, help="image side in pixels (default 2048)")
    parser.add_argument("--repeats", type=int, default=5, help="alternated repeats of the timed load (default 5)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")   # odc-geo's shapely deprecations, rasterio's MEM datasets
    with tempfile.TemporaryDirectory() as root:
        items, twins = make_scenes(root, args.size)
        print(f"three {args.size} x {args.size} images, 3 bands uint16, 512 px tiles; EPSG:32632 x2, EPSG:32633")
        speed(items, twins, args.repeats)
        sweep(items, twins)
        chunk_sizes(items)
    small_bbox(args.size)


if __name__ == "__main__":
    main()
