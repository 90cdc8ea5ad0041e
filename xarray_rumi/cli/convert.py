"""``rumi convert IN [IN ...] -o OUT_OR_DIR`` (or ``IN OUT``, as ``cp``): rasters or STAC Items to rumi files."""

from __future__ import annotations

import argparse
import contextlib
import os
import posixpath
import sys

from ..format.grid import FrameGrid, FrameUnit
from ..io.urls import is_url
from ..runtime.threads import in_processes
from ..writing.convert import CRS_CONFIDENCE, Conversion, convert, is_rumi_file, mask_note, palette_note
from ..writing.data_array import nodata_note, scale_note
from ..writing.parameters import MAX_TILE_SIDE
from .shared import (Refused, add_storage_options, check_folder, make_folder, options_for, positive_int, said_of,
                     say, stac_bytes, write_output)


def add_command(commands) -> None:
    cmd = commands.add_parser(
        "convert", help="convert GeoTIFFs (anything rasterio opens) to rumi",
        description="Convert rasters that rasterio opens (paths or URLs) to rumi files, each with its FILE.header "
                    "blob. A CRS given only as WKT is stored as the EPSG code it is equivalent to "
                    f"(pyproj's identification at confidence {CRS_CONFIDENCE} or more, checked for equivalence); "
                    "the summary names the code.")
    cmd.add_argument("inputs", nargs="+", metavar="IN",
                     help="rasters to convert (paths or URLs rasterio opens), or one file of STAC Items whose GeoTIFF "
                          "assets to convert (an ItemCollection .json, or stac-geoparquet .parquet): the new Items "
                          "go to OUT_OR_DIR/items.json (or items.parquet); without -o, the last IN is the output")
    cmd.add_argument("-o", "--output", metavar="OUT_OR_DIR", default=None,
                     help="the rumi file for one input, else a directory (a path or fsspec URL); missing folders "
                          "above it are not created (default: the last IN)")
    cmd.add_argument("--tile-size", type=tile_side, default=512, help=f"tile side in pixels, 1 to {MAX_TILE_SIDE}")
    cmd.add_argument("--frame-unit", choices=("tile", "cell", "auto"), default="tile",
                     help="what one frame holds: tile = one band of one grid position, cell = all bands of one grid "
                          "position, decoded together, auto = whichever --compression auto measures smaller "
                          "(files of a time series may then differ in frame unit, and a Cube needs one)")
    cmd.add_argument("--compression", default="auto", help="auto, portable, or a GeoZL recipe")
    cmd.add_argument("--crs", metavar="EPSG:n", help="assign this CRS, keeping the source's transform, as "
                                                     "gdal_translate -a_srs does (default: the source's CRS)")
    cmd.add_argument("--drop-georeferencing", action="store_true",
                     help="write pixels without CRS and transform when rumi cannot store the CRS (default: off)")
    cmd.add_argument("-j", "--jobs", type=positive_int, default=None,
                     help="files converted in parallel (default: 1, or one per core for STAC Items)")
    cmd.add_argument("--scheduler", metavar="ADDRESS", help="with STAC Items: the Dask scheduler to convert on, one "
                                                            "task per file (default: local processes, -j of them)")
    add_storage_options(cmd, "an output that is a URL (rasterio reads the inputs through GDAL, configured from "
                             "the environment)")
    cmd.set_defaults(run=run)


