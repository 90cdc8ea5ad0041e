"""Training chips: random 256 px windows of random images, rumi beside COG twins read by rasterio.

Run from the repository root::

    python ci/benchmarks/chips.py            # 4 images of 4 x 4096 x 4096 uint16, 512 px tiles: ~8 minutes on 2 cores
    python ci/benchmarks/chips.py --quick    # 2 images of 2048 px, fewer windows and rounds: ~3 minutes
    python ci/benchmarks/chips.py --only batches [--quick] [--latency 50]   # table 3 alone: ~2-4 minutes
    python ci/benchmarks/chips.py --keep DIR ...   # images written into DIR once, reused by later runs

The images are written as rumi (``compression="auto"``, 512 px tile frames,
one band each) and as COG twins (rasterio's COG driver: ZSTD, horizontal
predictor, 512 px blocks, pixel-interleaved as that driver writes, no
overviews).  Every round draws fresh chips (a random image, a random place)
and runs every case on the same chips, each case first in turn, so machine
noise and warm caches favour none.  Two tables:

1. **Window latency** (local files): the median time of one window over the
   round's windows, for each way of reading it, against *decoding the frames
   it touches* (fetch them in one batch, decode each into memory of its own on
   two threads: scenario 2's floor in ``suite.py``).  The stricter floor
   decodes each into a buffer its thread reuses.
2. **Chips per second**, locally and over a loopback HTTP server (the tests'
   ``RangeServer`` in a process of its own): the engine's window (no Dask), a
   Cube's window (Dask, and ``open_cube(...)`` without Dask), the cookbook's
   ``RumiChips`` Dataset on two worker processes, xbatcher batches of a Cube;
   and the same chips from the COG twins through rasterio windows, in one
   process (``GDAL_NUM_THREADS=ALL_CPUS``) and on two worker processes
   (GDAL's default, one thread each).  GDAL's block cache is off
   (``GDAL_CACHEMAX=0``) and so are its other caches (``VSI_CACHE``, the
   /vsicurl/ cache), as rumi caches nothing.  Worker processes are spawned
   and have each opened every image once before the clock starts: what is
   timed is what an epoch costs, not starting Python.

3. **Training batches** (issue 29): batches of 64 chips of all bands from 16
   images (hard links to the images written: files, URLs and blobs of their
   own), each batch read by ``xarray_rumi.read_windows`` beside *decoding
   exactly the distinct frames the batch touches on every core* (each image's
   frames in one fetch, each decoded into its thread's buffer: the limit),
   today's loop of one lazy window at a time, and the COG twins' chips by
   rasterio windows on as many threads as cores (each thread its own
   handles, GDAL one thread each); the same over the loopback server waiting
   ``--latency`` ms before each answer.  Each case runs on the same batches,
   each first in turn; the ratios are taken batch by batch.  The remote
   batch is also set against the longer of fetching its frames alone and
   the local batch: 1 when fetching and decoding overlap fully, near 2 when
   one waits for the other.  More rows: the Python a chip costs (planning
   and placing 4096 chips of 16 px with fetching and decoding stubbed out),
   and the peak RSS growth of a fresh process reading one batch, locally and
   over the server, against the result plus its touched frames decoded once.

Values are medians over rounds, with the range of the rounds; ratios are time
multiples of the decode floor over the same chips (smaller is better), or
where a row says "speed-up", how many times longer the case takes than the
batch reader (bigger is better for the reader).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import multiprocessing
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))  # doc_blocks, servers
sys.path.insert(0, str(ROOT))  # the package of this checkout, whichever one is installed

import xarray_rumi  # noqa: E402
from _report import Row, environment, text_table  # noqa: E402
from read import make_raster  # noqa: E402
from xarray_rumi.frames.codec import decode_frame  # noqa: E402
from xarray_rumi.runtime.scratch import FRAME, scratch  # noqa: E402

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
CHIP = 256
#: GDAL with every cache off, as rumi caches nothing; one process's reads decode blocks on every core.
GDAL_UNCACHED = {"GDAL_CACHEMAX": 0, "VSI_CACHE": False, "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR"}


# -- the images -----------------------------------------------------------------


def write_images(root: str, count: int, bands: int, size: int, tile: int) -> list[tuple[str, str]]:
    """``count`` images as rumi and as COG twins, ``(rumi name, COG name)`` each; each pair checked once."""
    import rasterio
    from affine import Affine

    names = []
    for i in range(count):
        values = make_raster(bands, size, seed=i)
        rumi, cog = f"scene-{i}.rumi", f"scene-{i}.tif"
        blob = xarray_rumi.write(os.path.join(root, rumi), values, tile_size=tile, crs=32618, transform=TRANSFORM)
        with open(os.path.join(root, rumi + ".header"), "wb") as f:
            f.write(blob)
        with rasterio.open(os.path.join(root, cog), "w", driver="COG", width=size, height=size, count=bands,
                           dtype=values.dtype, crs="EPSG:32618", transform=Affine(*TRANSFORM), blocksize=tile,
                           compress="zstd", predictor=2, overviews="none") as dst:
            dst.write(values)
        # A fast wrong read is no result: one window of each against the values written.
        window = (slice(None), slice(size // 3, size // 3 + CHIP), slice(size // 5, size // 5 + CHIP))
        np.testing.assert_array_equal(xarray_rumi.open_image(os.path.join(root, rumi), blob).read(*window),
                                      values[window])
        with rasterio.open(os.path.join(root, cog)) as src:
            np.testing.assert_array_equal(src.read(window=_window(size // 3, size // 5)), values[window])
        names.append((rumi, cog))
    return names


def _window(y: int, x: int):
    from rasterio.windows import Window

    return Window(x, y, CHIP, CHIP)


def stac_items(root: str, names, location: str):
    """STAC Items of the rumi files in ``root``, their assets at ``location`` (``root`` or its URL)."""
    items = []
    for day, (rumi, _) in enumerate(names, start=1):
        blob = pathlib.Path(root, rumi + ".header").read_bytes()
        items.append(xarray_rumi.stac.item(os.path.join(root, rumi), blob, href=f"{location}/{rumi}",
                                           datetime=f"2024-05-{day:02d}T10:00:00Z"))
    return items


def cookbook_chips_module(directory: str):
    """The cookbook's ``rumi_chips`` module (docs/cookbook.md), written to ``directory`` and imported."""
    from doc_blocks import python_blocks

    (source,) = [block for block in python_blocks("docs/cookbook.md") if block.startswith("# rumi_chips.py\n")]
    pathlib.Path(directory, "rumi_chips.py").write_text(source)
    sys.path.insert(0, directory)
    import rumi_chips

    return rumi_chips


