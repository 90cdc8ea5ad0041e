"""Scenario 8 of ``suite.py``: Dask at scale.

(a) a Cube's mean over time (``open_cube(...).band_data.mean("time")``) with
    ``chunks={}``, ``"auto"`` and ``{"time": 8, "y": 1024, "x": 1024}`` on
    Dask's threaded scheduler, against the bare loop that fetches, decodes and
    sums the same frames on as many threads; ``"auto"`` on 1 thread, and on a
    ``distributed.LocalCluster`` of 2 single-threaded worker processes;
(b) a full read of one image: ``open_dataset(chunks="auto")`` and
    ``chunks={}`` against the lazy backend's ``.values`` (no Dask);
(c) Cubes of 1,000 and 10,000 large images (1 x 10980 x 10980 uint16, 484
    frames each, one real file and symlinks), and of 100,000 with
    ``--large``, opened from blobs with ``crs=``/``transform=``, the blobs
    repeated (one for all) or distinct (one each, of the same grid): open +
    ``band_data.mean()`` graph time and peak RSS, each in fresh processes;
    the same Cubes through catalogs (a rumi Parquet catalog and
    stac-geoparquet): ``open_collection`` + graph and ``open_catalog``;
    for the first count, tracemalloc's peak a frame and the pickled size of
    one chunk-reading task;
(d) the peak RSS of the Cube mean with ``"auto"``, in a fresh process,
    against the chunks in flight and against the Cube's size.

(c) and (d) run in fresh processes (this file, ``--child MODE SPEC``) so
neither the parent's memory nor its caches count.  Every case is guarded: one
that raises prints its error in its row.  Standalone (e.g. to measure another
checkout with ``PYTHONPATH=``)::

    python ci/benchmarks/_dask_scenarios.py [--quick] [--parts a b c d] [--a-cases frame auto blocks 1T cluster]
                                            [--large] [--counts 1000 10000 100000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import tracemalloc
import warnings
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from _report import Row, interleaved, speed_row, time_row  # noqa: E402

CRS = 32618
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
TILE = 512
BLOCKS = {"time": 8, "y": 1024, "x": 1024}
A_CASES = ("frame", "auto", "blocks", "1T", "cluster")
PARTS = ("a", "b", "c", "d")


def error_row(case: str, error: BaseException) -> Row:
    text = f"{type(error).__name__}: {error}".replace("\n", " ")
    return Row(case, float("nan"), "error", note=f"ERROR {text[:300]}")


def _row(times: dict, errors: dict, case: str, make) -> Row:
    if case in errors:
        return error_row(case, errors[case])
    if case not in times:
        return error_row(case, RuntimeError("not measured"))
    return make(times[case])


# ----------------------------------------------------------------------------------------------- (a)

def write_cube(root: str, count: int, size: int) -> tuple[list[str], list[bytes]]:
    """``count`` images of 2 x size x size uint16 like ``read.make_raster`` (a different seed each)."""
    from read import make_raster

    import xarray_rumi

    directory = os.path.join(root, "dask-cube")
    os.makedirs(directory, exist_ok=True)
    paths, blobs = [], []
    for i in range(count):
        path = os.path.join(directory, f"t{i:03d}.rumi")
        blobs.append(xarray_rumi.write(path, make_raster(2, size, seed=i), tile_size=TILE, crs=CRS,
                                       transform=TRANSFORM))
        paths.append(path)
    return paths, blobs


def bare_mean(paths: list[str], blobs: list[bytes], threads: int) -> np.ndarray:
    """The floor of a mean over time: fetch and decode every frame, sum in float64 per pixel, divide.

    The work is split by frame position: each task walks one frame window through
    every image, so the ``threads`` threads never write the same pixels.
    """
    from xarray_rumi.frames.codec import decode_frame
    from xarray_rumi.reading.open import open_image

    images = [open_image(p, header=b, georeferencing=False) for p, b in zip(paths, blobs)]
    grid, sample = images[0].grid, images[0].sample_type
    ranges = [image.header.ranges(np.arange(grid.frame_count)) for image in images]
    total = np.zeros(grid.shape, np.float64)

    def one(k: int) -> None:
        shape = grid.frame_shape(k)
        place = total[grid.frame_window(k)]
        buffer = np.empty(shape, sample.dtype)
        for image, (starts, stops) in zip(images, ranges):
            frame = decode_frame(image.source.read(int(starts[k]), int(stops[k])), sample, shape, out=buffer)
            np.add(place, frame, out=place)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(grid.frame_count)))
    total /= len(paths)
    return total


def cube_mean(paths, blobs, chunks, threads=2, scheduler="threads"):
    from xarray_rumi import open_cube

    cube = open_cube(paths, blobs, crs=CRS, transform=TRANSFORM, chunks=chunks)
    mean = cube.band_data.mean("time")
    if scheduler == "threads":
        return mean.compute(scheduler="threads", num_workers=threads)
    return scheduler.compute(mean).result()  # a distributed Client


def _chunk_text(paths, blobs, chunks) -> str:
    from xarray_rumi import open_cube

    data = open_cube(paths, blobs, crs=CRS, transform=TRANSFORM, chunks=chunks).band_data.data
    largest = max(int(np.prod(s)) for s in _block_shapes(data)) * data.dtype.itemsize
    return f"{data.npartitions} chunks, largest {largest / 1e6:.1f} MB"


def _block_shapes(data):
    import itertools

    return [tuple(c) for c in itertools.product(*[sorted(set(d)) for d in data.chunks])]


def cube_reduction(paths, blobs, size: int, repeats: int, a_cases=A_CASES) -> list[Row]:
    """(a): the Cube's mean over time against the bare loop, side by side."""
    n = len(paths)
    megabytes = n * 2 * size * size * 2 / 1e6
    expected = bare_mean(paths, blobs, 2)
    labels = {"frame": ("Cube mean chunks={} 2T", {}), "auto": ("Cube mean chunks=auto 2T", "auto"),
              "blocks": ("Cube mean chunks={time:8,y:1024,x:1024} 2T", BLOCKS)}
    errors: dict = {}
    checks: dict = {}

    def checked(name, run, against=None):
        """Run once, compare with the bare loop's mean (or ``against``), then return the timed callable."""
        def first():
            result = run()
            values = np.asarray(getattr(result, "values", result))
            if against is None:
                np.testing.assert_allclose(values, expected, rtol=1e-12, atol=0)
                checks[name] = "equals bare mean" + (" exactly" if np.array_equal(values, expected) else
                                                     f" (max |diff| {np.abs(values - expected).max():.2g})")
            else:
                np.testing.assert_array_equal(values, against())
                checks[name] = "identical to the threaded result"
            return result
        return first, run

    cases, firsts = {"bare fetch+decode+sum 2T": lambda: bare_mean(paths, blobs, 2)}, {}
    for key in ("frame", "auto", "blocks"):
        if key in a_cases:
            label, chunks = labels[key]
            firsts[label], cases[label] = checked(label, lambda c=chunks: cube_mean(paths, blobs, c))
    if "1T" in a_cases:
        cases["bare fetch+decode+sum 1T"] = lambda: bare_mean(paths, blobs, 1)
        firsts["Cube mean chunks=auto 1T"], cases["Cube mean chunks=auto 1T"] = checked(
            "Cube mean chunks=auto 1T", lambda: cube_mean(paths, blobs, "auto", threads=1))
    cluster = client = None
    if "cluster" in a_cases:
        label = "Cube mean chunks=auto LocalCluster 2x1 processes"
        try:
            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster, set_as_default=False)
            threaded = {}

            def reference():
                if "values" not in threaded:
                    threaded["values"] = cube_mean(paths, blobs, "auto").values
                return threaded["values"]

            firsts[label], cases[label] = checked(label, lambda: cube_mean(paths, blobs, "auto", scheduler=client),
                                                  against=reference)
            # The same work, its result summed where it is: what the workers cost without the gather.
            cases[KEPT] = lambda: cube_total(paths, blobs, client)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            errors[label] = e
    # The first (warm-up) run of each case is its check against the bare loop.
    warm = {name: firsts.get(name, run) for name, run in cases.items()}
    alive = {}
    for name, run in warm.items():
        try:
            run()
            alive[name] = cases[name]
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            errors[name] = e
    try:
        times = interleaved(alive, repeats, warmup=False)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        times = {}
        for name in alive:
            errors.setdefault(name, e)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def mbps(seconds):
        return f"{megabytes / seconds:.0f} MB/s"

    anchor = "bare fetch+decode+sum 2T"
    rows = [_row(times, errors, anchor, lambda s: speed_row(
        anchor, s, anchor, s, note=f"{mbps(s)}; {n} images of 2 x {size} x {size} uint16, {megabytes:.0f} MB"))]
    bare2 = times.get(anchor)
    for key in ("frame", "auto", "blocks"):
        if key not in a_cases:
            continue
        label, chunks = labels[key]
        try:
            layout = _chunk_text(paths, blobs, chunks)
        except Exception as e:  # noqa: BLE001
            layout = f"chunks unknown ({type(e).__name__})"
        target = 0.85 if key == "auto" else None
        rows.append(_row(times, errors, label, lambda s, label=label, target=target, layout=layout: speed_row(
            label, s, anchor, bare2, target, note=f"{mbps(s)}; {layout}; {checks.get(label, '')}")
            if bare2 else error_row(label, RuntimeError("anchor failed"))))
    if "1T" in a_cases:
        bare1 = times.get("bare fetch+decode+sum 1T")
        rows.append(_row(times, errors, "bare fetch+decode+sum 1T", lambda s: speed_row(
            "bare fetch+decode+sum 1T", s, anchor, bare2, note=mbps(s)) if bare2 else
            Row("bare fetch+decode+sum 1T", s * 1e3, "ms", note=mbps(s))))
        label = "Cube mean chunks=auto 1T"
        rows.append(_row(times, errors, label, lambda s: speed_row(
            label, s, "bare fetch+decode+sum 1T", bare1, note=f"{mbps(s)}; {checks.get(label, '')}")
            if bare1 else error_row(label, RuntimeError("anchor failed"))))
    if "cluster" in a_cases:
        label, auto = "Cube mean chunks=auto LocalCluster 2x1 processes", times.get("Cube mean chunks=auto 2T")
        rows.append(_row(times, errors, label, lambda s: time_row(
            label, s, "Cube mean chunks=auto 2T", auto, 1.3,
            note=f"{mbps(s)}; client.compute, result shipped back; {checks.get(label, '')}")
            if auto else error_row(label, RuntimeError("threaded auto failed or not run"))))
        rows.append(_row(times, errors, KEPT, lambda s: time_row(
            KEPT, s, "Cube mean chunks=auto 2T", auto,
            note=f"{mbps(s)}; mean().sum() computed on the workers: the result is not gathered")
            if auto else error_row(KEPT, RuntimeError("threaded auto failed or not run"))))
    return rows


