"""Virtual Zarr: what references cost to build, what reading through them costs, and where that goes.

Run from the repository root::

    python ci/benchmarks/virtual_zarr.py            # ~1 min on 2 cores
    python ci/benchmarks/virtual_zarr.py --size 2048 --repeats 7

Side by side in one run, cases interleaved on every repeat so machine noise
hits them alike, one synthetic 4-band uint16 raster in 256 px tiles is read
whole, first with ``chunks={}`` (one Dask task per frame), then with
``chunks=None`` (no Dask: one call into the reader, which for zarr fetches
and decodes its chunks concurrently):

- ``rumi engine``: ``xr.open_dataset(engine="rumi", header=blob, chunks={})``;
- ``kerchunk refs``: ``xarray_rumi.references`` opened through fsspec's
  reference file system with xarray's zarr engine;
- ``icechunk``: ``RumiParser`` -> ``.vz.to_icechunk`` -> ``xr.open_zarr``;
- three floors, the same array in the same chunks with no codec at all, read
  the same way: ``zarr, raw via refs`` (Kerchunk references into an
  uncompressed copy of the chunks), ``zarr, raw via icechunk`` (those
  references as Icechunk virtual chunks) and ``zarr, raw in memory`` (a zarr
  ``MemoryStore``: no file, no fsspec).  They cost what xarray + Dask +
  zarr-python (+ the store) cost per chunk before any byte is decoded.

Ratios are against the rumi engine.  Then per chunk, one at a time on one
thread: the frame decoder alone (``geozl.decompress``), the codec's
``decode``, and zarr's ``Array.__getitem__`` of one chunk (raw in memory,
raw via references, rumi via references); then building references for a
synthetic blob of 153,664 frames (no file), and decoding every frame with
the codec on 1 and 2 threads (geozl releases the GIL).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr

import xarray_rumi
from xarray_rumi.cli import demo_raster
from xarray_rumi.datamodel.variable import Layout
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameGrid
from xarray_rumi.reading.open import load_header
from xarray_rumi.virtual.kerchunk import layout_references

TILE = 256


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def icechunk_repository(work, name, url, parser):
    """An Icechunk repository of the virtual dataset ``parser`` makes of ``url``."""
    import icechunk
    import obstore
    import virtualizarr
    from obspec_utils.registry import ObjectStoreRegistry

    prefix = f"file://{work}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(work)))
    # Icechunk 2 authorises local chunks with an explicit sentinel (None is deprecated there)
    access = getattr(icechunk.credentials, "LocalFileSystemAccess", None)
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(work, name)), config,
                                      authorize_virtual_chunk_access={prefix: access})
    session = repo.writable_session("main")
    registry = ObjectStoreRegistry({"file://": obstore.store.LocalStore()})
    virtualizarr.open_virtual_dataset(url, registry=registry, parser=parser).vz.to_icechunk(session.store)
    session.commit("bench")
    return repo


def raw_references(work, refs, data):
    """``refs`` pointing at an uncompressed copy of every chunk: the same array with no codec."""
    path = os.path.join(work, "raw.bin")
    chunks = dict(refs["refs"])
    zarray = json.loads(chunks["band_data/.zarray"])
    zarray["compressor"] = None
    chunks["band_data/.zarray"] = json.dumps(zarray)
    chunks.pop(".zmetadata", None)
    with open(path, "wb") as f:
        for key in [k for k in chunks if k.startswith("band_data/") and isinstance(chunks[k], list)]:
            band, row, col = (int(n) for n in key.split("/")[1].split("."))
            block = np.zeros((1, TILE, TILE), data.dtype)
            piece = data[band, row * TILE:(row + 1) * TILE, col * TILE:(col + 1) * TILE]
            block[0, :piece.shape[0], :piece.shape[1]] = piece
            chunks[key] = [path, f.tell(), block.nbytes]
            f.write(block.tobytes())
    return {"version": 1, "refs": chunks}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1536)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import fsspec
    import geozl
    import numcodecs
    import zarr

    work = tempfile.mkdtemp(prefix="rumi-vz-bench-")
    path = os.path.join(work, "scene.rumi")
    data = demo_raster(4, args.size, args.size)
    blob = xarray_rumi.write(path, data, tile_size=TILE, crs=32633,
                             transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0))
    refs = xarray_rumi.references(path, blob)
    raw_refs = raw_references(work, refs, data)
    repo = icechunk_repository(work, "repo", f"file://{path}", xarray_rumi.RumiParser(header=blob))
    from virtualizarr.parsers import KerchunkJSONParser

    with open(os.path.join(work, "raw.json"), "w") as f:
        json.dump(raw_refs, f)
    # VirtualiZarr's Kerchunk parser reads no inlined data: the coordinates stay out of this one
    raw_repo = icechunk_repository(work, "raw-repo", f"file://{work}/raw.json",
                                   KerchunkJSONParser(skip_variables=["band", "x", "y", "spatial_ref"]))
    memory = zarr.storage.MemoryStore()
    xr.Dataset({"band_data": (("band", "y", "x"), data)}).to_zarr(
        memory, encoding={"band_data": {"chunks": (1, TILE, TILE), "compressors": None}}, zarr_format=2,
        consolidated=False)

    def through_refs(fo, chunks):
        return lambda: xr.open_dataset("reference://", engine="zarr", chunks=chunks, backend_kwargs={
            "consolidated": False, "storage_options": {"fo": fo}}).band_data.values

    def through_icechunk(repository, chunks):
        return lambda: xr.open_dataset(repository.readonly_session("main").store, engine="zarr", chunks=chunks,
                                       consolidated=False).band_data.values

    def engine(chunks):
        return lambda: xr.open_dataset(path, engine="rumi", header=blob, chunks=chunks).band_data.values

    mb = data.nbytes / 1e6
    for chunks, how in (({}, "one Dask task per frame"), (None, "no Dask: one call into the reader")):
        cases = {
            "rumi engine": engine(chunks),
            "kerchunk refs": through_refs(refs, chunks),
            "icechunk": through_icechunk(repo, chunks),
            "zarr, raw via refs": through_refs(raw_refs, chunks),
            "zarr, raw via icechunk": through_icechunk(raw_repo, chunks),
            "zarr, raw in memory": lambda chunks=chunks: xr.open_dataset(memory, engine="zarr", chunks=chunks,
                                                                         consolidated=False).band_data.values,
        }
        for fn in cases.values():
            assert np.array_equal(fn(), data)
        times = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, fn in cases.items():
                times[name].append(best(fn, 1))
        base = min(times["rumi engine"])
        print(f"\nread {data.shape} uint16 ({mb:.0f} MB) with chunks={chunks} ({how}), best of {args.repeats}, "
              "cases interleaved")
        print(f"{'case':22s} {'seconds':>8s} {'MB/s':>8s} {'vs engine':>10s}")
        for name, values in times.items():
            t = min(values)
            print(f"{name:22s} {t:8.3f} {mb / t:8.0f} {t / base:10.2f}")

    header = load_header(blob)
    with open(path, "rb") as f:
        whole = f.read()
    frames = [whole[a:b] for a, b in zip(*header.ranges(np.arange(header.frame_count)))]
    codec = numcodecs.get_codec(json.loads(refs["refs"]["band_data/.zarray"])["compressor"])
    chunk_bytes = TILE * TILE * 2
    keys = [(b, slice(r * TILE, (r + 1) * TILE), slice(c * TILE, (c + 1) * TILE))
            for b in range(data.shape[0]) for r in range(-(-args.size // TILE)) for c in range(-(-args.size // TILE))]

    def array(fo):
        fs = fsspec.filesystem("reference", fo=fo, asynchronous=True)
        return zarr.open_array(zarr.storage.FsspecStore(fs, read_only=True), path="band_data", mode="r")

    in_memory, raw_array, rumi_array = zarr.open_array(memory, path="band_data", mode="r"), array(raw_refs), array(refs)
    per_chunk = {
        "geozl.decompress (the decoder alone)": lambda: [geozl.decompress(f, max_output_size=chunk_bytes) for f in frames],
        "codec decode (numcodecs openzl)": lambda: [codec.decode(f) for f in frames],
        "zarr getitem, raw in memory": lambda: [in_memory[k] for k in keys],
        "zarr getitem, raw via refs": lambda: [raw_array[k] for k in keys],
        "zarr getitem, rumi via refs": lambda: [rumi_array[k] for k in keys],
    }
    spent = {name: [] for name in per_chunk}
    for _ in range(args.repeats):
        for name, fn in per_chunk.items():
            spent[name].append(best(fn, 1))
    print(f"\nper chunk, one at a time on one thread ({len(frames)} chunks), best of {args.repeats}")
    for name, values in spent.items():
        print(f"{name:38s} {min(values) / len(frames) * 1e6:8.0f} us")

    grid = FrameGrid(100_000, 100_000, 512, 512, 4)
    counts = np.random.default_rng(0).integers(200_000, 300_000, grid.frame_count)
    big = Header.from_byte_counts(grid, sample_type_from_name("uint16"), counts)
    seconds = best(lambda: layout_references(Layout((big,), ("s3://bucket/big.rumi",), None)), args.repeats)
    print(f"\nreferences for {grid.frame_count} frames (no file read): {seconds:.2f} s")

    one = best(lambda: [codec.decode(f) for f in frames], args.repeats)
    with ThreadPoolExecutor(2) as pool:
        two = best(lambda: list(pool.map(codec.decode, frames)), args.repeats)
    print(f"codec decode of {len(frames)} frames: 1 thread {one:.3f} s, 2 threads {two:.3f} s, speed-up {one / two:.2f}x")


if __name__ == "__main__":
    main()
