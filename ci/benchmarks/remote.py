"""Remote reads: rumi beside a COG and Zarr v3 over a loopback HTTP server that answers like a distant store.

Run from the repository root::

    python ci/benchmarks/remote.py                      # latencies 0, 20 and 50 ms: ~10 minutes on 2 cores
    python ci/benchmarks/remote.py --latency 50         # one latency
    python ci/benchmarks/remote.py --bandwidth 50       # and at most 50 MB/s per connection
    python ci/benchmarks/remote.py --quick              # a smoke test: 1024 px, one repetition
    python ci/benchmarks/remote.py --keep-freed-memory  # freed memory stays in the process (VMs: see --help)

One raster, 4 bands x 4096 x 4096 uint16 (smooth fields plus noise, as a
scene is, not random bytes), stored three ways in a temporary directory:

- rumi, ``tile_size=512``, its blob beside it (``<file>.header``);
- a COG (GDAL's COG driver, ZSTD + PREDICTOR=2, 512 px blocks), read by
  ``rioxarray.open_rasterio`` with GDAL set as titiler's performance-tuning
  page recommends (no directory listing, merged consecutive ranges,
  multiplexing, ``VSI_CACHE``);
- Zarr v3, chunks ``(1, 512, 512)``, blosc-zstd with bit shuffle and
  consolidated metadata, read by ``xr.open_zarr`` over fsspec HTTP.

The server is the tests' ``RangeServer`` (``tests/servers.py``) in a process
of its own: it waits the latency before each answer's first byte, caps each
connection's bandwidth when asked, and counts every request, the body bytes it
sent and the peak number of requests it was answering at once.

Cases (each format in turn for every repetition, so noise hits all alike; the
median is shown, with the requests of the last repetition).  Every case but
``open`` opens first and times (and counts) only the read:

- ``open``: opening, rumi with ``header=`` the blob's URL;
- ``8 opens at once``: eight such opens from eight threads, each of another URL;
- ``full chunks={} 2w`` / ``16w``: the whole array, one Dask chunk per frame
  (COG: per 512 px block, which holds every band; Zarr: per chunk), on Dask's threaded scheduler with
  its default workers (the cores) and with 16;
- ``full chunks=auto``: the whole array, each format's ``chunks="auto"``;
- ``box 1024 px``: a 1024 px box over 3 x 3 tile positions, every band, no Dask;
- ``window 256 px``: random 256 px windows of every band, one at a time, no
  Dask (the median window, and the requests of one).

Each full read, the box and the window are also timed on rumi's local file
(``rumi local``), for the targets that a remote full read takes at most 1.5x
(the local read + 2 x the latency), and a box or a window at most the latency
+ 1.2x the local read: the column ``vs local + 2 x latency``, which for the box
and the window is ``(time - latency) / local`` (marked ``(- L)``).

With ``--transports``, a first case, ``fetch every frame``, compares transports on rumi's frame
ranges alone (no decoding): fsspec's ``cat_ranges`` with a request per frame
(the reads before the engine), the engine (:mod:`xarray_rumi.io.engine`,
merged requests through fsspec) and obstore's ``get_ranges`` (which merges
ranges less than 1 MiB apart itself).

Every read uses a URL the format's caches have not seen (a query string the
server ignores), so no repetition reads another's cached bytes; Zarr's store
keeps no cache.  ``rumi vs best`` is the best peer's time over rumi's (above 1:
rumi is faster).  These 2 cores are shared: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))  # this checkout's package, not whichever one is installed

from _report import environment  # noqa: E402

#: GDAL as titiler's performance-tuning page recommends for COGs over HTTP.
GDAL_OPTIONS = {
    "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
    "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
    "GDAL_HTTP_MULTIPLEX": "YES",
    "GDAL_HTTP_VERSION": "2",
    "VSI_CACHE": "TRUE",
    "VSI_CACHE_SIZE": str(64 * 1024 * 1024),
    "GDAL_CACHEMAX": "200",
    "GDAL_BAND_BLOCK_CACHE": "HASHSET",
    "GDAL_INGESTED_BYTES_AT_OPEN": "32768",
}
FORMATS = ("rumi", "COG", "Zarr")
BLOCK = 512
WINDOW = 256
#: Images opened from threads at once in ``8 opens at once`` (a Cube's or a batch's opens).
OPENS = 8


# -- the raster and its three twins ---------------------------------------------


def scene(bands: int, size: int, seed: int = 0) -> np.ndarray:
    """Smooth fields plus a little noise: compressible as a real scene, unlike random bytes."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    out = np.empty((bands, size, size), np.uint16)
    for b in range(bands):
        field = (np.sin(2 * np.pi * (x * (2 + b) + 0.3 * b)) * np.cos(2 * np.pi * y * (3 + b))
                 + 0.5 * np.sin(9 * np.pi * x * y))
        out[b] = (20000 + 8000 * field + rng.normal(0, 40, field.shape)).clip(0, 65535)
    return out