KEPT = "Cube mean chunks=auto LocalCluster, result kept on the workers"


def cube_total(paths, blobs, client) -> float:
    from xarray_rumi import open_cube

    cube = open_cube(paths, blobs, crs=CRS, transform=TRANSFORM, chunks="auto")
    return float(client.compute(cube.band_data.mean("time").sum()).result())


# ----------------------------------------------------------------------------------------------- (b)

def full_read(root: str, size: int, repeats: int, raster=None) -> list[Row]:
    """(b): one image read whole: ``open_dataset(chunks="auto")`` / ``chunks={}`` vs lazy ``.values``."""
    import dask
    import xarray as xr
    from read import make_raster

    import xarray_rumi

    if raster is not None and raster.values.shape == (2, size, size):
        values, path, blob = raster.values, raster.rumi, raster.blob
    else:
        values = make_raster(2, size)
        path = os.path.join(root, f"dask-full-{size}.rumi")
        blob = xarray_rumi.write(path, values, tile_size=TILE, crs=CRS, transform=TRANSFORM)

    def read(chunks):
        def run():
            with dask.config.set(scheduler="threads", num_workers=2):
                ds = xr.open_dataset(path, engine="rumi", header=blob, crs=CRS, transform=TRANSFORM, chunks=chunks)
                return ds.band_data.values
        return run

    def checked(run):
        def first():
            np.testing.assert_array_equal(run(), values)
        return first

    def lazy_and_copy():
        # What a Dask compute adds to the lazy read at least: dask.array's finalize copies a
        # single-chunk result (and concatenating several chunks copies them too).
        return read(None)().copy()

    cases = {"lazy .values (no chunks)": read(None), "open_dataset chunks=auto .values": read("auto"),
             "open_dataset chunks={} .values": read({}), COPIED: lazy_and_copy}
    errors: dict = {}
    alive = {}
    for name, run in cases.items():
        try:
            checked(run)()
            alive[name] = run
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            errors[name] = e
    times = {}
    try:
        times = interleaved(alive, repeats, warmup=False)
    except Exception as e:  # noqa: BLE001
        for name in alive:
            errors.setdefault(name, e)
    megabytes = values.nbytes / 1e6
    anchor = "lazy .values (no chunks)"
    lazy = times.get(anchor)
    rows = [_row(times, errors, anchor, lambda s: speed_row(
        anchor, s, anchor, s, note=f"{megabytes / s:.0f} MB/s; 2 x {size} x {size} uint16"))]
    rows.append(_row(times, errors, COPIED, lambda s: speed_row(
        COPIED, s, anchor, lazy, note="the ceiling of any Dask compute of the image: one copy of the result")
        if lazy else error_row(COPIED, RuntimeError("anchor failed"))))
    for name, target in (("open_dataset chunks=auto .values", 0.95), ("open_dataset chunks={} .values", None)):
        try:
            ds = xr.open_dataset(path, engine="rumi", header=blob, crs=CRS, transform=TRANSFORM,
                                 chunks="auto" if "auto" in name else {})
            layout = f"{ds.band_data.data.npartitions} chunks of {ds.band_data.data.chunksize}"
        except Exception as e:  # noqa: BLE001
            layout = f"chunks unknown ({type(e).__name__})"
        rows.append(_row(times, errors, name, lambda s, name=name, target=target, layout=layout: speed_row(
            name, s, anchor, lazy, target, note=f"{megabytes / s:.0f} MB/s; {layout}; Dask threads 2")
            if lazy else error_row(name, RuntimeError("anchor failed"))))
    return rows