def run(args) -> int:
    import tqdm  # noqa: F401  (part of the geo extra: missing, main() names the extra before any work)

    if args.output is None:  # ``rumi convert IN OUT``, as cp
        if len(args.inputs) < 2:
            raise ValueError("give the output: -o OUT_OR_DIR, or OUT as the last argument "
                             "(rumi convert in.tif out.rumi)")
        args.inputs, args.output = args.inputs[:-1], args.inputs[-1]
    if len(args.inputs) == 1 and args.inputs[0].lower().endswith(STAC_SUFFIXES):
        return run_items(args)
    targets = target_paths(args.inputs, args.output)
    if len(args.inputs) > 1:
        make_folder(args.output, args.storage_options)
    options = dict(tile_size=args.tile_size, frame_unit=args.frame_unit, compression=args.compression,
                   drop_georeferencing=args.drop_georeferencing, crs=args.crs,
                   storage_options=options_for(args.output, args.storage_options))
    results, failures = [], 0
    if len(targets) == 1 or (args.jobs or 1) <= 1:
        for source, target in zip(args.inputs, targets):
            with lazy_bar(desc=posixpath.basename(source), total=_frame_count(source, args), unit="frame",
                          leave=False) as update:
                try:
                    results.append(convert(source, target, progress=update, **options))
                except (ValueError, OSError) as exc:
                    failures += 1
                    print(f"rumi convert: {said_of(source, exc)}", file=sys.stderr)
    else:
        jobs = [(s, t, options) for s, t in zip(args.inputs, targets)]
        with lazy_bar(total=len(jobs), unit="file") as update:
            # strict: the processes' results run out with the jobs, which ends (and shuts down) the processes
            for (source, _, _), outcome in zip(jobs, in_processes(_convert_quietly, jobs, args.jobs), strict=True):
                if isinstance(outcome, Conversion):
                    results.append(outcome)
                else:
                    failures += 1
                    print(f"rumi convert: {said_of(source, outcome)}", file=sys.stderr)
                update(1)
    _summary(results)
    return 1 if failures else 0


def tile_side(text: str) -> int:
    """An argparse type: ``--tile-size``, 1 to 65535 px as ``write`` takes it."""
    side = positive_int(text)
    if side > MAX_TILE_SIDE:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_TILE_SIDE} px (TileWidth and TileLength are TIFF "
                                         f"SHORTs), got {text!r}")
    return side


def target_paths(sources: list[str], out: str) -> list[str]:
    """Where each source goes: ``out`` itself for one file, else ``out/<stem>.rumi``."""
    url = is_url(out)
    if len(sources) == 1 and not out.endswith("/" if url else os.sep) and (url or not os.path.isdir(out)):
        return [out]
    names = [os.path.splitext(posixpath.basename(s.split("?")[0]))[0] + ".rumi" for s in sources]
    if len(set(names)) != len(names):
        # outputs that would replace each other: refused like every command's (exit 1), not a usage error
        raise Refused("two inputs would write the same output name; convert them into different directories")
    return [posixpath.join(out, n) if url else os.path.join(out, n) for n in names]


def _convert_quietly(args) -> Conversion | ValueError | OSError:
    """One conversion of ``rumi convert -j``, in a worker process; a refusal is returned, to be reported in order."""
    source, target, options = args
    try:
        return convert(source, target, **options)
    except (ValueError, OSError) as exc:
        return exc


@contextlib.contextmanager
def lazy_bar(stream=None, **options):
    """The ``update`` of a tqdm bar on a terminal only (tqdm's ``disable=None``), shown from its first update: a
    file refused before its first frame shows no "0%" bar."""
    bar = None

    def update(n: int = 1) -> None:
        nonlocal bar
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(file=sys.stderr if stream is None else stream, disable=None, **options)
        bar.update(n)

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def _frame_count(source: str, args) -> int | None:
    """The frames converting ``source`` writes, for its bar; ``None`` when only converting tells (``auto``)."""
    import rasterio

    if args.frame_unit == "auto" or is_rumi_file(source):  # a rumi file: GDAL would warn about it at length
        return None
    try:
        with rasterio.open(source) as src:
            bands, rows, cols = src.count, src.height, src.width
    except Exception:  # the conversion itself reports what is wrong with the file
        return None
    return FrameGrid(cols, rows, args.tile_size, args.tile_size, bands, FrameUnit.parse(args.frame_unit)).frame_count


