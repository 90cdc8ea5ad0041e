"""``rumi refs FILE [FILE ...]``: Kerchunk references, one set per file or with ``--cube`` one for a Cube."""

from __future__ import annotations

import os

from ..datamodel.variable import cube_layout, image_layout
from ..io.urls import absolute
from .shared import (STDOUT, CannotWrite, Refused, add_storage_options, blob_for, check_outputs, make_folder,
                     options_for, read_by, read_or_report, say, write_output)

# The zarr extra: without it this import fails, and ``rumi`` lists a stand-in that names the extra.
from ..virtual.kerchunk import compact_json, consolidated, layout_references

FORMATS = ("json", "parquet")
#: Output names that mean Parquet references when no format is given.
PARQUET_SUFFIXES = (".parq", ".parquet")


def add_command(commands) -> None:
    refs = commands.add_parser(
        "refs", help="write Kerchunk references to the frames of rumi files",
        description="One reference set per file (beside it, or in the -o directory when several), or with "
                    "--cube DIM one stacking grid-aligned files along a new dimension, built through VirtualiZarr "
                    "(docs/virtual-zarr.md). Nothing is left half-written; an output that is a FILE or its blob, or "
                    "two outputs of one name, are refused before anything is written.")
    refs.add_argument("file", nargs="+", help="rumi files: paths or URLs (file://, http(s)://, s3://)")
    refs.add_argument("-o", "--output",
                      help="where to write: a file (one FILE, or --cube) or a directory (several FILEs, made if "
                           "missing); any fsspec URL, or '-' for standard output (JSON, one reference set); "
                           "missing folders above it are not created "
                           "(default: FILE.json, or FILE.parq with --format parquet, beside each FILE)")
    refs.add_argument("--format", choices=FORMATS, default=None,
                      help="json, or parquet (kerchunk's Parquet references, a directory) "
                           "(default: parquet when -o ends with .parq or .parquet, else json)")
    refs.add_argument("--cube", metavar="DIM", help="stack the files along a new dimension DIM into one reference "
                                                    "set (default: none, one reference set per file)")
    add_storage_options(refs)
    refs.set_defaults(run=run)


def run(args) -> int:
    files = list(args.file)
    fmt, options = args.format, args.storage_options
    if args.cube:
        return _run_cube(files, args.cube, args.output, fmt, options)
    targets = _targets(files, args.output, fmt)
    into_folder = bool(args.output) and len(files) > 1
    check_outputs(targets, read_by(files), "a raster or its blob", folders=not into_folder)
    if into_folder:
        make_folder(args.output, options)
    for path, target in zip(files, targets):
        image = _opened(path, options)
        if image is None:
            return 1
        layout = image_layout(image)
        write_references(layout_references(layout), target, format=fmt, storage_options=options)
        if target != STDOUT:
            say(f"wrote {target}: {_counts(layout)}")
    return 0


def _run_cube(files: list[str], dim: str, output: str | None, fmt: str | None, options) -> int:
    from ..virtual.cube import check_stack_dim, virtual_cube_references

    if not output:
        raise ValueError("--cube needs -o OUT (a .json file or a .parq directory, any fsspec URL)")
    check_stack_dim(dim)
    check_outputs(_targets(files, output, fmt, cube=True), read_by(files), "a raster or its blob")
    images = [_opened(f, options) for f in files]  # every file is tried, so that one run names every unreadable one
    if None in images:
        return 1
    try:  # images that do not stack are refused input (status 1), not a usage error
        layout = cube_layout(images, dim)
        refs = virtual_cube_references(images, dim)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    write_references(refs, output, format=fmt, storage_options=options)
    if output != STDOUT:
        say(f"wrote {output}: {len(files)} files along {dim!r}, {_counts(layout)}")
    return 0


def _targets(files: list[str], output: str | None, fmt: str | None, cube: bool = False) -> list[str]:
    """Where the references go: at ``output`` for a Cube or one file, else beside each file or into the ``output``
    folder; ``-o -`` takes one JSON reference set, a usage error otherwise (Parquet references are a directory)."""
    if output == STDOUT and len(files) > 1 and not cube:
        raise ValueError("-o - (standard output) takes one reference set: give one FILE, or --cube")
    if output == STDOUT and fmt == "parquet":
        raise ValueError("-o - (standard output) takes JSON references; Parquet references are a directory")
    suffix = "parq" if fmt == "parquet" else "json"
    if not output:
        return [f"{path}.{suffix}" for path in files]
    if cube or len(files) == 1:
        return [output]
    return [f"{output.rstrip('/')}/{os.path.basename(path.rstrip('/'))}.{suffix}" for path in files]


def _opened(path: str, options: dict | None):
    """The image at ``path`` (read as every command reads a file); ``None`` once it has said why it cannot be."""
    from ..reading.open import open_image

    options = options_for(path, options)
    return read_or_report("refs", path, lambda: open_image(absolute(path), blob_for(path, None, options),
                                                           storage_options=options))


def _counts(layout) -> str:
    """The frame references of ``layout``, and how many start before their frame (:mod:`xarray_rumi.virtual.edges`)."""
    from ..virtual.edges import chunk_references

    moved = chunk_references(list(layout.headers)).moved
    return f"{len(layout.headers) * layout.grid.frame_count} frame references, {moved} moved"


def write_references(refs: dict, url, *, format: str | None = None, storage_options: dict | None = None) -> None:
    """Write a Kerchunk reference set with consolidated metadata to ``url`` (a path, an fsspec URL, or ``-`` for
    standard output), whole or not at all: JSON, or kerchunk's Parquet references for ``format="parquet"`` or
    (no ``format``) a ``.parq`` name; :class:`~xarray_rumi.cli.shared.CannotWrite` if it cannot. A local ``url``
    takes no ``storage_options``."""
    if format is None:
        format = "parquet" if os.fspath(url).rstrip("/").endswith(PARQUET_SUFFIXES) else "json"
    if format not in FORMATS:
        raise ValueError(f"reference format must be one of {', '.join(FORMATS)}, got {format!r}")
    storage_options = options_for(url, storage_options)
    if format == "json":
        write_output(url, (compact_json(consolidated(refs)) + "\n").encode(), storage_options)
        return
    from kerchunk.df import refs_to_dataframe

    from ..io.source import ByteSource
    from ..writing.staging import staged_directory

    # Parquet references keep their metadata in a .zmetadata of their own, which a reader opens first
    entries = {k: v for k, v in refs.get("refs", refs).items() if k != ".zmetadata"}
    try:
        with staged_directory(ByteSource.of(url, storage_options), last=(".zmetadata",)) as built:
            refs_to_dataframe({"version": 1, "refs": entries}, built)
    except OSError as exc:
        raise CannotWrite(url, exc) from exc