COPIED = "lazy .values + one copy of the result"


# ----------------------------------------------------------------------------------------------- (c)

#: The largest Cube of (c), run only when asked (``--large``, or RUMI_BENCH_LARGE=1 under suite.py): it
#: takes a few minutes, most of it writing its catalogs.
LARGE = 100_000
#: Targets for LARGE images: open + build the mean's graph, and the process's peak RSS.
LARGE_SECONDS, LARGE_RSS = 5.0, 400e6
VARIANTS = ("repeated", "distinct")


def write_many(root: str, count: int, side: int = 10980) -> tuple[list[str], bytes]:
    """One real 1 x side x side uint16 file (smooth content, quick to write) and ``count - 1`` symlinks to it."""
    import xarray_rumi

    directory = os.path.join(root, "dask-many")
    os.makedirs(directory, exist_ok=True)
    first = os.path.join(directory, "t000000.rumi")
    ramp = (np.arange(side, dtype=np.uint16) // 8)
    values = (ramp[:, None] + ramp[None, :])[None]  # uint16, no wrap: < 2 * 1373
    blob = xarray_rumi.write(first, values, tile_size=TILE, crs=CRS, transform=TRANSFORM)
    del values
    paths = [first]
    for i in range(1, count):
        path = os.path.join(directory, f"t{i:06d}.rumi")
        os.symlink(first, path)
        paths.append(path)
    return paths, blob


def distinct_blobs(blob: bytes, count: int, seed: int = 0) -> list[bytes]:
    """``count`` different blobs of ``blob``'s grid and count width: random frame sizes, count_min varying.

    As an archive of one tile gives: one grid, every image's frames of its
    own sizes.  Nothing is read at open, so they need not match the file.
    """
    from xarray_rumi.format.blob import Header, pack_residuals

    header = Header.from_bytes(blob)
    frames, bits = header.frame_count, header.count_bits
    rng = np.random.default_rng(seed)
    blobs = []
    for i in range(count):
        residuals = rng.integers(0, 1 << bits, frames, dtype=np.uint64)
        residuals[i % frames], residuals[(i + 1) % frames] = 0, (1 << bits) - 1  # canonical: true min, least width
        count_min = header.count_min + i % 97
        blobs.append(blob[:23] + count_min.to_bytes(4, "little") + blob[27:28] + pack_residuals(residuals, bits))
    return blobs


def _spec(root: str, name: str, **spec) -> str:
    path = os.path.join(root, f"{name}.spec.pickle")
    with open(path, "wb") as f:
        pickle.dump(spec, f)
    return path


def _child(mode: str, spec_path: str) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, spec_path],
                         capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"child {mode} exited {out.returncode}: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(lines[-1])