#: The process serving each URL: its CPU time is part of what a remote read costs these shared cores.
SERVER_PIDS: dict[str, int] = {}


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) of this process, or of process ``pid`` (Linux's /proc)."""
    if pid is None:
        times = os.times()
        return times.user + times.system
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def http_server(directory: str, latency: float = 0.0):
    """The tests' Range HTTP server for ``directory`` in a process of its own, waiting ``latency`` s; its URL.

    The latency is waited in the request's own thread once the request is
    read, so concurrent requests wait it together, as an object store's do.
    """
    # A listen backlog of 128, not http.server's 5: readers open a connection per range at once, and a
    # connection refused for a full backlog is retried by the kernel a second later.
    code = ("import sys, time, http.server; http.server.ThreadingHTTPServer.request_queue_size = 128; "
            "parse = http.server.BaseHTTPRequestHandler.parse_request; latency = float(sys.argv[3]); "
            "http.server.BaseHTTPRequestHandler.parse_request = lambda self: (time.sleep(latency), parse(self))[1]; "
            "sys.path.insert(0, sys.argv[1]); from servers import RangeServer; "
            "server = RangeServer(sys.argv[2]).__enter__(); print(server.url, flush=True); sys.stdin.read()")
    process = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "tests"), directory, str(latency)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()
        SERVER_PIDS[url] = process.pid
        yield url
    finally:
        process.stdin.close()
        process.wait(timeout=30)


# -- ways of reading one chip ------------------------------------------------------


class Floor:
    """Decoding the frames a chip touches: one batched fetch, each frame decoded on a pool of two threads."""

    def __init__(self, images, *, into_buffer: bool):
        self.images, self.into_buffer = images, into_buffer
        self.pool = ThreadPoolExecutor(2)

    def __call__(self, image: int, y: int, x: int) -> None:
        image = self.images[image]
        grid, sample = image.grid, image.sample_type
        touched = grid.frames_touching(range(grid.samples_per_pixel), range(y, y + CHIP), range(x, x + CHIP))
        starts, stops = image.header.ranges(touched)
        payloads = image.source.read_many(starts, stops)

        def decode(k: int, payload: bytes) -> None:
            shape = grid.frame_shape(k)
            decode_frame(payload, sample, shape, out=scratch(FRAME, shape, sample.dtype) if self.into_buffer else None)

        list(self.pool.map(decode, touched.tolist(), payloads))


