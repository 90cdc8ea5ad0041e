"""Virtual Zarr: what references cost to build and what reading through them costs.

Run from the repository root::

    python ci/benchmarks/virtual_zarr.py            # ~30 s on 2 cores
    python ci/benchmarks/virtual_zarr.py --size 2048 --repeats 5

Side by side in one run, cases interleaved on every repeat so machine noise
hits them alike, one synthetic 4-band uint16 raster in 256 px tiles is read
whole:

- ``rumi engine``: ``xr.open_dataset(engine="rumi", header=blob, chunks={})``;
- ``kerchunk refs``: ``xarray_rumi.references`` opened through fsspec's
  reference file system with xarray's zarr engine, ``chunks={}``;
- ``icechunk``: ``RumiParser`` -> ``.vz.to_icechunk`` -> ``xr.open_zarr``.

Ratios are against the rumi engine.  Then: building references for a
synthetic blob of 153,664 frames (no file), and decoding every frame with the
codec on 1 and 2 threads (geozl releases the GIL, so 2 threads should approach
2x on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr

import xarray_rumi
from xarray_rumi.cli import demo_raster
from xarray_rumi.virtual.codec import OpenZLChunks
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameGrid
from xarray_rumi.reading.open import load_header
from xarray_rumi.dataset.layout import Layout
from xarray_rumi.virtual.kerchunk import layout_references


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1536)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    import icechunk
    import obstore
    import virtualizarr
    from obspec_utils.registry import ObjectStoreRegistry

    work = tempfile.mkdtemp(prefix="rumi-vz-bench-")
    path = os.path.join(work, "scene.rumi")
    data = demo_raster(4, args.size, args.size)
    blob = xarray_rumi.write(path, data, tile_size=256, crs=32633, transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0))
    refs = xarray_rumi.references(path, blob)

    prefix = f"file://{work}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(work)))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(work, "repo")), config,
                                      authorize_virtual_chunk_access={prefix: None})
    session = repo.writable_session("main")
    registry = ObjectStoreRegistry({"file://": obstore.store.LocalStore()})
    vds = virtualizarr.open_virtual_dataset(f"file://{path}", registry=registry, parser=xarray_rumi.RumiParser(header=blob))
    vds.vz.to_icechunk(session.store)
    session.commit("bench")

    cases = {
        "rumi engine": lambda: xr.open_dataset(path, engine="rumi", header=blob, chunks={}).band_data.values,
        "kerchunk refs": lambda: xr.open_dataset("reference://", engine="zarr", chunks={}, backend_kwargs={
            "consolidated": False, "storage_options": {"fo": refs}}).band_data.values,
        "icechunk": lambda: xr.open_zarr(repo.readonly_session("main").store, consolidated=False).band_data.values,
    }
    for fn in cases.values():
        assert np.array_equal(fn(), data)
    times = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, fn in cases.items():
            times[name].append(best(fn, 1))
    mb = data.nbytes / 1e6
    base = min(times["rumi engine"])
    print(f"read {data.shape} uint16 ({mb:.0f} MB), best of {args.repeats}")
    print(f"{'case':16s} {'seconds':>8s} {'MB/s':>8s} {'vs engine':>10s}")
    for name, values in times.items():
        t = min(values)
        print(f"{name:16s} {t:8.3f} {mb / t:8.0f} {t / base:10.2f}")

    grid = FrameGrid(100_000, 100_000, 512, 512, 4)
    counts = np.random.default_rng(0).integers(200_000, 300_000, grid.frame_count)
    big = Header.from_byte_counts(grid, sample_type_from_name("uint16"), counts)
    seconds = best(lambda: layout_references(Layout((big,), ("s3://bucket/big.rumi",), None)), args.repeats)
    print(f"\nreferences for {grid.frame_count} frames (no file read): {seconds:.2f} s")

    header = load_header(blob)
    frames = [open(path, "rb").read()[a:b] for a, b in zip(*header.ranges(np.arange(header.frame_count)))]
    codec = OpenZLChunks(sample_type="uint16", chunk_shape=(1, 256, 256), image_shape=(args.size, args.size))
    one = best(lambda: [codec.decode(f) for f in frames], args.repeats)
    with ThreadPoolExecutor(2) as pool:
        two = best(lambda: list(pool.map(codec.decode, frames)), args.repeats)
    print(f"codec decode of {len(frames)} frames: 1 thread {one:.3f} s, 2 threads {two:.3f} s, speed-up {one / two:.2f}x")


if __name__ == "__main__":
    main()