def many_counts(sizes: dict, large: bool) -> tuple[int, ...]:
    """The Cube sizes of (c): the scenario's count and ten times it (or ``dask_cubes``), and :data:`LARGE` when asked."""
    counts = tuple(sizes.get("dask_cubes") or (sizes["dask_cube"], 10 * sizes["dask_cube"]))
    return counts + (LARGE,) if large and LARGE not in counts else counts


def many_images(root: str, counts, runs: int) -> list[Row]:
    """(c): opening Cubes of large images from blobs alone, and from catalogs, in fresh processes.

    For each count, both variants: the same blob for every image (an
    archive's repeated grid) and a blob of its own for each; each in a fresh
    process that opens ``runs`` times (the median time; the peak RSS is the
    first open's).  Catalogs at the largest count only: what opening them
    adds to opening the same Cube from blobs.
    """
    try:
        start = time.perf_counter()
        paths, blob = write_many(root, max(counts))
        written = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return [error_row(f"write {max(counts)} images", e)]
    rows = []
    for count in counts:
        for variant in VARIANTS:
            try:
                blobs = [blob] * count if variant == "repeated" else distinct_blobs(blob, count)
                spec = _spec(root, f"many-{count}-{variant}", paths=paths[:count], blobs=blobs, runs=runs)
                rows += _cube_rows(count, variant, blobs, spec)
                if count == max(counts):
                    rows += _catalog_rows(root, count, variant, paths[:count], blobs)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                rows.append(error_row(f"{count:,} images, {variant} blobs", e))
    rows += _small_cube_rows(root, paths[:counts[0]], blob)
    rows.append(Row(f"(setup) write 1 file + {max(counts) - 1:,} symlinks", written * 1e3, "ms", note="not a measure"))
    return rows


