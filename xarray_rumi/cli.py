"""The ``rumi`` command: info, validate, header, convert, refs, demo, stac and quicklook."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time

import numpy as np

from .errors import RumiFormatError


def main(argv=None) -> int:
    """Entry point of the ``rumi`` command; returns the exit status.

    >>> main(["validate", "/nonexistent.rumi"])
    rumi validate: cannot read /nonexistent.rumi: [Errno 2] No such file or directory: '/nonexistent.rumi'
    1
    """
    args = _parser().parse_args(argv)
    try:
        status = _run(args)
        sys.stdout.flush()  # a reader that left shows here at the latest, not as a message at interpreter exit
    except BrokenPipeError:
        # `rumi info f | head -1`: the reader has all it wanted. Stop without a word, as GNU tools do, and
        # point standard output at devnull so Python's own flush at exit has nowhere to fail (the recipe in
        # the signal module's documentation, which exits 1: here 1 says "invalid input", hence READER_GONE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return READER_GONE
    return status


def _run(args) -> int:
    """Run the command; the errors a user can cause become one line and an exit status."""
    report = sys.stdout if args.command == "validate" else sys.stderr  # validate's verdict is its output
    try:
        return args.run(args) or 0
    except RumiFormatError as exc:
        print(f"rumi {args.command}: {exc}", file=report)
        return 1
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and _output_is_a_pipe():
            raise  # our reader left (main stops quietly); on a file or terminal it is an I/O failure like any
        print(f"rumi {args.command}: cannot read {_unreadable(args, exc)}: {exc}", file=report)
        return 1
    except ValueError as exc:
        print(f"rumi {args.command}: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # a command whose optional dependencies are not installed
        extra = _EXTRAS.get(args.command, "all")
        print(f"rumi {args.command}: needs {exc.name or exc}, which is not installed: {install_hint(extra)}",
              file=sys.stderr)
        return 2


def _unreadable(args, exc: OSError) -> str:
    """The input an OSError is about, as the user wrote it: ``--header`` when the error names it, else FILE.

    Commands that read several files or write any name those failures
    themselves (``convert``, ``stac``, ``refs``; what ``header``, ``demo`` and
    ``quicklook`` write).

    >>> args = argparse.Namespace(file="a.rumi", header="a.blob")
    >>> _unreadable(args, FileNotFoundError(2, "No such file or directory", "a.blob"))
    'a.blob'
    >>> _unreadable(args, OSError("connection reset"))
    'a.rumi'
    """
    header = getattr(args, "header", None)
    if header and str(header) in str(exc):
        return str(header)
    files = getattr(args, "file", None) or getattr(args, "files", None) or ""
    return str(files) if isinstance(files, (str, os.PathLike)) else " ".join(map(str, files))


def _output_is_a_pipe() -> bool:
    """Whether standard output is a pipe or socket, the only outputs whose reader can leave."""
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # replaced by an object with no file (a test's capture)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def install_hint(extra: str) -> str:
    """How to install an extra: from an index, or from a clone of the repository.

    >>> install_hint("geo")
    'pip install "xarray-rumi[geo]" (in a clone: pip install ".[geo]")'
    """
    return f'pip install "xarray-rumi[{extra}]" (in a clone: pip install ".[{extra}]")'


#: Said at the end of every ``--help``.
EXIT_STATUS = ("exit status: 0 done (or the file is valid); 1 invalid, corrupt, unreadable or refused input; "
               "2 usage error or a missing optional dependency; 141 standard output closed early (| head), "
               "as for GNU tools")

#: The status when the reader of standard output leaves early: 128 + SIGPIPE, what a shell reports for a GNU
#: tool stopped that way, so that neither "done" (0) nor "invalid input" (1) is claimed.
READER_GONE = 141


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, as ``--help`` of GDAL's and Click's tools do.

    Help that already says its default (``default: ...``) is kept as it is;
    a flag's default is "off".
    """

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default is argparse.SUPPRESS:
            return text
        if action.nargs == 0 and isinstance(action.default, bool):  # a flag
            return f"{text} (default: {'on' if action.default else 'off'})"
        if action.default is None:
            return f"{text} (default: none)"
        return f"{text} (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: help formatted like ``rumi``'s, ending with the exit statuses."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EXIT_STATUS)
        super().__init__(*args, **kwargs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rumi", description="Read, check and write rumi raster files.",
                                     formatter_class=HelpFormatter, epilog=EXIT_STATUS)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser,
                                     metavar="COMMAND")

    info = commands.add_parser("info", help="describe a rumi file")
    info.add_argument("file", help="rumi file (path or URL)")
    info.add_argument("--header", help="header blob file (default: rebuild it from the IFD)")
    info.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    info.set_defaults(run=_info)

    check = commands.add_parser("validate", help="check a file against every rule of the spec")
    check.add_argument("file", help="rumi file (path or URL)")
    check.add_argument("--header", help="also check this header blob, and that it matches the file "
                                        "(default: check the file alone)")
    check.set_defaults(run=_validate)

    header = commands.add_parser("header", help="rebuild the header blob from the IFD")
    header.add_argument("file", help="rumi file (path or URL)")
    header.add_argument("-o", "--output", help="where to write it (default: FILE.header)")
    header.set_defaults(run=_header)

    demo = commands.add_parser("demo", help="write, validate and read back a generated raster",
                               description="Write a generated 4-band raster as DIR/demo.rumi, its blob as "
                                           "DIR/demo.rumi.header, validate both and read the raster back.")
    demo.add_argument("dir", nargs="?", default=".", metavar="DIR",
                      help="directory to write demo.rumi and demo.rumi.header into, made if missing "
                           "(default: the current directory)")
    demo.set_defaults(run=_demo)

    for extra in _extra_commands():
        extra(commands)
    from .stac.commands import add_quicklook_command, add_stac_command

    add_stac_command(commands)
    add_quicklook_command(commands)
    return parser


