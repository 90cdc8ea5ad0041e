"""``rumi refs FILE [FILE ...]``: Kerchunk references to rumi files, written whole or not at all.

One reference set per file (:func:`xarray_rumi.virtual.kerchunk.layout_references`),
or with ``--cube`` one for a Cube built through VirtualiZarr
(:func:`xarray_rumi.virtual.cube.virtual_cube_references`).

:func:`write_references` writes a reference set anywhere fsspec writes, as
Kerchunk JSON or as kerchunk's Parquet references (``refs_to_dataframe``: a
directory of ``.zmetadata`` and Parquet record files), through
:mod:`xarray_rumi.writing.staging`: a failure leaves the previous output or
nothing.  JSON is staged as one file; Parquet is built in a local staging
directory, then renamed over the target or uploaded with ``.zmetadata``
last (a failed upload removes what it wrote).  fsspec's reference file
system takes either as ``fo``; Parquet needs ``fastparquet`` to read and,
with fsspec 2026.9 at least, an explicit ``remote_protocol`` (it otherwise
guesses the protocol from the first reference it meets, which may be an
unused record row).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..io.urls import is_local, is_url, local_path

# The zarr extra: without it this import fails, and ``rumi`` lists a stand-in that names the extra.
from ..virtual.kerchunk import consolidated, layout_references, reference_url

#: The formats ``write_references`` writes.
FORMATS = ("json", "parquet")
#: Output names that mean Parquet references when no format is given.
PARQUET_SUFFIXES = (".parq", ".parquet")
#: References per Parquet file: kerchunk's default.
RECORD_SIZE = 100_000


def add_command(commands) -> None:
    """Add ``rumi refs FILE [FILE ...] [-o OUT] [--format F] [--cube DIM]`` to the ``rumi`` command."""
    refs = commands.add_parser(
        "refs", help="write Kerchunk references to the frames of rumi files",
        description="One reference set per file (beside it, or in the -o directory when several), "
                    "or with --cube DIM one reference set stacking grid-aligned files along a new dimension, "
                    "built through VirtualiZarr. A FILE.header blob beside a file is used when present. "
                    "Outputs may be any fsspec URL (s3://bucket/cube.json); nothing is left half-written.",
    )
    refs.add_argument("file", nargs="+", help="rumi files: paths or URLs (file://, http(s)://, s3://)")
    refs.add_argument("-o", "--output",
                      help="where to write: a file (one FILE, or --cube) or a directory (several FILEs); "
                           "any fsspec URL (default: FILE.json, or FILE.parq with --format parquet, beside each FILE)")
    refs.add_argument("--format", choices=FORMATS, default=None,
                      help="json, or parquet (kerchunk's Parquet references, a directory) "
                           "(default: parquet when -o ends with .parq or .parquet, else json)")
    refs.add_argument("--cube", metavar="DIM", default=None,
                      help="stack the files along a new dimension DIM into one reference set, built with "
                           "VirtualiZarr's open_virtual_dataset, xr.concat and .vz.to_kerchunk (default: none, "
                           "one reference set per file)")
    refs.add_argument("--storage-options", metavar="JSON", type=_json_object, default=None,
                      help="fsspec storage options for writing -o, as a JSON object, e.g. "
                           "'{\"endpoint_url\": \"http://127.0.0.1:9000\"}' (default: none; credentials and "
                           "endpoints come from the environment)")
    refs.set_defaults(run=run)


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def run(args) -> int:
    """Run ``rumi refs``; returns the exit status."""
    from ..datamodel.variable import cube_layout, image_layout
    from ..virtual.cube import check_stack_dim, virtual_cube_references

    files = list(args.file)
    fmt, options = getattr(args, "format", None), getattr(args, "storage_options", None)
    if args.cube:
        if not args.output:
            print("rumi refs: --cube needs -o OUT (a .json file or a .parq directory, any fsspec URL)", file=sys.stderr)
            return 2
        check_stack_dim(args.cube)
        images = [_opened(f) for f in files]  # every file is tried, so that one run names every unreadable one
        if None in images:
            return 1
        layout = cube_layout(images, args.cube)
        if not _write(virtual_cube_references(images, args.cube), args.output, fmt, options):
            return 1
        print(f"wrote {args.output}: {len(files)} files along {args.cube!r}, "
              f"{_frame_count(layout)} frame references, {_moved_count(layout)} moved")
        return 0
    several = args.output and len(files) > 1
    if several and is_local(args.output):
        os.makedirs(local_path(args.output), exist_ok=True)
    for path in files:
        image = _opened(path)
        if image is None:
            return 1
        layout = image_layout(image)
        if several:
            target = f"{args.output.rstrip('/')}/{os.path.basename(path.rstrip('/'))}.{_suffix(fmt)}"
        else:
            target = args.output or f"{path}.{_suffix(fmt)}"
        if not _write(layout_references(layout), target, fmt, options):
            return 1
        print(f"wrote {target}: {_frame_count(layout)} frame references, {_moved_count(layout)} moved")
    return 0


def _beside_header(path: str):
    """``<path>.header`` when it exists (one HEAD request for a remote file), else ``None``."""
    blob = f"{path}.header"
    if not is_url(path):
        return blob if os.path.exists(blob) else None
    from fsspec.core import url_to_fs

    fs, target = url_to_fs(blob)
    return blob if fs.exists(target) else None


def _opened(path: str):
    """The image at ``path``, with the blob beside it if any; ``None`` once it has said why it cannot be opened.

    The command names the file itself: ``rumi``'s own handling knows only the list of FILEs.
    """
    from ..errors import RumiFormatError
    from ..reading.open import open_image

    try:
        return open_image(reference_url(path), _beside_header(path))
    except RumiFormatError as exc:
        print(f"rumi refs: {path}: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"rumi refs: cannot read {path}: {exc}", file=sys.stderr)
    return None


def _write(refs: dict, target: str, fmt: str | None, options: dict | None) -> bool:
    """Write, or say why not (the command's own error handling would call it a read failure)."""
    try:
        write_references(refs, target, format=fmt, storage_options=options)
    except OSError as exc:
        print(f"rumi refs: cannot write {target}: {exc}", file=sys.stderr)
        return False
    return True


def _suffix(fmt: str | None) -> str:
    """The name ending of a reference set written beside its file or into the -o directory."""
    return "parq" if fmt == "parquet" else "json"


def _frame_count(layout) -> int:
    return len(layout.headers) * layout.grid.frame_count


def _moved_count(layout) -> int:
    """References that start before their frame (see :mod:`xarray_rumi.virtual.edges`)."""
    from ..virtual.edges import chunk_references

    return chunk_references(list(layout.headers)).moved


# -- writing references ---------------------------------------------------------


def reference_format(url: str, format: str | None = None) -> str:
    """The format of references written to ``url``: ``format`` if given, else from the name.

    >>> reference_format("s3://bucket/cube.parq"), reference_format("cube.json"), reference_format("c", "parquet")
    ('parquet', 'json', 'parquet')
    """
    if format is None:
        return "parquet" if os.fspath(url).rstrip("/").endswith(PARQUET_SUFFIXES) else "json"
    if format not in FORMATS:
        raise ValueError(f"reference format must be one of {', '.join(FORMATS)}, got {format!r}")
    return format


def write_references(refs: dict, url, *, format: str | None = None, storage_options: dict | None = None,
                     record_size: int = RECORD_SIZE) -> str:
    """Write a Kerchunk reference set to ``url`` (a path or any fsspec URL); returns the format written.

    ``format`` is ``"json"`` or ``"parquet"`` (default: Parquet when ``url``
    ends with ``.parq`` or ``.parquet``, JSON otherwise); ``storage_options``
    go to fsspec for the target.  Both carry consolidated metadata, so
    xarray opens them with its defaults.  Whatever fails, the target holds either
    the complete new references, the previous ones, or nothing.

    >>> import os, tempfile, xarray as xr
    >>> refs = {"version": 1, "refs": {".zgroup": '{"zarr_format":2}'}}
    >>> out = os.path.join(tempfile.mkdtemp(), "empty.json")
    >>> write_references(refs, out), sorted(xr.open_dataset("reference://", engine="zarr", backend_kwargs={
    ...     "storage_options": {"fo": out}}).variables)
    ('json', [])
    """
    from ..io.source import ByteSource
    from ..writing.staging import staged_directory, write_small

    written = reference_format(url, format)
    target = ByteSource.of(url, storage_options)
    if written == "json":
        write_small(target, json.dumps(consolidated(refs), separators=(",", ":")).encode())
        return written
    from kerchunk.df import refs_to_dataframe

    # Parquet references keep their metadata in a .zmetadata of their own, which a reader opens first
    entries = {k: v for k, v in refs.get("refs", refs).items() if k != ".zmetadata"}
    with staged_directory(target, last=(".zmetadata",)) as built:
        refs_to_dataframe({"version": 1, "refs": entries}, built, record_size=record_size)
    return written