def _targets(count: int, seconds: float, peak: float) -> tuple[tuple, tuple]:
    """``(anchor, ratio, target)`` of the time and of the peak RSS: bounds only at :data:`LARGE` images."""
    if count < LARGE:
        return ("", None, None), ("", None, None)
    return ("5 s", seconds / LARGE_SECONDS, 1.0), ("400 MB", peak / LARGE_RSS, 1.0)


def _cube_rows(count: int, variant: str, blobs, spec: str) -> list[Row]:
    t = _child("many-time", spec)
    blob_bytes = len(blobs[0]) if variant == "repeated" else sum(map(len, blobs))
    seconds = t["open_s"] + t["graph_s"]
    (anchor, ratio, target), (rss_anchor, rss_ratio, rss_target) = _targets(count, seconds, t["peak"])
    label = f"open_cube + mean() graph, {count:,} images, {variant} blobs"
    return [
        Row(label, seconds, "s", anchor, ratio, target, False,
            note=f"open {t['open_s']:.2f} s + graph {t['graph_s']:.2f} s, median of {t['runs']} in a fresh process "
                 f"(totals {', '.join(f'{v:.2f}' for v in t['totals'])} s; CPU {t['cpu_s']:.2f} s the first); "
                 f"{t['frames']:,} frames; chunks=auto, {t['chunks']:,} chunks {t['chunksize']}; "
                 f"{t['distinct']:,} distinct blobs, {blob_bytes / 1e6:.1f} MB held by the caller"),
        Row(f"peak RSS, {label}", t["peak"] / 1e6, "MB", rss_anchor, rss_ratio, rss_target, False,
            note=f"the process's VmHWM over the first open; {t['baseline'] / 1e6:.0f} MB before it (imports, the "
                 f"paths and blobs); {(t['peak'] - t['baseline']) / t['frames']:.1f} bytes a frame above that"),
    ]


def _catalog_rows(root: str, count: int, variant: str, paths, blobs) -> list[Row]:
    rows = []
    for kind in ("parquet", "stac-geoparquet"):
        catalog = write_catalog(root, kind, count, variant, paths, blobs)
        t = _child("catalog-time", _spec(root, f"catalog-{kind}-{count}-{variant}", catalog=catalog))
        seconds = t["open_s"] + t["graph_s"]
        (anchor, ratio, target), _ = _targets(count, seconds, t["peak"])
        rows.append(Row(f"open_collection({kind}) + mean() graph, {count:,} images, {variant} blobs", seconds, "s",
                        anchor, ratio, target, False,
                        note=f"open {t['open_s']:.2f} s + graph {t['graph_s']:.2f} s, chunks=auto, one Cube; reading "
                             f"the table alone {t['read_s']:.2f} s; peak RSS {t['peak'] / 1e6:.0f} MB; a fresh process"))
        rows.append(Row(f"open_catalog({kind}), {count:,} images, {variant} blobs", t["catalog_s"], "s",
                        note=f"every blob checked and image opened, {t['catalog_s'] / count * 1e6:.0f} us each; "
                             f"each Dataset built when first asked for (not here); after the collection, in the "
                             f"same process"))
    return rows