#: Commands whose modules need optional dependencies, and the extra that brings them.
_EXTRAS = {"convert": "geo", "refs": "zarr", "stac": "stac"}
_MODULES = {"convert": "xarray_rumi.writing.convert", "refs": "xarray_rumi.virtual.kerchunk"}


def _extra_commands():
    """``add_command`` of each optional command, or a stand-in that explains what to install."""
    found = []
    for command, module in _MODULES.items():
        try:
            found.append(__import__(module, fromlist=["add_command"]).add_command)
        except ImportError as exc:
            found.append(_missing_command(command, exc))
    return found


def _missing_command(command: str, error: ImportError):
    def run(args):
        raise error  # main() turns it into the install hint

    def add(commands) -> None:
        stand_in = commands.add_parser(command, help=f"(needs: {install_hint(_EXTRAS[command])})")
        stand_in.add_argument("arguments", nargs=argparse.REMAINDER)
        stand_in.set_defaults(run=run)

    return add


def _info(args) -> int:
    from .reading.open import open_image

    image = open_image(args.file, header=args.header)
    header, grid = image.header, image.grid
    counts = header.byte_counts()
    raw = grid.image_width * grid.image_length * grid.samples_per_pixel * header.sample_type.bytes_per_sample
    geo = image.georeferencing
    if args.json:
        print(json.dumps(_info_json(args.file, image, counts, raw), indent=2))
        return 0
    print(f"file         {args.file}")
    print(f"shape        {grid.samples_per_pixel} bands x {grid.image_length} rows x {grid.image_width} columns")
    print(f"sample type  {header.sample_type.name} (sample_format {header.sample_type.sample_format}, "
          f"{header.sample_type.bits_per_sample} bits) -> {header.sample_type.dtype}")
    print(f"frame unit   {grid.frame_unit.name.lower()}")
    print(f"grid         {grid.tiles_across} x {grid.tiles_down} of {grid.tile_length} x {grid.tile_width} px, "
          f"{grid.frame_count} frames")
    if geo is not None and geo.is_defined:
        print(f"crs          EPSG:{geo.epsg} ({geo.model_type.name.lower()}), pixel is {geo.raster_type.name.lower()}")
        print(f"transform    {', '.join(_exact(v) for v in geo.transform)}")
    else:
        print("crs          none (undefined georeferencing)")
    print(f"frame bytes  min {counts.min()}, median {int(np.median(counts))}, max {counts.max()}, "
          f"blob {len(header.to_bytes())} bytes")
    print(f"size         {header.file_size} bytes for {raw} raw: ratio {raw / header.file_size:.2f}")
    return 0


def _exact(value: float) -> str:
    """The shortest text that reads back as ``value`` (Python's ``repr``), without a trailing ``.0``.

    >>> _exact(2826915.0), _exact(2826915.25), _exact(0.1), _exact(-30.0), _exact(1e-07)
    ('2826915', '2826915.25', '0.1', '-30', '1e-07')
    """
    return repr(float(value)).removesuffix(".0")


