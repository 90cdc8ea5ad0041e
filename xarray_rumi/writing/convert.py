"""Converting GeoTIFFs (and anything rasterio opens) to rumi.

Pixels are read through rioxarray as a Dask array in frame-sized pieces, so a
conversion holds a few frames in memory, not the image.  What rumi cannot
store is refused before any output exists: a CRS with no EPSG code (unless
``drop_georeferencing``), or a sample type outside the spec.  NoData has no
place in rumi: the value is reported and the pixels keep their values.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from ..format.geo import IDENTITY, resolve_crs
from .write import write

# GDAL types with no numpy twin, and the rumi sample type that keeps them exact.
_GDAL_SAMPLE_TYPES = {"complex_int16": "cint16", "complex_int32": "cint32"}


@dataclass(frozen=True)
class Conversion:
    """What one conversion did."""

    source: str
    target: str
    source_bytes: int
    target_bytes: int
    raw_bytes: int
    nodata: float | None

    @property
    def ratio(self) -> float:
        """Compression ratio of the rumi file against the raw pixels."""
        return self.raw_bytes / self.target_bytes


def convert(source, target, *, tile_size=512, frame_unit="tile", compression="auto", drop_georeferencing=False,
            storage_options=None, progress=None) -> Conversion:
    """Convert one raster that rasterio opens into a rumi file (and its ``.header``).

    >>> import numpy as np, rasterio, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with rasterio.open(os.path.join(d, "in.tif"), "w", driver="GTiff", width=64, height=32, count=1,
    ...                    dtype="uint8", crs="EPSG:4326", transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45)) as f:
    ...     f.write(np.ones((1, 32, 64), "uint8"))
    >>> convert(os.path.join(d, "in.tif"), os.path.join(d, "out.rumi"), tile_size=32).raw_bytes
    2048
    """
    import rasterio
    import rioxarray

    source, target = os.fspath(source), os.fspath(target)
    with rasterio.open(source) as src:
        crs, transform = _georeferencing(src, source, drop_georeferencing)
        raster_type = "point" if src.tags().get("AREA_OR_POINT", "").lower() == "point" else "area"
        if raster_type == "point" and transform is not None:
            # GDAL reports a PixelIsPoint file's transform shifted to pixel
            # corners; the rumi matrix maps pixel indices to pixel centres.
            a, b, c, d, e, f = transform
            transform = (a, b, c + 0.5 * (a + b), d, e, f + 0.5 * (d + e))
        sample_type = _GDAL_SAMPLE_TYPES.get(src.dtypes[0])
        nodata = src.nodata
        tile_rows = tile_size if isinstance(tile_size, int) else tile_size[0]
    data = rioxarray.open_rasterio(
        source, chunks={"band": -1, "y": tile_rows, "x": -1}, lock=False, mask_and_scale=False, cache=False
    )
    try:
        # the bare Dask array: georeferencing is exactly what was decided above
        write(target, data.data, tile_size=tile_size, frame_unit=frame_unit, crs=crs, transform=transform,
              raster_type=raster_type, sample_type=sample_type, compression=compression,
              storage_options=storage_options, progress=progress)
    finally:
        data.close()
    raw = data.size * (4 if sample_type == "cint16" else data.dtype.itemsize)
    return Conversion(source, target, os.path.getsize(source), _size(target, storage_options), raw, nodata)


def _georeferencing(src, name: str, drop: bool):
    if drop:
        return None, None
    transform = tuple(src.transform)[:6]
    if src.crs is None:
        if transform != IDENTITY:
            raise ValueError(
                f"{name} has a transform but no CRS; rumi stores a transform only with an EPSG CRS "
                "(use drop_georeferencing / --drop-georeferencing to write it without)"
            )
        return None, None
    try:
        code, _ = resolve_crs(src.crs.to_wkt())
    except ValueError as exc:
        raise ValueError(
            f"{exc} (use drop_georeferencing / --drop-georeferencing to write the pixels without it)"
        ) from None
    return code, transform


def _size(target: str, storage_options) -> int:
    from ..io.source import ByteSource

    return ByteSource.of(target, storage_options).size()


def target_paths(sources: list[str], out: str) -> list[str]:
    """Where each source goes: ``out`` itself for one file, else ``out/<stem>.rumi``.

    >>> target_paths(["a/x.tif", "b/y.tiff"], "outdir")
    ['outdir/x.rumi', 'outdir/y.rumi']
    """
    if len(sources) == 1 and not os.path.isdir(out) and not out.endswith(os.sep):
        return [out]
    names = [os.path.splitext(os.path.basename(s))[0] + ".rumi" for s in sources]
    if len(set(names)) != len(names):
        raise ValueError("two inputs would write the same output name; convert them into different directories")
    return [os.path.join(out, n) for n in names]


def _convert_quietly(args) -> Conversion:
    source, target, options = args
    return convert(source, target, **options)


def add_command(commands) -> None:
    """The ``rumi convert IN [IN ...] OUT_OR_DIR`` sub-command."""
    cmd = commands.add_parser("convert", help="convert GeoTIFFs (anything rasterio opens) to rumi")
    cmd.add_argument("inputs", nargs="+", metavar="IN")
    cmd.add_argument("output", metavar="OUT_OR_DIR")
    cmd.add_argument("--tile-size", type=int, default=512)
    cmd.add_argument("--frame-unit", choices=("tile", "cell"), default="tile")
    cmd.add_argument("--compression", default="auto", help="auto, portable, or a GeoZL recipe")
    cmd.add_argument("--drop-georeferencing", action="store_true",
                     help="write pixels without CRS and transform when rumi cannot store the CRS")
    cmd.add_argument("-j", "--jobs", type=int, default=1, help="files converted in parallel")
    cmd.set_defaults(run=_run)


def _run(args) -> int:
    from tqdm import tqdm

    if len(args.inputs) > 1:
        os.makedirs(args.output, exist_ok=True)
    targets = target_paths(args.inputs, args.output)
    options = dict(tile_size=args.tile_size, frame_unit=args.frame_unit, compression=args.compression,
                   drop_georeferencing=args.drop_georeferencing)
    results, failures = [], 0
    if len(targets) == 1 or args.jobs <= 1:
        for source, target in zip(args.inputs, targets):
            with tqdm(desc=os.path.basename(source), total=_frame_count(source, args), unit="frame",
                      file=sys.stderr, leave=False) as bar:
                try:
                    results.append(convert(source, target, progress=bar.update, **options))
                except (ValueError, OSError) as exc:
                    failures += 1
                    print(f"rumi convert: {source}: {exc}", file=sys.stderr)
    else:
        # spawn, not fork: a forked child inherits locks held by Dask's and GDAL's threads
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            jobs = [(s, t, options) for s, t in zip(args.inputs, targets)]
            futures = [pool.submit(_convert_quietly, job) for job in jobs]
            for (source, _, _), future in tqdm(zip(jobs, futures), total=len(jobs), unit="file", file=sys.stderr):
                try:
                    results.append(future.result())
                except (ValueError, OSError) as exc:
                    failures += 1
                    print(f"rumi convert: {source}: {exc}", file=sys.stderr)
    _summary(results)
    return 1 if failures else 0


def _frame_count(source: str, args) -> int | None:
    import rasterio

    try:
        with rasterio.open(source) as src:
            bands, rows, cols = src.count, src.height, src.width
    except Exception:  # the conversion itself reports what is wrong with the file
        return None
    positions = -(-rows // args.tile_size) * -(-cols // args.tile_size)
    return positions * (bands if args.frame_unit == "tile" else 1)


def _summary(results: list[Conversion]) -> None:
    if not results:
        return
    width = max(len(os.path.basename(r.source)) for r in results)
    print(f"{'input':<{width}}  {'input bytes':>12}  {'rumi bytes':>12}  {'vs input':>8}  {'vs raw':>7}")
    for r in results:
        print(f"{os.path.basename(r.source):<{width}}  {r.source_bytes:>12}  {r.target_bytes:>12}  "
              f"{r.source_bytes / r.target_bytes:>7.2f}x  {r.ratio:>6.2f}x")
        if r.nodata is not None:
            print(f"  note: nodata {r.nodata:g} is not stored (rumi has no place for it); pixel values are unchanged")