def write_catalog(root: str, kind: str, count: int, variant: str, paths, blobs) -> str:
    """A catalog of ``paths`` with ``blobs``: a rumi Parquet catalog or stac-geoparquet, as its writers make them."""
    import pandas as pd

    import xarray_rumi
    from xarray_rumi.dataset import catalog as catalog_module
    from xarray_rumi.stac.geoparquet import write_stac_geoparquet

    out = os.path.join(root, f"catalog-{kind}-{count}-{variant}.parquet")
    if kind == "parquet":
        row = catalog_module.build(paths[:1], os.path.join(root, "one.parquet")).iloc[0]
        table = pd.DataFrame({name: [row[name]] * count for name in catalog_module.COLUMNS})
        table["url"], table["header"] = list(paths), list(blobs)
        table["epsg"] = table["epsg"].astype("Int64")
        table.to_parquet(out, index=False)
        return out
    import base64
    import copy

    first = xarray_rumi.stac.item(paths[0], blobs[0], datetime="2024-01-01T00:00:00Z").to_dict(
        include_self_link=False)
    items = []
    for i, (path, blob) in enumerate(zip(paths, blobs)):
        item = copy.deepcopy(first)
        item["id"], item["properties"]["datetime"] = f"t{i:06d}", f"2024-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:" \
                                                                   f"{i % 60:02d}Z"
        item["assets"]["data"]["href"] = path
        item["assets"]["data"]["rumi:header"] = base64.b64encode(blob).decode()
        items.append(item)
    write_stac_geoparquet(items, out)
    return out


def _small_cube_rows(root: str, paths, blob: bytes) -> list[Row]:
    """The first count, repeated blob: what one chunk-reading task pickles to, and tracemalloc's peak a frame."""
    count = len(paths)
    spec = _spec(root, "many-task", paths=paths, blobs=[blob] * count, task=True, runs=1)
    rows = []
    try:
        t = _child("many-time", spec)
        if "task_bytes" in t:
            rows.append(Row("pickled chunk-reading task", t["task_bytes"], "bytes", "", None, None, False,
                            note=f"{count:,} images; pickle.dumps(one task) of layer {t['task_layer']!r}, the one "
                                 f"reading from the 'original-' array (or from nothing), only that layer "
                                 f"materialised; blob's bytes inside: {'YES' if t['task_has_blob'] else 'no'} "
                                 f"(target: no; blob {len(blob):,} B); the array it names by key pickles to "
                                 f"{t.get('source_bytes', '?')} B (blob's bytes inside: "
                                 f"{t.get('source_has_blob', '?')}), sent once per 'original-' layer, not per task: "
                                 f"{t.get('sources', '?')} such layers in the graph"))
        else:
            rows.append(error_row("pickled chunk-reading task", RuntimeError(t.get("task_error", "not found"))))
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        rows.append(error_row("pickled chunk-reading task", e))
    try:
        m = _child("many-memory", spec)
        per_frame = m["peak"] / m["frames"]
        rows.append(Row("tracemalloc peak, open + build", per_frame, "bytes/frame", "200 bytes/frame",
                        per_frame / 200, 1.0, False,
                        note=f"{count:,} images, repeated blob: peak {m['peak'] / 1e6:.1f} MB over {m['frames']:,} "
                             f"frames, first open in a fresh process; {m['retained'] / 1e6:.1f} MB still traced after"))
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        rows.append(error_row("tracemalloc peak, open + build", e))
    return rows


def _many_open(spec: dict):
    from xarray_rumi import open_cube

    start = time.perf_counter()
    cube = open_cube(spec["paths"], spec["blobs"], crs=CRS, transform=TRANSFORM, chunks="auto")
    opened = time.perf_counter()
    mean = cube.band_data.mean()
    built = time.perf_counter()
    return cube, mean, opened - start, built - opened


def _import_all() -> None:
    import dask.array  # noqa: F401
    import xarray  # noqa: F401

    import xarray_rumi  # noqa: F401
    from xarray_rumi.reading.open import open_image  # noqa: F401
    try:
        import rioxarray  # noqa: F401
    except ImportError:
        pass


def _frames(spec: dict) -> int:
    from xarray_rumi.reading.open import open_image

    image = open_image(spec["paths"][0], header=spec["blobs"][0], georeferencing=False)
    return image.grid.frame_count * len(spec["paths"])