def _info_json(file, image, counts, raw) -> dict:
    """What ``rumi info`` prints, as one JSON object (names as in the STAC Item where STAC has one)."""
    header, grid, geo = image.header, image.grid, image.georeferencing
    defined = geo is not None and geo.is_defined
    return {
        "file": str(file),
        "bands": grid.samples_per_pixel, "rows": grid.image_length, "columns": grid.image_width,
        "sample_type": header.sample_type.name, "sample_format": header.sample_type.sample_format,
        "bits_per_sample": header.sample_type.bits_per_sample, "dtype": str(header.sample_type.dtype),
        "frame_unit": grid.frame_unit.name.lower(),
        "tile_shape": [grid.tile_length, grid.tile_width], "tiles": [grid.tiles_down, grid.tiles_across],
        "frame_count": grid.frame_count,
        "crs": f"EPSG:{geo.epsg}" if defined else None,
        "model_type": geo.model_type.name.lower() if defined else None,
        "raster_type": geo.raster_type.name.lower() if geo is not None else None,
        "transform": list(geo.transform) if defined else None,
        "frame_bytes": {"min": int(counts.min()), "median": int(np.median(counts)), "max": int(counts.max())},
        "blob_bytes": len(header.to_bytes()),
        "file_size": header.file_size, "raw_size": raw, "ratio": raw / header.file_size,
    }


def _validate(args) -> int:
    from .reading.validate import validate

    validate(args.file, args.header)
    print(f"{args.file}: valid rumi 0.1.0")
    return 0


def _header(args) -> int:
    from .reading.open import header_from_file

    blob = header_from_file(args.file)
    output = args.output or f"{args.file}.header"
    try:
        with open(output, "wb") as f:
            f.write(blob)
    except OSError as exc:
        print(f"rumi header: cannot write {output}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {output} ({len(blob)} bytes)")
    return 0


def demo_raster(bands: int = 4, rows: int = 768, cols: int = 1024) -> np.ndarray:
    """A smooth, noisy multi-band uint16 raster, like a small optical scene."""
    y, x = np.mgrid[0:rows, 0:cols].astype(np.float32)
    rng = np.random.default_rng(42)
    terrain = 2000 + 800 * np.sin(x / 97) * np.cos(y / 71) + 300 * np.sin((x + y) / 23)
    layers = [terrain * (0.6 + 0.15 * b) + rng.normal(0, 12, terrain.shape) for b in range(bands)]
    return np.clip(np.stack(layers), 0, 65535).astype(np.uint16)


def _demo(args) -> int:
    import xarray as xr
    from pyproj import CRS

    from .reading.validate import validate
    from .writing.write import write

    path = os.path.join(args.dir, "demo.rumi")
    data = demo_raster()
    t0 = time.perf_counter()
    try:
        os.makedirs(args.dir, exist_ok=True)
        blob = write(path, data, tile_size=256, frame_unit="tile", crs="EPSG:32633",
                     transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0))
    except OSError as exc:
        print(f"rumi demo: cannot write {path}: {exc}", file=sys.stderr)
        return 1
    t1 = time.perf_counter()
    size = os.path.getsize(path)
    print(f"wrote     {path}: {data.shape[0]} bands x {data.shape[1]} x {data.shape[2]} uint16, "
          f"{size} bytes (ratio {data.nbytes / size:.2f}) in {t1 - t0:.2f} s")
    print(f"header    {path}.header: {len(blob)} bytes locate all frames")
    validate(path, blob)
    print("validate  the file and its blob follow every rule of rumi 0.1.0, every frame decoded")
    ds = xr.open_dataset(path, engine="rumi", header=blob, chunks={})
    crs = CRS.from_wkt(ds.spatial_ref.attrs["crs_wkt"])
    print(f"open      band_data {dict(ds.band_data.sizes)} lazily, one Dask chunk per frame "
          f"({ds.band_data.data.npartitions} chunks of {ds.band_data.data.chunksize}), CRS EPSG:{crs.to_epsg()}")
    back = ds.band_data.values
    same = np.array_equal(back, data)
    print(f"read back {'identical to' if same else 'DIFFERENT from'} what was written")
    print(f"kept      both in {os.path.abspath(args.dir)}; next: rumi info {path}")
    return 0 if same else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