class Readers:
    """Every way of reading a chip of the images at one location (a directory or a URL)."""

    def __init__(self, root: str, names, location: str):
        import rasterio

        self.items = stac_items(root, names, location)
        recorded = [(i.assets["data"].href, base64.b64decode(i.assets["data"].extra_fields["rumi:header"]))
                    for i in self.items]
        self.images = [xarray_rumi.open_image(href, blob, georeferencing=False) for href, blob in recorded]
        self.datasets = [xr.open_dataset(href, engine="rumi", header=blob, georeferencing=False)
                         for href, blob in recorded]
        self.backend_arrays = [_backend_array(image) for image in self.images]
        self.cubes = {str(chunks): xarray_rumi.open_cube(self.items, chunks=chunks) for chunks in ({}, "auto", None)}
        self.cog_paths = [f"{location}/{cog}" for _, cog in names]
        self.gdal_uncached = {**GDAL_UNCACHED, **({"CPL_VSIL_CURL_NON_CACHED": f"/vsicurl/{location}"}
                                                  if location.startswith("http") else {})}
        # Entered for as long as the files are open: GDAL's block cache is off for every read here.
        self.gdal = rasterio.Env(**self.gdal_uncached, GDAL_NUM_THREADS="ALL_CPUS")
        self.gdal.__enter__()
        self.cogs = [rasterio.open(path) for path in self.cog_paths]
        self.floor = Floor(self.images, into_buffer=False)
        self.floor_into_buffer = Floor(self.images, into_buffer=True)

    def window_cases(self) -> dict:
        """``name -> read(image, y, x)``."""
        band_data = [ds.band_data for ds in self.datasets]
        return {
            "decode touched frames": self.floor,
            "decode touched frames into a reused buffer": self.floor_into_buffer,
            "RumiImage.read_window": lambda i, y, x: self.images[i].read(rows=slice(y, y + CHIP),
                                                                          cols=slice(x, x + CHIP)),
            "RumiBackendArray window": lambda i, y, x: self.backend_arrays[i](y, x),
            "lazy window through xarray": lambda i, y, x: band_data[i][:, y:y + CHIP, x:x + CHIP].values,
            "the same, cut frames into fresh memory (before ae3280f)": lambda i, y, x: _into_fresh_memory(
                lambda: band_data[i][:, y:y + CHIP, x:x + CHIP].values),
            "Cube array without Dask": lambda i, y, x: self.cubes["None"].band_data[
                i, :, y:y + CHIP, x:x + CHIP].values,
            "Cube window, Dask chunks={}": lambda i, y, x: self.cubes["{}"].band_data[
                i, :, y:y + CHIP, x:x + CHIP].values,
            "Cube window, Dask chunks='auto'": lambda i, y, x: self.cubes["auto"].band_data[
                i, :, y:y + CHIP, x:x + CHIP].values,
            "COG window, rasterio": self.cog_window,
        }

    def cog_window(self, i: int, y: int, x: int) -> np.ndarray:
        return self.cogs[i].read(window=_window(y, x))

    def close(self) -> None:
        for cog in self.cogs:
            cog.close()
        self.gdal.__exit__(None, None, None)
        self.floor.pool.shutdown()
        self.floor_into_buffer.pool.shutdown()


def _into_fresh_memory(read):
    """``read()`` with every frame a window cuts decoded into fresh memory, as the reader did before ae3280f."""
    import xarray_rumi.reading.image as reader

    kept = reader.scratch
    reader.scratch = lambda purpose, shape, dtype: np.empty(shape, dtype)
    try:
        return read()
    finally:
        reader.scratch = kept


def _backend_array(image):
    from xarray.core.indexing import BasicIndexer

    from xarray_rumi.dataset.engine import RumiBackendArray

    array = RumiBackendArray(image)
    return lambda y, x: array[BasicIndexer((slice(None), slice(y, y + CHIP), slice(x, x + CHIP)))]


# -- COG chips on worker processes: the cookbook's Dataset, for rasterio ------------


class CogChips:
    """``RumiChips``'s twin for COGs: paths and places, each worker opening a file on its first chip."""

    def __init__(self, paths, places, env: dict):
        self.paths, self.places, self.env = paths, places, env
        self._opened = {}

    def __len__(self):
        return len(self.places)

    def __getitem__(self, index):
        import rasterio

        image, y, x = self.places[index]
        with rasterio.Env(**self.env):
            if image not in self._opened:
                self._opened[image] = rasterio.open(self.paths[image])
            return self._opened[image].read(window=_window(y, x))

    def __getstate__(self):
        return {**self.__dict__, "_opened": {}}


_worker_dataset = None


def _start_worker(dataset) -> None:
    """Receive the dataset and open each of its images with one chip: what a worker does once, not per chip."""
    global _worker_dataset
    _worker_dataset = dataset
    first_of_each = {image: index for index, (image, _, _) in reversed(list(enumerate(dataset.places)))}
    for index in first_of_each.values():
        dataset[index]


def _chip(index: int):
    try:
        return _worker_dataset[index]
    except Exception as exc:
        # As a plain error: some (GDAL's) do not unpickle in the parent, which would then wait forever.
        raise RuntimeError(f"chip {index}: {exc!r}") from None


def on_workers(dataset, processes: int = 2) -> float:
    """Seconds to read every chip of ``dataset`` on ``processes`` spawned workers, started before the clock.

    Spawned, for rumi and GDAL alike: a worker forked from this process
    hangs in GDAL, which this process has used (GDAL's own advice is not to
    fork after using it); the cookbook's test draws rumi chips on forked
    workers too, and the work per chip is the same.
    """
    pool = multiprocessing.get_context("spawn").Pool(processes, initializer=_start_worker, initargs=(dataset,))
    try:
        _every_worker_started(pool, processes)
        start = time.perf_counter()
        pool.map(_chip, range(len(dataset)), chunksize=4)
        return time.perf_counter() - start
    finally:
        pool.close()
        pool.join()  # the workers are gone before the next case starts


def _every_worker_started(pool, processes: int) -> None:
    """Return once each of the pool's workers has run its initializer (each takes one of these tasks)."""
    with multiprocessing.get_context("spawn").Manager() as manager:
        pool.map(_wait_at, [manager.Barrier(processes)] * processes, chunksize=1)


