"""Scenarios 3 (opening), 4 (a Cube of small images) and 6 (an image of 1,000,000 frames).

Requests over HTTP are counted by the test suite's ``RangeServer``
(``tests/servers.py``) on 127.0.0.1, which records every request it serves.
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr

import xarray_rumi
from xarray_rumi.dataset import catalog
from xarray_rumi.dataset.engine import image_dataset
from xarray_rumi.dataset.cube import open_cube
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameGrid
from xarray_rumi.reading.checked import checked_blobs
from xarray_rumi.frames.codec import decode_frame
from xarray_rumi.reading.open import open_image

from _report import Row, interleaved, time_row

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from servers import RangeServer  # noqa: E402

CRS = 32618
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
MILLISECOND = 1e-3


def _requests(server: RangeServer, run) -> int:
    server.requests.clear()
    checked_blobs.clear()  # count what a process's first open of the image asks for, blob check included
    run()
    return len(server.requests)  # HEAD requests count too: each is a round trip


def opening(root: str, path: str, blob: bytes, repeats: int, catalog_files: int) -> list[Row]:
    """Scenario 3: opening with a blob, without one (local and HTTP), and many images from a catalog."""
    name = os.path.basename(path)
    rows = []
    with RangeServer(os.path.dirname(path)) as server:
        url = f"{server.url}/{name}"
        cases = {
            "blob + crs/transform, local": lambda: xr.open_dataset(path, engine="rumi", header=blob, crs=CRS,
                                                                   transform=TRANSFORM),
            "blob + crs/transform, HTTP": lambda: xr.open_dataset(url, engine="rumi", header=blob, crs=CRS,
                                                                  transform=TRANSFORM),
            "engine alone (open_image + image_dataset)": lambda: image_dataset(
                open_image(path, header=blob, crs=CRS, transform=TRANSFORM)),
            "xarray's floor: xr.Dataset of the same variable and coords": lambda: _same_dataset(path, blob),
            "blob only, local": lambda: xr.open_dataset(path, engine="rumi", header=blob),
            "blob only, HTTP": lambda: xr.open_dataset(url, engine="rumi", header=blob),
            "no blob, local": lambda: xr.open_dataset(path, engine="rumi"),
            "no blob, HTTP": lambda: xr.open_dataset(url, engine="rumi"),
        }
        times = interleaved(cases, repeats * 4)
        requests = {label: _requests(server, run) for label, run in cases.items() if "HTTP" in label}
    for label, seconds in times.items():
        target = 1.0 if label.startswith("blob + crs") else None
        note = f"{requests[label]} requests" if label in requests else ""
        rows.append(Row(label, seconds * 1e3, "ms", "1 ms", seconds / MILLISECOND, target, False, note))
    rows.append(Row("requests, blob + crs/transform over HTTP", requests["blob + crs/transform, HTTP"], "requests",
                    "zero", None, None, note="target: 0 (met)" if requests["blob + crs/transform, HTTP"] == 0
                    else "target: 0 (NOT met)"))
    rows += _catalog(root, path, catalog_files, repeats)
    return rows


def _same_dataset(path: str, blob: bytes) -> xr.Dataset:
    """What xarray itself costs: the engine's dataset rebuilt from its parts (variable + coords)."""
    ds = _same_dataset.template = getattr(_same_dataset, "template", None) or xr.open_dataset(
        path, engine="rumi", header=blob, crs=CRS, transform=TRANSFORM)
    variable = ds.band_data.variable
    coords = {name: (c.dims, c.values, c.attrs) for name, c in ds.coords.items()}
    return xr.Dataset({"band_data": variable}, coords=coords)