def child_many_time(spec: dict) -> dict:
    """Open the Cube and build its mean's graph ``runs`` times: the peak RSS and CPU time are the first's."""
    from _peak_rss import current_rss, high_water_mark, reset_high_water_mark

    _import_all()
    frames = _frames(spec)
    gc.collect()
    reset_high_water_mark()
    baseline, cpu = current_rss(), time.process_time()
    opens, graphs, kept = [], [], None
    for run in range(spec["runs"]):
        kept = None
        gc.collect()
        kept = _many_open(spec)
        opens.append(kept[2])
        graphs.append(kept[3])
        if run == 0:
            cpu, peak = time.process_time() - cpu, high_water_mark()
    data = kept[0].band_data.data
    result = {"open_s": statistics.median(opens), "graph_s": statistics.median(graphs), "runs": spec["runs"],
              "totals": [o + g for o, g in zip(opens, graphs)], "cpu_s": cpu, "peak": peak, "baseline": baseline,
              "frames": frames, "chunks": int(data.npartitions), "chunksize": str(tuple(int(c) for c in data.chunksize)),
              "distinct": len(set(spec["blobs"]))}
    if spec.get("task"):
        try:
            result.update(_reading_task(data, spec["blobs"][0]))
        except Exception as e:  # noqa: BLE001
            result["task_error"] = f"{type(e).__name__}: {e}"
    return result


def child_catalog_time(spec: dict) -> dict:
    """open_collection of a catalog (one Cube) and its mean's graph; then reading the table alone, and open_catalog."""
    from _peak_rss import current_rss, high_water_mark, reset_high_water_mark

    import xarray_rumi
    from xarray_rumi.dataset import catalog as catalog_module

    _import_all()
    gc.collect()
    reset_high_water_mark()
    baseline = current_rss()
    start = time.perf_counter()
    tree = xarray_rumi.open_collection(spec["catalog"], chunks="auto")
    opened = time.perf_counter()
    [node] = tree.children.values()
    node.dataset.band_data.mean()
    built = time.perf_counter()
    peak = high_water_mark()
    del tree, node
    start_read = time.perf_counter()
    catalog_module.read(spec["catalog"])
    read = time.perf_counter() - start_read
    gc.collect()
    start_catalog = time.perf_counter()
    xarray_rumi.open_catalog(spec["catalog"])
    return {"open_s": opened - start, "graph_s": built - opened, "read_s": read,
            "catalog_s": time.perf_counter() - start_catalog, "peak": peak, "baseline": baseline}


def _reading_task(data, blob: bytes) -> dict:
    """The pickled size of one task of the layer that reads chunks.

    That layer is the one whose only dependencies are ``original-*`` layers
    (the wrapped array ``from_array`` keeps once, under its own key) or none.
    Only that layer is materialised, and only its first key's task pickled.
    """
    graph = data.__dask_graph__()
    layers, dependencies = graph.layers, graph.dependencies
    for name, layer in layers.items():
        if name.startswith("original-"):
            continue
        deps = dependencies.get(name, set())
        if all(d.startswith("original-") for d in deps):
            key = next(iter(layer.keys()))
            task = layer[key]
            pickled = pickle.dumps(task)
            found = {"task_layer": name.rsplit("-", 1)[0], "task_bytes": len(pickled),
                     "sources": sum(n.startswith("original-") for n in layers),
                     "task_has_blob": bool(len(blob) >= 16 and blob in pickled)}
            for dep in deps:
                source = layers[dep]
                value = source[next(iter(source.keys()))]
                data_pickled = pickle.dumps(value)
                found["source_bytes"] = len(data_pickled)
                found["source_has_blob"] = "yes" if blob in data_pickled else "no"
                break
            return found
    raise LookupError("no layer reads from an original- layer or from nothing")


def child_many_memory(spec: dict) -> dict:
    _import_all()
    frames = _frames(spec)
    gc.collect()
    tracemalloc.start()
    kept = _many_open(spec)
    peak = tracemalloc.get_traced_memory()[1]
    retained = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return {"peak": peak, "retained": retained, "frames": frames}


# ----------------------------------------------------------------------------------------------- (d)

