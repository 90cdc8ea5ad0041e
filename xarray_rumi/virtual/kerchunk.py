"""Kerchunk (version 1) references to the frames of rumi files, and ``rumi refs``.

The references describe one Zarr v2 group, laid out as rioxarray's engine
opens the file: ``band_data`` on ``(band, y, x)`` with one chunk per frame
(``(1, T_l, T_w)`` for tile frames, ``(B, T_l, T_w)`` for cell frames) and one
``[url, offset, length]`` reference per frame, plus ``x``, ``y``, ``band`` and
``spatial_ref`` inlined.  The chunks decode with the ``"openzl"`` numcodecs
codec, whose configuration carries what it needs to place cut edge frames
(see :mod:`xarray_rumi.virtual.codec` and :mod:`xarray_rumi.virtual.edges`).

From a header blob, no frame is read: only the 160 bytes of georeferencing,
and not even those when the caller passes ``crs`` and ``transform``.
"""

from __future__ import annotations

import base64
import json
import os
import sys

import numpy as np

from ..dataset.coords import GRID_MAPPING
from ..dataset.layout import VARIABLE, Layout, cube_layout, image_layout
from ..reading.open import open_image
from .codec import OpenZLCodec, zarr_dtype
from .edges import chunk_references


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
    one edge table covers all files.  ``open_kwargs`` go to
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
    return {"version": 1, "refs": refs}


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


# -- rumi refs ------------------------------------------------------------------

def add_command(subparsers) -> None:
    """Add ``rumi refs FILE [FILE ...] [-o OUT] [--cube DIM]`` to the ``rumi`` command."""
    refs = subparsers.add_parser(
        "refs", help="write Kerchunk references to the frames of rumi files",
        description="One reference JSON per file (beside it, or in the -o directory when several), "
                    "or with --cube DIM one JSON stacking grid-aligned files along a new dimension. "
                    "A FILE.header blob beside a file is used when present.",
    )
    refs.add_argument("file", nargs="+")
    refs.add_argument("-o", "--output", help="output JSON (one file or --cube) or directory (several files)")
    refs.add_argument("--cube", metavar="DIM", help="stack the files along a new dimension DIM into one reference set")
    refs.set_defaults(run=run_refs)


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
    if args.cube:
        if not args.output:
            print("rumi refs: --cube needs -o OUT.json", file=sys.stderr)
            return 2
        images = [open_image(_url(f), _beside_header(f)) for f in files]
        layout = cube_layout(images, args.cube)
        _write_json(args.output, layout_references(layout))
        print(f"wrote {args.output}: {len(files)} files along {args.cube!r}, {_frame_count(layout)} frame references, "
              f"{_moved_count(layout)} moved")
        return 0
    if args.output and len(files) > 1:
        os.makedirs(args.output, exist_ok=True)
    for path in files:
        layout = image_layout(open_image(_url(path), _beside_header(path)))
        if args.output and len(files) > 1:
            target = os.path.join(args.output, os.path.basename(path) + ".json")
        else:
            target = args.output or f"{path}.json"
        _write_json(target, layout_references(layout))
        print(f"wrote {target}: {_frame_count(layout)} frame references, {_moved_count(layout)} moved")
    return 0


def _frame_count(layout: Layout) -> int:
    return len(layout.headers) * layout.grid.frame_count


def _moved_count(layout: Layout) -> int:
    """References that start before their frame (see :mod:`xarray_rumi.virtual.edges`)."""
    return chunk_references(list(layout.headers)).moved


def _write_json(path: str, value: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, separators=(",", ":"))
    os.replace(tmp, path)
