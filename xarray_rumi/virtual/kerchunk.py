"""Kerchunk (version 1) references to the frames of rumi files, and ``rumi refs``.

The references describe one Zarr v2 group, laid out as rioxarray's engine
opens the file: ``band_data`` on ``(band, y, x)`` with one chunk per frame
(``(1, T_l, T_w)`` for tile frames, ``(B, T_l, T_w)`` for cell frames) and one
``[url, offset, length]`` reference per frame, plus ``x``, ``y``, ``band`` and
``spatial_ref`` inlined.  The chunks decode with the ``"openzl"`` numcodecs
codec, whose configuration carries what it needs to place cut edge frames
(see :mod:`xarray_rumi.virtual.codec` and :mod:`xarray_rumi.virtual.edges`).

From a header blob, no frame is read: only the 160 bytes of georeferencing
and the IFD head the blob is checked against, in one batched read, and
nothing at all when the caller passes ``crs`` and ``transform``.

:func:`write_references` writes a reference set anywhere fsspec writes, as
Kerchunk JSON or as kerchunk's Parquet references (``refs_to_dataframe``: a
directory of ``.zmetadata`` and Parquet record files), whole or not at all:
JSON locally through a temporary file renamed over the target, remotely in
one upload; Parquet built in a local temporary directory first, then renamed
over the target or uploaded with ``.zmetadata`` last (a failed upload removes
what it wrote).  fsspec's reference file system takes either as ``fo``;
Parquet needs ``fastparquet`` to read and, with fsspec 2026.9 at least, an
explicit ``remote_protocol`` (it otherwise guesses the protocol from the
first reference it meets, which may be an unused record row).

``rumi refs`` writes one reference set per file with :func:`layout_references`,
or with ``--cube`` one for a Cube built through VirtualiZarr
(:func:`xarray_rumi.virtual.parser.virtual_cube_references`).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile

import numpy as np

from ..datamodel.coords import GRID_MAPPING
from ..datamodel.variable import VARIABLE, Layout, cube_layout, image_layout
from ..reading.open import open_image
from .chunks import zarr_dtype
from .codec import OpenZLCodec
from .edges import chunk_references
from .parser import check_stack_dim, virtual_cube_references


def references(path, header=None, **open_kwargs) -> dict:
    """Kerchunk version-1 references to every frame of a rumi file.

    ``header`` and the keyword arguments are :func:`xarray_rumi.open_image`'s
    (``storage_options``, ``crs``/``transform``/``raster_type``,
    ``georeferencing``, ``limits``, ``verify``, ``retry``): with a blob and
    ``crs``/``transform`` nothing is read; with a blob alone, the 160 bytes of
    georeferencing and the IFD head it is checked against; without one, the
    IFD.

    >>> import numpy as np, tempfile, os, xarray as xr, xarray_rumi
    >>> from xarray_rumi.reading.open import load_header
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> data = np.arange(2 * 5 * 7, dtype="uint16").reshape(2, 5, 7)
    >>> blob = xarray_rumi.write(path, data, tile_size=4, crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6))
    >>> refs = references(path, blob)
    >>> header = load_header(blob)   # band 1 of grid row 1, column 0 is frame 5
    >>> refs["refs"]["band_data/1.1.0"] == [path, header.offset(5), header.byte_count(5)]
    True
    >>> ds = xr.open_dataset("reference://", engine="zarr", backend_kwargs={"consolidated": False,
    ...                      "storage_options": {"fo": refs}})
    >>> bool((ds.band_data.values == data).all()), float(ds.x[0])
    (True, 500005.0)
    """
    return layout_references(image_layout(open_image(_url(path), header, **open_kwargs)))


def cube_references(paths, dim: str, headers=None, **open_kwargs) -> dict:
    """One reference set stacking grid-aligned files along a new dimension ``dim``.

    The files must share grid, frame unit, sample type and georeferencing;
    ``band_data`` is then ``(dim, band, y, x)`` with one chunk per frame, and
    one codec configuration covers all files.  ``open_kwargs`` go to
    :func:`xarray_rumi.open_image` for every file.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> paths = [os.path.join(tempfile.mkdtemp(), f"t{n}.rumi") for n in range(2)]
    >>> blobs = [xarray_rumi.write(p, np.full((1, 6, 6), n, "uint8"), tile_size=4) for n, p in enumerate(paths)]
    >>> refs = cube_references(paths, "time", blobs)
    >>> json.loads(refs["refs"]["band_data/.zarray"])["shape"], sorted(k for k in refs["refs"] if k.startswith("band_data/1."))
    ([2, 1, 6, 6], ['band_data/1.0.0.0', 'band_data/1.0.0.1', 'band_data/1.0.1.0', 'band_data/1.0.1.1'])
    """
    headers = list(headers) if headers is not None else [None] * len(paths)
    if len(headers) != len(paths):
        raise ValueError(f"{len(paths)} files but {len(headers)} headers")
    if not paths:
        raise ValueError("no files to reference")
    images = [open_image(_url(p), h, **open_kwargs) for p, h in zip(paths, headers)]
    return layout_references(cube_layout(images, dim))


def layout_references(layout: Layout) -> dict:
    """The reference set of an image's or a Cube's :class:`~xarray_rumi.dataset.layout.Layout`."""
    grid, sample = layout.grid, layout.sample_type
    plan = chunk_references(list(layout.headers))
    codec = OpenZLCodec(sample_type=sample.name, chunk_shape=layout.chunks[-3:],
                        image_shape=(grid.image_length, grid.image_width))
    attrs = {
        "_ARRAY_DIMENSIONS": list(layout.dims),
        "coordinates": layout.coordinates_attribute,
        "grid_mapping": GRID_MAPPING,
        "rumi_sample_type": sample.name,
        **layout.attrs,
    }
    if layout.stack_dim is not None:
        attrs["rumi_sources"] = list(layout.sources)
    refs = {".zgroup": _json({"zarr_format": 2}), ".zattrs": _json({})}
    refs[f"{VARIABLE}/.zarray"] = _json(_zarray(layout.shape, layout.chunks, zarr_dtype(sample), codec.get_config()))
    refs[f"{VARIABLE}/.zattrs"] = _json(attrs)

    keys = _chunk_keys(grid)
    for n, url in enumerate(layout.sources):
        prefix = f"{VARIABLE}/{n}." if layout.stack_dim is not None else f"{VARIABLE}/"
        for key, start, length in zip(keys, plan.starts[n].tolist(), plan.lengths[n].tolist()):
            refs[prefix + key] = [url, start, length]

    for name, coordinate in layout.coords.items():
        refs.update(_inline(name, np.asarray(coordinate.values), list(coordinate.dims), coordinate.attrs))
    return consolidated({"version": 1, "refs": refs})


#: The Zarr v2 metadata keys that consolidated metadata gathers.
_METADATA = (".zarray", ".zattrs", ".zgroup")


def consolidated(refs: dict) -> dict:
    """``refs`` with Zarr v2 consolidated metadata (``.zmetadata``) made from its metadata keys.

    xarray's zarr engine opens consolidated metadata by default and warns
    when there is none; with it, a reference set opens with no option at all.

    >>> refs = consolidated({"version": 1, "refs": {".zgroup": '{"zarr_format":2}', "a/0": ["f", 0, 1]}})
    >>> json.loads(refs["refs"][".zmetadata"])
    {'zarr_consolidated_format': 1, 'metadata': {'.zgroup': {'zarr_format': 2}}}
    """
    entries = {k: v for k, v in refs["refs"].items() if k != ".zmetadata"}
    metadata = {k: v if isinstance(v, dict) else json.loads(v) for k, v in entries.items()
                if k.rsplit("/", 1)[-1] in _METADATA}
    return {**refs, "refs": {**entries, ".zmetadata": _json({"zarr_consolidated_format": 1, "metadata": metadata})}}


def _chunk_keys(grid) -> list[str]:
    """``band.row.col`` of every frame, in frame-index order."""
    position, band = np.divmod(np.arange(grid.frame_count, dtype=np.int64), grid.frames_per_position)
    row, col = np.divmod(position, grid.tiles_across)
    return [f"{b}.{r}.{c}" for b, r, c in zip(band.tolist(), row.tolist(), col.tolist())]


def _zarray(shape, chunks, dtype: np.dtype, compressor) -> dict:
    # fill_value null: rumi has no nodata, and a Zarr v2 fill value would become
    # _FillValue in xarray and mask real pixels.
    return {
        "zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": np.dtype(dtype).str,
        "compressor": compressor, "filters": None, "fill_value": None, "order": "C", "dimension_separator": ".",
    }


def _inline(name: str, values: np.ndarray, dims: list[str], attrs: dict) -> dict:
    """A small array stored whole in the references, as one base64 chunk."""
    values = np.array(values, order="C")  # ascontiguousarray would make a 0-d array 1-d
    key = ".".join("0" for _ in values.shape) or "0"
    return {
        f"{name}/.zarray": _json(_zarray(values.shape, values.shape, values.dtype, None)),
        f"{name}/.zattrs": _json({"_ARRAY_DIMENSIONS": dims, **attrs}),
        f"{name}/{key}": "base64:" + base64.b64encode(values.astype(values.dtype.newbyteorder("<")).tobytes()).decode(),
    }


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _url(path) -> str:
    path = os.fspath(path)
    if "://" in path and not path.startswith("file://"):
        return path
    return os.path.abspath(path.removeprefix("file://"))


# -- writing references ---------------------------------------------------------

#: The formats ``write_references`` writes.
FORMATS = ("json", "parquet")
#: Output names that mean Parquet references when no format is given.
PARQUET_SUFFIXES = (".parq", ".parquet")
#: References per Parquet file: kerchunk's default.
RECORD_SIZE = 100_000


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
    the complete new references or no new bytes at all.

    >>> import os, tempfile, xarray as xr
    >>> refs = {"version": 1, "refs": {".zgroup": '{"zarr_format":2}'}}
    >>> out = os.path.join(tempfile.mkdtemp(), "empty.json")
    >>> write_references(refs, out), sorted(xr.open_dataset("reference://", engine="zarr", backend_kwargs={
    ...     "storage_options": {"fo": out}}).variables)
    ('json', [])
    """
    import fsspec
    from fsspec.implementations.local import LocalFileSystem

    written = reference_format(url, format)
    fs, path = fsspec.core.url_to_fs(os.fspath(url), **(storage_options or {}))
    local = isinstance(fs, LocalFileSystem)
    if written == "json":
        data = json.dumps(consolidated(refs), separators=(",", ":")).encode()
        if local:
            _replace_file(path, data)
        else:
            fs.pipe_file(path, data)   # one PUT: an object store shows it whole or not at all
        return written
    from kerchunk.df import refs_to_dataframe

    parent = os.path.dirname(os.path.abspath(path)) if local else None
    with tempfile.TemporaryDirectory(dir=parent, prefix=".rumi-refs-") as staging:
        built = os.path.join(staging, "refs.parq")
        # Parquet references keep their metadata in a .zmetadata of their own
        entries = {k: v for k, v in refs.get("refs", refs).items() if k != ".zmetadata"}
        refs_to_dataframe({"version": 1, "refs": entries}, built, record_size=record_size)
        if local:
            _replace_directory(built, path, staging)
        else:
            _upload_directory(fs, built, path)
    return written