def _summary(results: list[Conversion]) -> None:
    if not results:
        return
    width = max(len(posixpath.basename(r.source)) for r in results)
    say(f"{'input':<{width}}  {'input bytes':>12}  {'rumi bytes':>12}  {'vs input':>8}  {'vs raw':>7}  crs")
    for r in results:
        source_bytes, versus = ("?", "?") if r.source_bytes is None else (
            r.source_bytes, f"{r.source_bytes / r.target_bytes:.2f}x")
        say(f"{posixpath.basename(r.source):<{width}}  {source_bytes:>12}  {r.target_bytes:>12}  "
            f"{versus:>8}  {r.ratio:>6.2f}x  {r.crs or 'none'}")
        if r.crs_source == "identified":
            say(f"  note: the source's CRS has no EPSG code of its own; stored {r.crs}, which pyproj identifies "
                f"as equivalent (confidence {CRS_CONFIDENCE} or more)")
        elif r.crs_source == "assigned":
            say(f"  note: {r.crs} assigned (--crs), the source's CRS replaced")
        for kept, note in ((r.nodata, nodata_note), (r.scaling, scale_note), (r.mask, mask_note),
                           (r.palette or None, palette_note)):
            if kept is not None:
                say(f"  note: {note(kept)}")


# -- STAC Items in: xarray_rumi.stac.convert_items, its progress and summary ----------------------------------

#: An input with one of these suffixes is a file of STAC Items, not a raster.
STAC_SUFFIXES = (".json", ".geojson", ".parquet")


def run_items(args) -> int:
    """``rumi convert items.json OUT_DIR``: every GeoTIFF asset converted, the new Items written beside them."""
    from ..stac.convert_files import run_jobs
    from ..stac.convert_items import converted_items, plan_jobs, source_item_dicts, summary

    if args.crs is not None or args.drop_georeferencing:
        raise Refused("--crs and --drop-georeferencing apply to raster inputs; a migration of STAC Items keeps "
                      "each asset's own georeferencing")
    source = args.inputs[0]
    check_folder(args.output.rstrip(os.sep))  # the output folder is made, never a folder above it
    dicts = source_item_dicts(source)
    options = dict(tile_size=args.tile_size, frame_unit=args.frame_unit, compression=args.compression)
    try:
        jobs = plan_jobs(dicts, args.output, options=options,
                         storage_options=options_for(args.output, args.storage_options))
    except ValueError as exc:  # Items whose ids cannot name their folders
        raise Refused(str(exc)) from None
    scheduler = contextlib.nullcontext()  # local processes, -j of them
    if args.scheduler is not None:
        from distributed import Client

        scheduler = Client(args.scheduler)  # ours: closed when the run ends
    with scheduler as client, lazy_bar(total=len(jobs), unit="file") as update:
        results = run_jobs(jobs, client, args.jobs, progress=lambda result: update(1))
    for result in results:
        if result.status == "failed":
            print(f"rumi convert: Item {result.job.item_id!r} asset {result.job.asset!r}: "
                  f"{said_of(result.job.source, result.reason)}", file=sys.stderr)
    items_file = _write_items(converted_items(dicts, results), args.output, source.lower().endswith(".parquet"),
                              options_for(args.output, args.storage_options))
    counts = summary(results)
    say(f"{len(results)} files: {counts['converted']} converted, {counts['kept']} already there and valid, "
        f"{counts['failed']} failed; {counts['bytes_in']} bytes in, {counts['bytes_out']} bytes out "
        f"({counts['ratio']:.2f}x); Items in {items_file}")
    return 1 if counts["failed"] else 0


def _write_items(items, output: str, geoparquet: bool, storage_options=None) -> str:
    """The new Items as ``items.json`` (or ``items.parquet``) in ``output``; a rerun that gives the same bytes
    writes nothing."""
    from ..io.source import ByteSource

    name = "items.parquet" if geoparquet else "items.json"
    target = posixpath.join(output, name) if is_url(output) else os.path.join(output, name)
    data = stac_bytes(items, target, collection=True)
    place = ByteSource.of(target, storage_options)
    try:
        unchanged = place.size() == len(data) and place.read(0, len(data)) == data
    except (OSError, ValueError):
        unchanged = False
    if not unchanged:
        write_output(target, data, storage_options)
    return target