def peak_rss(root: str, paths, blobs) -> list[Row]:
    """(d): peak RSS of the Cube mean (``chunks="auto"``, 2 threads) in a fresh process."""
    try:
        m = _child("rss", _spec(root, "rss", paths=paths, blobs=blobs))
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return [error_row("peak RSS, Cube mean chunks=auto 2T", e)]
    above = m["peak"] - m["baseline"]
    in_flight = 2 * m["largest_chunk"]
    note = (f"baseline RSS {m['baseline'] / 1e6:.0f} MB; {m['chunks']} chunks, largest {m['largest_chunk'] / 1e6:.1f}"
            f" MB; Cube {m['total'] / 1e6:.0f} MB; result {m['result'] / 1e6:.0f} MB (float64)")
    return [
        Row("peak RSS, Cube mean chunks=auto 2T", above / 1e6, "MB above baseline", "2 x largest chunk",
            above / in_flight, None, False, note=note),
        Row("peak RSS, Cube mean chunks=auto 2T", above / 1e6, "MB above baseline", "Cube size", above / m["total"],
            None, False, note="fresh process; VmHWM reset just before the compute"),
    ]


def child_rss(spec: dict) -> dict:
    _import_all()
    from _peak_rss import current_rss, high_water_mark, reset_high_water_mark

    from xarray_rumi import open_cube

    cube = open_cube(spec["paths"], spec["blobs"], crs=CRS, transform=TRANSFORM, chunks="auto")
    data = cube.band_data.data
    largest = max(int(np.prod(s)) for s in _block_shapes(data)) * data.dtype.itemsize
    mean = cube.band_data.mean("time")
    gc.collect()
    reset_high_water_mark()
    baseline = current_rss()
    result = mean.compute(scheduler="threads", num_workers=2)
    peak = high_water_mark()
    return {"baseline": baseline, "peak": peak, "largest_chunk": largest, "total": int(data.nbytes),
            "chunks": int(data.npartitions), "result": int(result.nbytes)}


# -------------------------------------------------------------------------------------------- scenario

def dask_at_scale(root: str, sizes: dict, raster=None, parts=PARTS, a_cases=A_CASES, large=None) -> list[Row]:
    """Scenario 8: (a) Cube mean, (b) full read, (c) Cubes of 1,000 to 100,000 large images from blobs, (d) peak RSS.

    ``large``: include :data:`LARGE` images in (c); ``None`` reads RUMI_BENCH_LARGE=1 from the environment
    (how ``suite.py`` asks for it).
    """
    if large is None:
        large = os.environ.get("RUMI_BENCH_LARGE") == "1"
    rows: list[Row] = []
    repeats = sizes["dask_repeats"]
    paths = blobs = None
    if "a" in parts or "d" in parts:
        try:
            paths, blobs = write_cube(root, sizes["dask_images"], sizes["dask_size"])
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rows.append(error_row("(a) write the Cube's images", e))
    if "a" in parts and paths:
        try:
            rows += cube_reduction(paths, blobs, sizes["dask_size"], repeats, a_cases)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rows.append(error_row("(a) Cube mean over time", e))
    if "b" in parts:
        try:
            rows += full_read(root, sizes["size"], repeats, raster)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rows.append(error_row("(b) full read", e))
    if "c" in parts:
        rows += many_images(root, many_counts(sizes, large), sizes.get("dask_runs", 3))
    if "d" in parts and paths:
        rows += peak_rss(root, paths, blobs)
    return rows


QUICK = dict(size=2048, dask_images=8, dask_size=1024, dask_cube=200, dask_repeats=3, dask_runs=3)
FULL = dict(size=4096, dask_images=24, dask_size=2048, dask_cube=1000, dask_repeats=3, dask_runs=3)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--a-cases", nargs="+", choices=A_CASES, default=list(A_CASES))
    parser.add_argument("--large", action="store_true", help=f"(c) also at {LARGE:,} images (a few minutes)")
    parser.add_argument("--counts", type=int, nargs="+", help="(c) at these counts instead")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.child:
        mode, spec_path = args.child
        with open(spec_path, "rb") as f:
            spec = pickle.load(f)
        run = {"many-time": child_many_time, "many-memory": child_many_memory, "rss": child_rss,
               "catalog-time": child_catalog_time}[mode]
        print(json.dumps(run(spec)))
        return
    from _report import environment, text_table

    import xarray_rumi

    print("\n".join(environment()))
    print(f"xarray_rumi from {xarray_rumi.__file__}")
    sizes = QUICK if args.quick else FULL
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rumi-dask-") as root:
        if args.counts:
            sizes = {**sizes, "dask_cubes": tuple(args.counts)}
        rows = dask_at_scale(root, sizes, parts=args.parts, a_cases=args.a_cases, large=args.large or None)
    print(f"\n## 8. Dask at scale  [{time.perf_counter() - start:.0f} s]\n{text_table(rows)}", flush=True)


if __name__ == "__main__":
    main()