def write_twins(root: str, data: np.ndarray) -> None:
    import rasterio
    import rasterio.shutil
    import xarray as xr
    import zarr

    import xarray_rumi

    blob = xarray_rumi.write(f"{root}/scene.rumi", data, tile_size=BLOCK, crs=32618,
                             transform=(10, 0, 500000, 0, -10, 4000000))
    pathlib.Path(f"{root}/scene.rumi.header").write_bytes(blob)
    bands, rows, cols = data.shape
    profile = dict(driver="GTiff", width=cols, height=rows, count=bands, dtype="uint16", crs="EPSG:32618",
                   transform=rasterio.Affine(10, 0, 500000, 0, -10, 4000000))
    with rasterio.MemoryFile() as memory:
        with memory.open(**profile) as staged:
            staged.write(data)
        with memory.open() as staged:
            rasterio.shutil.copy(staged, f"{root}/scene.tif", driver="COG", COMPRESS="ZSTD", PREDICTOR="2",
                                 BLOCKSIZE=str(BLOCK), OVERVIEWS="NONE")
    array = xr.DataArray(data, dims=("band", "y", "x"), coords={"band": np.arange(1, bands + 1)})
    compressor = zarr.codecs.BloscCodec(cname="zstd", clevel=5, shuffle="bitshuffle")
    array.to_dataset(name="band_data").to_zarr(
        f"{root}/scene.zarr", zarr_format=3, consolidated=True,
        encoding={"band_data": {"chunks": (1, BLOCK, BLOCK), "compressors": [compressor]}})


# -- the server, in a process of its own ------------------------------------------

SERVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from servers import RangeServer
bandwidth = float(sys.argv[4]) if sys.argv[4] != "none" else None
with RangeServer(sys.argv[2], latency=float(sys.argv[3]), bandwidth=bandwidth) as server:
    print(server.url, flush=True)
    for line in sys.stdin:
        print(json.dumps(server.take_stats()), flush=True)
