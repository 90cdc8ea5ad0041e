"""``rumi demo [-o DIR]``: write a generated raster and its blob, validate both, read the raster back."""

from __future__ import annotations

import os
import time

import numpy as np

from .shared import CannotWrite, check_folder, say


def add_command(commands) -> None:
    demo = commands.add_parser("demo", help="write, validate and read back a generated raster",
                               description="Write a generated 4-band raster as DIR/demo.rumi, its blob as "
                                           "DIR/demo.rumi.header, validate both and read the raster back.")
    demo.add_argument("-o", "--output", dest="dir", default=".", metavar="DIR",
                      help="directory to write demo.rumi and demo.rumi.header into, made if missing, but not the "
                           "folders above it (default: the current directory)")
    demo.set_defaults(run=run)


def demo_raster(bands: int = 4, rows: int = 768, cols: int = 1024) -> np.ndarray:
    """A smooth, noisy multi-band uint16 raster, like a small optical scene.

    >>> demo_raster(2, 3, 5).shape
    (2, 3, 5)
    """
    y, x = np.mgrid[0:rows, 0:cols].astype(np.float32)
    rng = np.random.default_rng(42)
    terrain = 2000 + 800 * np.sin(x / 97) * np.cos(y / 71) + 300 * np.sin((x + y) / 23)
    layers = [terrain * (0.6 + 0.15 * b) + rng.normal(0, 12, terrain.shape) for b in range(bands)]
    return np.clip(np.stack(layers), 0, 65535).astype(np.uint16)


def run(args) -> int:
    import xarray as xr
    from pyproj import CRS

    from ..reading.validate import validate
    from ..writing.write import write

    path = os.path.join(args.dir, "demo.rumi")
    data = demo_raster()
    check_folder(args.dir)  # DIR is the output, made here; a mistyped folder above it is named, not made
    t0 = time.perf_counter()
    try:
        os.makedirs(args.dir, exist_ok=True)
        blob = write(path, data, tile_size=256, frame_unit="tile", crs="EPSG:32633",
                     transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0))
    except OSError as exc:
        raise CannotWrite(path, exc) from exc
    t1 = time.perf_counter()
    size = os.path.getsize(path)
    say(f"wrote     {path}: {data.shape[0]} bands x {data.shape[1]} x {data.shape[2]} uint16, "
        f"{size} bytes (ratio {data.nbytes / size:.2f}) in {t1 - t0:.2f} s")
    say(f"header    {path}.header: {len(blob)} bytes locate all frames")
    validate(path, blob)
    say("validate  the file and its blob follow every rule of rumi 0.1.0, every frame decoded")
    ds = xr.open_dataset(path, engine="rumi", header=blob, chunks={})
    crs = CRS.from_wkt(ds.spatial_ref.attrs["crs_wkt"])
    say(f"open      band_data {dict(ds.band_data.sizes)} lazily, one Dask chunk per frame "
        f"({ds.band_data.data.npartitions} chunks of {ds.band_data.data.chunksize}), CRS EPSG:{crs.to_epsg()}")
    same = np.array_equal(ds.band_data.values, data)
    say(f"read back {'identical to' if same else 'DIFFERENT from'} what was written")
    say(f"kept      both in {os.path.abspath(args.dir)}; next: rumi info {path}")
    return 0 if same else 1