def _wait_at(barrier) -> None:
    barrier.wait(timeout=120)


# -- the two tables ----------------------------------------------------------------


def random_chips(rng, images: int, size: int, count: int) -> list[tuple[int, int, int]]:
    return [(int(i), int(y), int(x)) for i, y, x in
            zip(rng.integers(0, images, count), *rng.integers(0, size - CHIP + 1, (2, count)))]


def window_latency(readers: Readers, size: int, windows: int, rounds: int) -> list[Row]:
    """Table 1: per round, the median of each case over fresh windows, cases alternated window by window."""
    cases = readers.window_cases()
    rng = np.random.default_rng(1)
    for run in cases.values():  # warm up: modules, pools, the blob checks
        run(0, 0, 0)
    medians = {name: [] for name in cases}
    order = list(cases)
    for _ in range(rounds):
        seconds = {name: [] for name in cases}
        for chip in random_chips(rng, len(readers.images), size, windows):
            order = order[1:] + order[:1]  # each case first in turn: none always reads what another just read
            for name in order:
                start = time.perf_counter()
                cases[name](*chip)
                seconds[name].append(time.perf_counter() - start)
        for name in cases:
            medians[name].append(statistics.median(seconds[name]))
    anchor = "decode touched frames"
    targets = {"lazy window through xarray": 1.1, "Cube array without Dask": 1.1}
    return [_time_row(name, medians[name], anchor, medians[anchor], targets.get(name)) for name in cases]


def _time_row(name: str, times: list[float], anchor: str, anchor_times: list[float], target=None) -> Row:
    """The median over rounds of a time and of its multiple of the anchor's, with their ranges."""
    ratios = [t / a for t, a in zip(times, anchor_times)]
    return Row(name, statistics.median(times) * 1e3, "ms", anchor, statistics.median(ratios), target, False,
               f"{min(times) * 1e3:.2f}-{max(times) * 1e3:.2f} ms, ratio {min(ratios):.2f}-{max(ratios):.2f}")