"""


class Server:
    """The tests' RangeServer in a child process; :meth:`stats` takes what it counted since the last call."""

    def __init__(self, root: str, latency: float, bandwidth: float | None):
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(ROOT / "tests"), root, str(latency),
             "none" if bandwidth is None else str(bandwidth)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self.process.stdout.readline().strip()

    def stats(self) -> dict:
        self.process.stdin.write("stats\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


# -- how each format opens and reads ---------------------------------------------

_fresh = itertools.count()


class Readers:
    """Opening each twin at a URL its caches have not seen."""

    def __init__(self, url: str, root: str, transports: bool = False):
        self.url, self.root, self.transports = url, root, transports

    def _query(self) -> str:
        return f"?fresh={next(_fresh)}"

    def open(self, fmt: str, chunks=None):
        import rioxarray
        import xarray as xr

        if fmt == "rumi local":
            return xr.open_dataset(f"{self.root}/scene.rumi", engine="rumi", header=f"{self.root}/scene.rumi.header",
                                   chunks=chunks)["band_data"]
        if fmt == "rumi":
            query = self._query()
            return xr.open_dataset(f"{self.url}/scene.rumi{query}", engine="rumi",
                                   header=f"{self.url}/scene.rumi.header{query}", chunks=chunks)["band_data"]
        if fmt == "COG":
            # A block of the COG driver's (pixel-interleaved) file holds every band: one chunk each.
            cog_chunks = {"band": -1, "y": BLOCK, "x": BLOCK} if chunks == {} else chunks
            return rioxarray.open_rasterio(f"{self.url}/scene.tif{self._query()}", chunks=cog_chunks, lock=False,
                                           cache=False)
        return xr.open_zarr(f"{self.url}/scene.zarr", zarr_format=3, consolidated=True,
                            chunks={} if chunks == {} else chunks)["band_data"]


def measure(server: Server, prepare, run) -> tuple[float, dict]:
    """Seconds of ``run(prepare())`` and what the server counted for ``run`` alone."""
    prepared = prepare()
    server.stats()
    started = time.perf_counter()
    run(prepared)
    seconds = time.perf_counter() - started
    return seconds, server.stats()


def cases(readers: Readers, size: int, windows: int, rng: np.random.Generator) -> dict:
    """``case -> format -> (prepare, run, reads)``: ``run(prepare())`` is timed without ``prepare``, ``reads`` a run."""
    import dask

    def nothing():
        return None

    def opened(fmt, chunks=None):
        return lambda: readers.open(fmt, chunks=chunks)

    full_formats = (*FORMATS, "rumi local")

    def full(workers=None):
        def run(array):
            with dask.config.set(scheduler="threads", **({"num_workers": workers} if workers else {})):
                array.values  # noqa: B018 - the read is the point
        return run

    box = slice(BLOCK // 2, BLOCK // 2 + 2 * BLOCK)
    places = rng.integers(0, size - WINDOW, size=(windows, 2))

    def windowed(array):
        for y, x in places:
            array[:, y:y + WINDOW, x:x + WINDOW].values  # noqa: B018

    def opens_at_once(fmt):
        def run(_):
            with ThreadPoolExecutor(OPENS) as pool:
                list(pool.map(lambda _: readers.open(fmt), range(OPENS)))
        return run

    return {
        **({"fetch every frame": transports(readers)} if readers.transports else {}),
        "open": {f: (nothing, lambda _, f=f: readers.open(f), 1) for f in FORMATS},
        f"{OPENS} opens at once": {f: (nothing, opens_at_once(f), 1) for f in FORMATS},
        "full chunks={} 2w": {f: (opened(f, {}), full(), 1) for f in full_formats},
        "full chunks={} 16w": {f: (opened(f, {}), full(16), 1) for f in full_formats},
        "full chunks=auto": {f: (opened(f, "auto"), full(), 1) for f in full_formats},
        f"box {2 * BLOCK} px": {f: (opened(f), lambda array: array[:, box, box].values, 1) for f in full_formats},
        f"window {WINDOW} px": {f: (opened(f), windowed, windows) for f in full_formats},
    }


def transports(readers: Readers) -> dict:
    """``fetch every frame``: rumi's frame ranges through each transport, bytes only."""
    import fsspec
    import obstore
    from obstore.store import HTTPStore

    import xarray_rumi
    from xarray_rumi.io.engine import fetch_ranges

    url = f"{readers.url}/scene.rumi"
    header = xarray_rumi.open_image(url, header=f"{url}.header", georeferencing=False, verify=False).header
    starts, stops = (r.tolist() for r in header.ranges(range(header.frame_count)))
    fs = fsspec.filesystem("http")

    def per_frame(_):
        fs.cat_ranges([url] * len(starts), starts, stops)

    def engine(_):
        fetch_ranges(fs, url, starts, stops)

    store = HTTPStore.from_url(readers.url, client_options={"allow_http": True})

    def with_obstore(_):
        obstore.get_ranges(store, "scene.rumi", starts=starts, ends=stops)

    nothing = lambda: None  # noqa: E731
    return {"fsspec per frame": (nothing, per_frame, 1), "engine (fsspec)": (nothing, engine, 1),
            "obstore get_ranges": (nothing, with_obstore, 1)}


def run_latency(root: str, latency_ms: float, bandwidth: float | None, repeats: int, size: int,
                windows: int, only: list[str] | None, transports: bool) -> list[list[str]]:
    server = Server(root, latency_ms / 1000, bandwidth)
    rows = []
    try:
        readers = Readers(server.url, root, transports)
        for fmt in FORMATS:  # imports and first connections, before the clock starts
            readers.open(fmt)
        for case, by_format in cases(readers, size, windows, np.random.default_rng(1)).items():
            if only and not any(word in case for word in only):
                continue
            times = {f: [] for f in by_format}
            counted = {}
            for _ in range(repeats):
                for fmt, (prepare, run, inside) in by_format.items():
                    seconds, stats = measure(server, prepare, run)
                    times[fmt].append(seconds / inside)
                    counted[fmt] = {k: v / inside if k in ("requests", "gets", "bytes") else v
                                    for k, v in stats.items()}
            medians = {f: statistics.median(t) for f, t in times.items()}
            best_peer = min(("COG", "Zarr"), key=lambda f: medians.get(f, float("inf")))
            for fmt in by_format:
                stats = counted[fmt]
                ratio = f"{medians[best_peer] / medians['rumi']:.2f} ({best_peer})" if fmt == "rumi" else ""
                local = ""
                if fmt == "rumi" and "rumi local" in medians:
                    local = f"{medians['rumi'] / (medians['rumi local'] + 2 * latency_ms / 1e3):.2f}"
                    if not case.startswith("full"):   # one round trip: (time - latency) / local
                        local = f"{(medians['rumi'] - latency_ms / 1e3) / medians['rumi local']:.2f} (- L)"
                rows.append([f"{latency_ms:g}", case, fmt, f"{medians[fmt] * 1e3:,.1f}", f"{stats['requests']:g}",
                             f"{stats['bytes'] / 1e6:.2f}", str(stats["peak_in_flight"]), ratio, local])
            print(f"  {latency_ms:g} ms {case}: " + ", ".join(f"{f} {medians[f] * 1e3:.0f} ms" for f in by_format),
                  file=sys.stderr, flush=True)
    finally:
        server.close()
    return rows


#: glibc's tunables (mallopt(3)): every allocation from the heap, which is never trimmed.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**40), "MALLOC_TOP_PAD_": str(2**29)}

HEADINGS = ["latency ms", "case", "format", "time ms", "requests", "MB sent", "peak in flight", "rumi vs best peer",
            "vs local + 2 x latency"]


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADINGS) + " |", "|" + "---|" * len(HEADINGS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, nargs="+", default=[0, 20, 50], help="ms before each answer")
    parser.add_argument("--bandwidth", type=float, default=None, help="MB/s per connection at most")
    parser.add_argument("--size", type=int, default=4096, help="image width and height in px")
    parser.add_argument("--bands", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--windows", type=int, default=20, help="random windows a repetition")
    parser.add_argument("--only", nargs="+", help="cases whose name holds one of these words")
    parser.add_argument("--transports", action="store_true",
                        help="also fetch every frame through fsspec, the engine and obstore")
    parser.add_argument("--quick", action="store_true", help="1024 px, one repetition, 4 windows")
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help="glibc keeps freed memory in the process (no mmap, no trim): on a VM whose host takes "
                             "freed pages back, repetitions then measure the readers, not first touches")
    args = parser.parse_args(argv)
    if args.keep_freed_memory and os.environ.get("MALLOC_MMAP_MAX_") != "0":
        # glibc reads these at start: the run starts again with them (the server's process inherits them)
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **KEEP_FREED_MEMORY})
    if args.quick:
        args.size, args.repeats, args.windows = 1024, 1, 4
    warnings.simplefilter("ignore")
    # In the environment, not a rasterio.Env: GDAL reads it in every thread, Dask's workers included.
    os.environ.update(GDAL_OPTIONS)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rumi-remote-") as root:
        write_twins(root, scene(args.bands, args.size))
        sizes = {name: sum(p.stat().st_size for p in pathlib.Path(root).glob(f"{name}*/**/*") if p.is_file())
                 + sum(p.stat().st_size for p in pathlib.Path(root).glob(f"{name}*") if p.is_file())
                 for name in ("scene.rumi", "scene.tif", "scene.zarr")}
        bandwidth = None if args.bandwidth is None else args.bandwidth * 1e6
        print(f"{args.bands} x {args.size} x {args.size} uint16, {BLOCK} px frames/blocks/chunks; stored: "
              + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sizes.items())
              + f"; bandwidth cap per connection: {'none' if bandwidth is None else f'{args.bandwidth:g} MB/s'}"
              + f"; median of {args.repeats} interleaved repetitions")
        print("\n".join(environment()))
        if args.keep_freed_memory:
            print("glibc keeps freed memory in the process: " + ", ".join(f"{k}={v}" for k, v in KEEP_FREED_MEMORY.items()))
        rows = []
        for latency in args.latency:
            rows += run_latency(root, latency, bandwidth, args.repeats, args.size, args.windows, args.only,
                                args.transports)
        print()
        print(markdown(rows))
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