def _replace_file(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _replace_directory(built: str, path: str, staging: str) -> None:
    """Rename ``built`` to ``path``, moving an older output aside into ``staging`` (removed with it)."""
    previous = os.path.join(staging, "previous")
    if os.path.lexists(path):
        os.replace(path, previous)
    try:
        os.replace(built, path)
    except BaseException:
        if os.path.lexists(previous):
            os.replace(previous, path)
        raise


def _upload_directory(fs, built: str, path: str) -> None:
    """Upload ``built`` to ``path``, ``.zmetadata`` (what a reader opens first) last."""
    files = sorted(
        (os.path.relpath(os.path.join(root, name), built) for root, _, names in os.walk(built) for name in names),
        key=lambda name: (name == ".zmetadata", name),
    )
    path = path.rstrip("/")
    if fs.exists(path):   # record files of an older, larger reference set would linger
        fs.rm(path, recursive=True)
    try:
        for name in files:
            fs.put_file(os.path.join(built, name), f"{path}/{name.replace(os.sep, '/')}")
    except BaseException:
        try:
            fs.rm(path, recursive=True)
        except Exception:  # noqa: BLE001 - the upload's error is the one to report
            pass
        raise


# -- rumi refs ------------------------------------------------------------------

def add_command(subparsers) -> None:
    """Add ``rumi refs FILE [FILE ...] [-o OUT] [--format F] [--cube DIM]`` to the ``rumi`` command."""
    refs = subparsers.add_parser(
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
    refs.set_defaults(run=run_refs)


def _json_object(text: str) -> dict:
    import argparse

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _beside_header(path: str):
    """``<path>.header`` when it exists (one HEAD request for a remote file), else ``None``."""
    blob = f"{path}.header"
    if "://" not in path:
        return blob if os.path.exists(blob) else None
    from fsspec.core import url_to_fs

    fs, target = url_to_fs(blob)
    return blob if fs.exists(target) else None


def run_refs(args) -> int:
    """Run ``rumi refs``; returns the exit status."""
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
    if several and _is_local(args.output):
        os.makedirs(args.output.removeprefix("file://"), exist_ok=True)
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


def _opened(path: str):
    """The image at ``path``, with the blob beside it if any; ``None`` once it has said why it cannot be opened.

    The command names the file itself: ``rumi``'s own handling knows only the list of FILEs.
    """
    from ..errors import RumiFormatError

    try:
        return open_image(_url(path), _beside_header(path))
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


def _is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


def _suffix(fmt: str | None) -> str:
    """The name ending of a reference set written beside its file or into the -o directory."""
    return "parq" if fmt == "parquet" else "json"


def _frame_count(layout: Layout) -> int:
    return len(layout.headers) * layout.grid.frame_count


def _moved_count(layout: Layout) -> int:
    """References that start before their frame (see :mod:`xarray_rumi.virtual.edges`)."""
    return chunk_references(list(layout.headers)).moved