def throughput(readers: Readers, rumi_chips, size: int, chips: int, rounds: int, where: str) -> list[Row]:
    """Table 2 for one location: chips per second of each case over the same fresh chips each round.

    The cases run one after the other, each first in turn from round to
    round; xbatcher's chips are its own (whole patches of its grid, every
    image at one place), with a floor of their own.
    """
    import xbatcher

    cube, images = readers.cubes["auto"], len(readers.images)
    patches = xbatcher.BatchGenerator(cube.band_data, input_dims={"band": cube.sizes["band"], "y": CHIP, "x": CHIP})
    per_row = size // CHIP
    corners = [(float(patches[k].y[0]), float(patches[k].x[0])) for k in (0, 1)]
    # xbatcher's patches lie row by row: patch k is at (k // per_row, k % per_row) x CHIP px
    assert len(patches) == per_row ** 2 and corners == [(float(cube.y[0]), float(cube.x[0])),
                                                        (float(cube.y[0]), float(cube.x[CHIP]))]
    windows = readers.window_cases()
    floor = windows["decode touched frames"]
    rng = np.random.default_rng(2)
    seconds: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    order = 0
    for _ in range(rounds):
        dataset = rumi_chips.RumiChips(readers.items, size=CHIP, count=chips, seed=int(rng.integers(1 << 30)))
        drawn = dataset.places
        batches = rng.choice(len(patches), max(1, chips // images), replace=False).tolist()
        patch_chips = [(i, CHIP * (b // per_row), CHIP * (b % per_row)) for b in batches for i in range(images)]
        cog_chips = CogChips(readers.cog_paths, drawn, {**readers.gdal_uncached, "GDAL_NUM_THREADS": 1})
        cases = {
            "decode touched frames": (_each, floor, drawn),
            "engine window, no Dask": (_each, windows["lazy window through xarray"], drawn),
            "Cube array without Dask": (_each, windows["Cube array without Dask"], drawn),
            "Cube window, Dask chunks='auto'": (_each, windows["Cube window, Dask chunks='auto'"], drawn),
            "RumiChips Dataset, 2 worker processes": (on_workers, dataset),
            "decode touched frames (xbatcher's patches)": (_each, floor, patch_chips),
            "xbatcher over the Cube (Dask 'auto')": (_each, lambda b: patches[b], [(b,) for b in batches]),
            "COG, rasterio windows": (_each, readers.cog_window, drawn),
            "COG, 2 worker processes": (on_workers, cog_chips),
        }
        names = list(cases)
        order += 1
        for name in names[order % len(names):] + names[:order % len(names)]:
            run, *args = cases[name]
            start = time.perf_counter()
            elapsed = run(*args)  # the pools time themselves, without starting their workers
            seconds.setdefault(name, []).append(elapsed if run is on_workers else time.perf_counter() - start)
            counts[name] = len(patch_chips) if "xbatcher" in name else chips
    rows = []
    for name in names:  # in the order the cases are defined
        times = seconds[name]
        anchor = "decode touched frames (xbatcher's patches)" if "xbatcher" in name else "decode touched frames"
        rates = [counts[name] / t for t in times]
        ratios = [t / a for t, a in zip(times, seconds[anchor])]
        rows.append(Row(f"{name} ({where})", statistics.median(rates), "chips/s", anchor, statistics.median(ratios),
                        None, False, f"{min(rates):.0f}-{max(rates):.0f} chips/s, ratio {min(ratios):.2f}-"
                                     f"{max(ratios):.2f}"))
    return rows


def _each(read, chips) -> None:
    for chip in chips:
        read(*chip)


# -- table 3: training batches -------------------------------------------------------

#: A batch as the issue sets it: 64 chips of every band, from 16 images.
BATCH_CHIPS, BATCH_IMAGES = 64, 16


def batch_images(root: str, names, count: int) -> list[tuple[str, str]]:
    """``count`` rumi files and COG twins for the batches, each a hard link to one of those written.

    Files of their own (own URLs, own blobs checked), with the bytes of the
    few written: decoding costs what it costs for distinct files, and the
    page cache holds the written ones, as it would after a first epoch.
    """
    linked = []
    for j in range(count):
        pair = []
        for name in names[j % len(names)]:
            target = os.path.join(root, f"batch-{j}{os.path.splitext(name)[1]}")
            if not os.path.exists(target):
                os.link(os.path.join(root, name), target)
            pair.append(os.path.basename(target))
        header = os.path.join(root, pair[0] + ".header")
        if not os.path.exists(header):
            os.link(os.path.join(root, names[j % len(names)][0] + ".header"), header)
        linked.append(tuple(pair))
    return linked


class BatchCases:
    """Every way of reading a batch of chips ``(image, y, x)`` of the images at ``location``."""

    def __init__(self, root: str, names, location: str):
        blobs = [pathlib.Path(root, rumi + ".header").read_bytes() for rumi, _ in names]
        self.images = [xarray_rumi.open_image(f"{location}/{rumi}", blob, georeferencing=False)
                       for (rumi, _), blob in zip(names, blobs)]
        self.band_data = [xr.open_dataset(f"{location}/{rumi}", engine="rumi", header=blob,
                                          georeferencing=False).band_data for (rumi, _), blob in zip(names, blobs)]
        self.cog_paths = [f"{location}/{cog}" for _, cog in names]
        self.gdal = {**GDAL_UNCACHED, "GDAL_NUM_THREADS": 1,
                     **({"CPL_VSIL_CURL_NON_CACHED": f"/vsicurl/{location}"} if location.startswith("http") else {})}
        self.threads = os.cpu_count() or 1
        self.pool = ThreadPoolExecutor(self.threads)
        self.opened = threading.local()

    def pairs(self, chips):
        return [(self.images[i], (y, x, CHIP, CHIP)) for i, y, x in chips]

    def batch(self, chips) -> np.ndarray:
        return xarray_rumi.read_windows(self.pairs(chips))

    def loop(self, chips) -> None:
        """Today's loop: one chip at a time, a lazy window of the engine each (the cookbook's Dataset did this)."""
        for i, y, x in chips:
            self.band_data[i][:, y:y + CHIP, x:x + CHIP].values

    def floor(self, chips) -> None:
        """Decoding exactly the distinct frames the batch touches on every core: each image's in one fetch."""
        work = []
        for i, frames in self.touched_frames(chips).items():
            image = self.images[i]
            payloads = image.source.read_many(*image.header.ranges(frames))
            work += [(image, k, payload) for k, payload in zip(frames, payloads)]
        list(self.pool.map(_decode_into_buffer, work))

    def touched_frames(self, chips) -> dict[int, list[int]]:
        """The distinct frames the chips touch, image by image."""
        touched: dict[int, set] = {}
        for i, y, x in chips:
            grid = self.images[i].grid
            touched.setdefault(i, set()).update(
                grid.frames_touching(range(grid.samples_per_pixel), range(y, y + CHIP), range(x, x + CHIP)).tolist())
        return {i: sorted(frames) for i, frames in touched.items()}

    def fetch_only(self, chips) -> None:
        """Fetching the distinct frames the batch touches, each image's in one call, all at once: no decoding."""
        touched = self.touched_frames(chips)
        with ThreadPoolExecutor(len(touched)) as fetchers:
            list(fetchers.map(lambda i: self.images[i].source.read_many(*self.images[i].header.ranges(touched[i])),
                              touched))

    def cog(self, chips) -> list[np.ndarray]:
        """The COG twins' chips by rasterio windows, on as many threads as cores, each thread its own handles."""
        return list(self.pool.map(self._cog_chip, chips))

    def _cog_chip(self, chip) -> np.ndarray:
        import rasterio

        i, y, x = chip
        opened = self.opened.__dict__.setdefault("files", {})
        with rasterio.Env(**self.gdal):  # GDAL's options hold per thread
            if i not in opened:
                opened[i] = rasterio.open(self.cog_paths[i])
            return opened[i].read(window=_window(y, x))

    def close(self) -> None:
        def close_mine(_):
            for dataset in self.opened.__dict__.get("files", {}).values():
                dataset.close()

        list(self.pool.map(close_mine, range(self.threads)))
        self.pool.shutdown()


def _decode_into_buffer(work) -> None:
    image, k, payload = work
    shape = image.grid.frame_shape(k)
    decode_frame(payload, image.sample_type, shape, out=scratch(FRAME, shape, image.sample_type.dtype))


def training_batches(root: str, names, size: int, rounds: int, latency_ms: float) -> list[Row]:
    """Table 3: batches of 64 chips from 16 images, locally and over a loopback server with ``latency_ms``."""
    linked = batch_images(root, names, BATCH_IMAGES)
    rng = np.random.default_rng(3)
    batches = [random_chips(rng, BATCH_IMAGES, size, BATCH_CHIPS) for _ in range(rounds)]
    local = BatchCases(root, linked, root)
    for chip, (image, window) in zip(batches[0], local.pairs(batches[0])):  # a fast wrong read is no result
        row, col, height, width = window
        np.testing.assert_array_equal(local.batch([chip])[0],
                                      image.read(rows=slice(row, row + height), cols=slice(col, col + width)))
    np.testing.assert_array_equal(local.batch(batches[0]), np.stack(local.cog(batches[0])))
    cases = {"decode the distinct touched frames": local.floor, "read_windows": local.batch,
             "one chip at a time": local.loop, "COG twins, rasterio windows": local.cog}
    # local and remote cases take turns in one rotation, so the remote batch is set against local batches
    # read under the same load
    with http_server(root, latency=latency_ms / 1e3) as url:
        remote = BatchCases(root, linked, url)
        cases.update({f"fetch the distinct touched frames, HTTP {latency_ms:g} ms": remote.fetch_only,
                      f"read_windows, HTTP {latency_ms:g} ms": remote.batch,
                      f"one chip at a time, HTTP {latency_ms:g} ms": remote.loop,
                      f"COG twins, rasterio windows, HTTP {latency_ms:g} ms": remote.cog})
        seconds, cpu = _rotated(cases, batches, SERVER_PIDS[url])
        remote.close()
        remote_memory = batch_memory(root, linked, size, url, f", HTTP {latency_ms:g} ms")
    local.close()
    seconds["python cost per chip"] = python_cost_per_chip(local, size, rounds)
    return [*batch_rows(seconds, latency_ms), *cpu_rows(seconds, cpu, latency_ms), batch_memory(root, linked, size),
            remote_memory]


def _rotated(cases: dict, batches, server: int) -> tuple[dict[str, list[float]], dict[str, list[tuple]]]:
    """Seconds of each case on each batch, each case first in turn; a warm-up batch first (opens, blob checks).

    Also each case's CPU seconds on each batch: ``(this process, the server's process)``.
    """
    for run in cases.values():
        run(batches[0])
    seconds = {name: [] for name in cases}
    cpu = {name: [] for name in cases}
    names = list(cases)
    for turn, chips in enumerate(batches):
        for name in names[turn % len(names):] + names[:turn % len(names)]:
            mine, theirs = cpu_seconds(), cpu_seconds(server)
            start = time.perf_counter()
            cases[name](chips)
            seconds[name].append(time.perf_counter() - start)
            cpu[name].append((cpu_seconds() - mine, cpu_seconds(server) - theirs))
    return seconds, cpu


def python_cost_per_chip(cases: BatchCases, size: int, rounds: int, chips: int = 4096, chip: int = 16) -> list[float]:
    """Seconds a chip of read_windows's planning and placing over ``chips`` tiny chips, fetching and decoding stubbed.

    The images' frames are neither read nor decoded (a fetch returns empty
    bytes, a decode hands back its buffer): what is left is the Python the
    batch runs per chip.
    """
    from xarray_rumi.reading.image import RumiImage

    rng = np.random.default_rng(4)
    fetch, decode = RumiImage.fetch, RumiImage.decode
    RumiImage.fetch = lambda self, starts, stops, **options: [b""] * len(starts)
    RumiImage.decode = lambda self, k, payload, out=None: out if out is not None else scratch(
        FRAME, self.grid.frame_shape(k), self.sample_type.dtype)
    try:
        per_chip = []
        for _ in range(rounds):
            pairs = [(cases.images[int(i)], (int(y), int(x), chip, chip)) for i, y, x in
                     zip(rng.integers(0, len(cases.images), chips), *rng.integers(0, size - chip + 1, (2, chips)))]
            start = time.perf_counter()
            xarray_rumi.read_windows(pairs)
            per_chip.append((time.perf_counter() - start) / chips)
        return per_chip
    finally:
        RumiImage.fetch, RumiImage.decode = fetch, decode


#: Run in a fresh process: peak RSS growth while reading one batch, against what the target allows.
BATCH_MEMORY = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, xarray_rumi

def high_water():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))

location, root, names, chips = sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
images = [xarray_rumi.open_image(f"{location}/{n}", open(os.path.join(root, n + ".header"), "rb").read(),
                                 georeferencing=False) for n in names]
for image in images:
    image.read(rows=slice(0, 1), cols=slice(0, 1))  # the blob checked against the version reads keep to
before = high_water()
result = xarray_rumi.read_windows([(images[i], (y, x, 256, 256)) for i, y, x in chips])
grown = high_water() - before
touched = {(i, k) for i, y, x in chips for k in images[i].grid.frames_touching(
    range(4), range(y, y + 256), range(x, x + 256)).tolist()}
decoded = sum(int(np.prod(images[i].grid.frame_shape(k))) * result.itemsize for i, k in touched)
print(json.dumps([grown, result.nbytes, decoded]))
"""


def batch_memory(root: str, linked, size: int, location: str | None = None, where: str = "") -> Row:
    """Peak RSS growth of a fresh process reading one batch, as a multiple of the result plus its touched frames."""
    import json

    chips = random_chips(np.random.default_rng(5), len(linked), size, BATCH_CHIPS)
    done = subprocess.run([sys.executable, "-c", BATCH_MEMORY, str(ROOT), location or root, root,
                           json.dumps([r for r, _ in linked]), json.dumps(chips)], capture_output=True, text=True,
                          check=True)
    grown, result, decoded = json.loads(done.stdout)
    return Row(f"peak RSS growth of one batch{where} (fresh process)", grown / 2**20, "MiB",
               "result + touched frames decoded", grown / (result + decoded), 1.0, False,
               f"result {result / 2**20:.0f} MiB, touched frames decoded {decoded / 2**20:.0f} MiB")


def batch_rows(seconds: dict[str, list[float]], latency_ms: float) -> list[Row]:
    """The table: each case's median batch time and chips per second, against the anchor its target names."""
    floor, batch = seconds["decode the distinct touched frames"], seconds["read_windows"]
    remote = f"read_windows, HTTP {latency_ms:g} ms"
    fetched = f"fetch the distinct touched frames, HTTP {latency_ms:g} ms"

    def row(name, anchor, ratios, target=None, higher=False, unit="s", label=None):
        times = seconds[name]
        return Row(label or name, statistics.median(times), unit, anchor, statistics.median(ratios), target, higher,
                   f"{BATCH_CHIPS / statistics.median(times):.0f} chips/s; rounds {min(ratios):.2f}-{max(ratios):.2f}")

    def over(name, anchor):
        return [a / b for a, b in zip(seconds[name], seconds[anchor])]

    rows = [
        row("decode the distinct touched frames", "", [1.0] * len(floor)),
        row("read_windows", "decode the distinct touched frames", over("read_windows", "decode the distinct "
                                                                          "touched frames"), 1.1),
        row("one chip at a time", "read_windows: speed-up", over("one chip at a time", "read_windows"), 1.8, True),
        # no batch reader is faster than the floor, so this bounds the speed-up any batch can have over the loop
        row("one chip at a time", "decode the distinct touched frames", over("one chip at a time", "decode the "
            "distinct touched frames"), label="one chip at a time: the ceiling on a batch's speed-up"),
        row("COG twins, rasterio windows", "read_windows: speed-up",
            over("COG twins, rasterio windows", "read_windows"), 2.0, True),
        row(remote, f"{latency_ms:g} ms + 1.2 x local read_windows",
            [r / (latency_ms / 1e3 + 1.2 * b) for r, b in zip(seconds[remote], batch)], 1.0),
        row(f"fetch the distinct touched frames, HTTP {latency_ms:g} ms", "HTTP read_windows",
            over(f"fetch the distinct touched frames, HTTP {latency_ms:g} ms", remote)),
        # 1 when fetching and decoding overlap fully; near 2 when one waits for the other
        row(remote, "the longer of fetching alone and the local batch",
            [r / max(f, b) for r, f, b in zip(seconds[remote], seconds[fetched], batch)], label=remote + ": overlap"),
        row(f"one chip at a time, HTTP {latency_ms:g} ms", "read_windows: speed-up",
            over(f"one chip at a time, HTTP {latency_ms:g} ms", remote), None, True),
        row(f"COG twins, rasterio windows, HTTP {latency_ms:g} ms", "read_windows: speed-up",
            over(f"COG twins, rasterio windows, HTTP {latency_ms:g} ms", remote), 2.0, True),
    ]
    cost = seconds["python cost per chip"]
    rows.append(Row("Python per chip (planning, placing; 4096 16 px chips)", statistics.median(cost) * 1e6, "us",
                    "50 us", statistics.median(cost) / 50e-6, 1.0, False,
                    f"rounds {min(cost) * 1e6:.0f}-{max(cost) * 1e6:.0f} us"))
    return rows


def cpu_rows(seconds: dict[str, list[float]], cpu: dict[str, list[tuple]], latency_ms: float) -> list[Row]:
    """CPU seconds a batch costs, and the fastest a remote batch can be when its server shares the client's cores.

    The loopback server is a Python process on the same cores: what it and the client's receiving spend is
    not left for decoding. Latency plus every CPU second of the remote batch over the cores is its floor here.
    """
    cores = os.cpu_count() or 1
    remote = f"read_windows, HTTP {latency_ms:g} ms"
    local_cpu = [mine for mine, _ in cpu["read_windows"]]
    floor_cpu = [mine for mine, _ in cpu["decode the distinct touched frames"]]
    remote_cpu = [mine + theirs for mine, theirs in cpu[remote]]
    least = [latency_ms / 1e3 + c / cores for c in remote_cpu]
    target = [latency_ms / 1e3 + 1.2 * b for b in seconds["read_windows"]]

    def row(name, values, anchor, ratios, unit="s"):
        return Row(name, statistics.median(values), unit, anchor, statistics.median(ratios), None, False,
                   f"rounds {min(ratios):.2f}-{max(ratios):.2f}")

    client_cpu = [mine for mine, _ in cpu[remote]]
    server_cpu = [theirs for _, theirs in cpu[remote]]
    cog_cpu = [mine for mine, _ in cpu["COG twins, rasterio windows"]]
    loop_cpu = [mine for mine, _ in cpu["one chip at a time"]]
    return [
        row("CPU of a local read_windows batch", local_cpu, "CPU of decoding the distinct touched frames",
            [a / b for a, b in zip(local_cpu, floor_cpu)]),
        # with both keeping every core busy, the most a batch at its limit can be faster than the loop
        row("CPU of one chip at a time", loop_cpu, "CPU of decoding the distinct touched frames",
            [a / b for a, b in zip(loop_cpu, floor_cpu)]),
        # the same for the COG twins
        row("CPU of the COG twins' chips", cog_cpu, "CPU of decoding the distinct touched frames",
            [a / b for a, b in zip(cog_cpu, floor_cpu)]),
        # above 1.2, a remote batch cannot meet latency + 1.2 x a local batch that keeps every core busy
        row(f"CPU of {remote}: this process", client_cpu, "CPU of the local batch",
            [a / b for a, b in zip(client_cpu, local_cpu)]),
        row(f"CPU of {remote}: this process + the server", remote_cpu, "CPU of the local batch",
            [a / b for a, b in zip(remote_cpu, local_cpu)]),
        row(f"{remote}: the least these {cores} cores allow ({latency_ms:g} ms + its CPU / {cores})", least,
            f"its target, {latency_ms:g} ms + 1.2 x local read_windows", [a / b for a, b in zip(least, target)]),
    ]


def _images_directory(keep: str | None):
    if keep is None:
        return tempfile.TemporaryDirectory(prefix="rumi-chips-")
    os.makedirs(keep, exist_ok=True)
    return contextlib.nullcontext(keep)


def _written(root: str, args) -> list[tuple[str, str]]:
    """The images of ``args`` in ``root``: written, or read back from a run that kept them with the same arguments."""
    import json

    record = os.path.join(root, "images.json")
    wanted = [args.images, args.bands, args.size, args.tile]
    if os.path.exists(record):
        kept = json.loads(pathlib.Path(record).read_text())
        if kept["arguments"] == wanted:
            return [tuple(pair) for pair in kept["names"]]
    names = write_images(root, *wanted)
    pathlib.Path(record).write_text(json.dumps({"arguments": wanted, "names": names}))
    return names


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--bands", type=int, default=4)
    parser.add_argument("--size", type=int, default=4096, help="image width and height in px")
    parser.add_argument("--tile", type=int, default=512)
    parser.add_argument("--windows", type=int, default=200, help="windows a round in table 1")
    parser.add_argument("--chips", type=int, default=96, help="chips a round in table 2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=50, help="ms the server waits before each answer in table 3")
    parser.add_argument("--quick", action="store_true", help="2 images of 2048 px, 60 windows, 3 rounds")
    parser.add_argument("--only", choices=["windows", "chips", "batches"], help="one table")
    parser.add_argument("--keep", metavar="DIR", help="write the images into DIR once and reuse them in later runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.size, args.windows, args.rounds = 2, 2048, 60, 3
    warnings.simplefilter("ignore")
    with _images_directory(args.keep) as root:
        started = time.perf_counter()
        names = _written(root, args)
        rumi_chips = cookbook_chips_module(root)
        print(f"{args.images} images of {args.bands} x {args.size} x {args.size} uint16, {args.tile} px tiles; "
              f"{CHIP} px chips of every band at random places of random images; written in "
              f"{time.perf_counter() - started:.0f} s")
        print("\n".join(environment()))
        if args.only in (None, "batches"):
            rows = training_batches(root, names, args.size, args.rounds, args.latency)
            print(f"\n3. training batches: {BATCH_CHIPS} chips from {BATCH_IMAGES} images a batch, {args.rounds} "
                  f"batches; ratios per batch, side by side")
            print(text_table(rows))
        if args.only == "batches":
            print(f"\nwhole run: {time.perf_counter() - started:.0f} s")
            return
        local = Readers(root, names, root)
        if args.only != "chips":
            rows = window_latency(local, args.size, args.windows, args.rounds)
            print(f"\n1. window latency, local files: median of {args.windows} windows a round, {args.rounds} rounds")
            print(text_table(rows))
        if args.only != "windows":
            rows = throughput(local, rumi_chips, args.size, args.chips, args.rounds, "local")
            local.close()
            with http_server(root) as url:
                remote = Readers(root, names, url)
                rows += throughput(remote, rumi_chips, args.size, args.chips, args.rounds, "HTTP")
                remote.close()
            print(f"\n2. chips per second: {args.chips} chips a round, {args.rounds} rounds")
            print(text_table(rows))
        print(f"\nwhole run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