def _catalog(root: str, path: str, count: int, repeats: int) -> list[Row]:
    """``count`` small images: build a catalog once, then time ``open_catalog``."""
    directory = os.path.join(root, "catalog")
    os.makedirs(directory, exist_ok=True)
    first = os.path.join(directory, "image-0000.rumi")
    xarray_rumi.write(first, np.arange(2 * 64 * 64, dtype="uint16").reshape(2, 64, 64), tile_size=32, crs=CRS,
                      transform=TRANSFORM, compression="portable", write_header=False)
    paths = [first] + [shutil.copyfile(first, os.path.join(directory, f"image-{i:04d}.rumi")) for i in range(1, count)]
    table_path = os.path.join(root, "catalog.parquet")
    start = time.perf_counter()
    catalog.build(paths, table_path)
    build_seconds = time.perf_counter() - start
    opens = []
    for _ in range(max(1, repeats // 2)):
        start = time.perf_counter()
        datasets = catalog.open_catalog(table_path)
        opens.append(time.perf_counter() - start)
    assert len(datasets) == count
    per_image = statistics.median(opens) / count
    with RangeServer(directory) as server:
        table = catalog.read(table_path)
        table["url"] = [f"{server.url}/{os.path.basename(p)}" for p in table["url"]]
        requests = _requests(server, lambda: catalog.open_catalog(table))
    return [
        Row(f"open_catalog, {count} images (per image)", per_image * 1e3, "ms", "1 ms", per_image / MILLISECOND,
            1.0, False, note=f"{requests} requests over HTTP for all {count}; parquet read included"),
        Row(f"catalog.build, {count} images (per image)", build_seconds / count * 1e3, "ms", "", None,
            note="one IFD read each; done once"),
    ]


def cube(root: str, count: int, repeats: int) -> list[Row]:
    """Scenario 4: ``open_cube`` of ``count`` small images, stacking, and a reduction over the stack."""
    directory = os.path.join(root, "cube")
    os.makedirs(directory, exist_ok=True)
    values = np.arange(2 * 256 * 256, dtype="uint16").reshape(2, 256, 256) % 4000
    first = os.path.join(directory, "t000.rumi")
    blob = xarray_rumi.write(first, values, tile_size=128, crs=CRS, transform=TRANSFORM, write_header=False)
    paths = [first] + [shutil.copyfile(first, os.path.join(directory, f"t{i:03d}.rumi")) for i in range(1, count)]
    blobs = [blob] * count

    def each_open():
        return [xr.open_dataset(p, engine="rumi", header=b, chunks={}) for p, b in zip(paths, blobs)]

    opened = each_open()
    stacked = open_cube(paths, blobs, chunks={})
    image = open_image(first, blob, georeferencing=False)
    grid, sample = image.grid, image.sample_type

    def bare_reduce():
        # Fetch and decode every frame of every image, summing per frame window: the reduction's floor.
        total = np.zeros(grid.shape, np.float64)

        def one(job):
            p, k = job
            start, stop = image.frame_range(k)
            with open(p, "rb") as f:
                f.seek(start)
                return k, decode_frame(f.read(stop - start), sample, grid.frame_shape(k))

        with ThreadPoolExecutor(2) as pool:
            for k, frame in pool.map(one, [(p, k) for p in paths for k in range(grid.frame_count)]):
                total[grid.frame_window(k)] += frame
        return total / len(paths)

    reduce = lambda: stacked.band_data.mean("time").compute(scheduler="threads", num_workers=2)  # noqa: E731
    np.testing.assert_allclose(reduce().values, values)
    cases = {
        "open_cube (blobs given)": lambda: open_cube(paths, blobs, chunks={}),
        f"{count} x open_dataset (blobs given)": each_open,
        "xr.concat of the opened images": lambda: xr.concat(opened, dim="time", data_vars="all", coords="minimal",
                                                            compat="override", join="override",
                                                            combine_attrs="override"),
        "mean over time, Dask 2T": reduce,
        "bare fetch+decode+sum 2T": bare_reduce,
    }
    times = interleaved(cases, max(3, repeats // 2), warmup=False)
    anchor_open = times[f"{count} x open_dataset (blobs given)"]
    frames = count * grid.frame_count
    return [
        time_row("open_cube (blobs given)", times["open_cube (blobs given)"], f"{count} x open_dataset", anchor_open,
                 note=f"{count} images of 2 x 256 x 256 uint16, {frames} frames; one 160 B georef read each "
                      "(+ the 252 B IFD head in the same read, on a process's first open)"),
        time_row(f"{count} x open_dataset (blobs given)", anchor_open, f"{count} x open_dataset", anchor_open),
        time_row("xr.concat of the opened images", times["xr.concat of the opened images"],
                 f"{count} x open_dataset", anchor_open),
        time_row("mean over time, Dask 2T", times["mean over time, Dask 2T"], "bare fetch+decode+sum 2T",
                 times["bare fetch+decode+sum 2T"]),
        time_row("bare fetch+decode+sum 2T", times["bare fetch+decode+sum 2T"], "bare fetch+decode+sum 2T",
                 times["bare fetch+decode+sum 2T"]),
    ]


def huge(root: str, frames: int, repeats: int) -> list[Row]:
    """Scenario 6: a blob of ``frames`` tiny (4 x 4 px) frames; nothing is read, so no file exists."""
    side = int(round(frames ** 0.5)) * 4
    grid = FrameGrid(side, side, 4, 4, 1)
    counts = np.random.default_rng(0).integers(20, 52, grid.frame_count)
    header = Header.from_byte_counts(grid, sample_type_from_name("uint8"), counts)
    blob = header.to_bytes()
    path = os.path.join(root, "never-written.rumi")  # opening must not touch it

    def lazy():
        return xr.open_dataset(path, engine="rumi", header=blob, georeferencing=False)

    def graph():
        return xr.open_dataset(path, engine="rumi", header=blob, georeferencing=False, chunks={})

    times = interleaved({"lazy": lazy, "graph": graph}, repeats)
    lazy_bytes, lazy_objects = _memory_and_objects(lazy)
    graph_bytes, graph_objects = _memory_and_objects(graph)
    start = time.perf_counter()
    located = open_image(path, blob, georeferencing=False).header.ranges([grid.frame_count - 1])
    locate_seconds = time.perf_counter() - start
    assert int(located[1][0] - located[0][0]) == counts[-1]
    n = grid.frame_count
    return [
        Row(f"lazy open, {n:,} frames (chunks=None)", times["lazy"] * 1e3, "ms", "1 s", times["lazy"], 1.0, False,
            note=f"blob {len(blob) / 1e6:.2f} MB"),
        Row("lazy open memory (tracemalloc peak)", lazy_bytes / n, "bytes/frame", "100 bytes/frame",
            lazy_bytes / n / 100, 1.0, False),
        Row("lazy open: Python objects created", lazy_objects, "objects", "frames", lazy_objects / n, 0.001, False,
            note="gc-tracked objects alive after opening"),
        Row(f"graph construction, chunks={{}} ({n:,} chunks)", times["graph"] * 1e3, "ms", "lazy open",
            times["graph"] / times["lazy"], None, False, note="dask's layer stays unmaterialised"),
        Row("graph construction memory", graph_bytes / n, "bytes/frame", "100 bytes/frame", graph_bytes / n / 100,
            None, False, note=f"{graph_objects} objects alive after"),
        Row("open_image + locate the last frame", locate_seconds * 1e3, "ms", "", None,
            note="builds the 8 bytes/frame offset prefix sum, on first use"),
    ]


def _memory_and_objects(run) -> tuple[int, int]:
    gc.collect()
    before = len(gc.get_objects())
    tracemalloc.start()
    kept = run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    objects = len(gc.get_objects()) - before
    del kept
    return peak, objects
