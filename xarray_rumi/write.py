"""Writing compliant rumi files from numpy, xarray and Dask.

Frames are encoded in frame-index order by a small thread pool (the encoder
releases the GIL) with a bounded number in flight, streamed to a temporary
file after the fixed-size prefix, and the file is renamed into place only
when complete: a failure leaves nothing at the target path.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .format.blob import Header
from .format.dtypes import SampleType, sample_type_for_dtype, sample_type_from_name
from .format.geo import georeferencing
from .format.grid import FrameGrid, FrameUnit
from .format.ifd import build_prefix
from .format.layout import base_frame_offset
from .format.limits import DEFAULT_LIMITS
from .io.frames import AUTO_RECIPES, PORTABLE_RECIPES, applicable, encode_frame
from .io.source import ByteSource

_SAMPLE_FRAMES = 3  # frames "auto" measures its candidates on


def write(path, data, *, tile_size=512, frame_unit="tile", crs=None, transform=None, raster_type="area",
          sample_type=None, compression="auto", storage_options=None, write_header=True) -> bytes:
    """Write ``data`` as a rumi file and return its header blob.

    ``data`` is a numpy array ``(B, Y, X)`` or ``(Y, X)``, or a DataArray
    ``(band, y, x)`` whose rioxarray CRS and transform are used when ``crs`` /
    ``transform`` are not given.  ``path`` may be any fsspec URL.  With
    ``write_header`` the blob is also stored beside the file as
    ``<path>.header``.

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = write(path, np.ones((2, 100, 80), "uint16"), tile_size=64,
    ...              crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    >>> len(blob), os.path.exists(path + ".header")
    (28, True)
    """
    array, geo_defaults, encoding = _as_band_array(data)
    if crs is None and transform is None and geo_defaults:
        crs, transform = geo_defaults
    sample = _sample_type(sample_type, encoding, array.dtype)
    georef = georeferencing(crs, transform, raster_type)
    tile_length, tile_width = _tile_shape(tile_size)
    bands, length, width = array.shape
    grid = FrameGrid(width, length, tile_width, tile_length, bands, FrameUnit.parse(frame_unit)).check(DEFAULT_LIMITS)
    recipe = choose_recipe(array, grid, sample, compression)

    frames = (_stored_frame(array, grid, sample, k) for k in range(grid.frame_count))
    target = ByteSource.of(path, storage_options)
    counts = _write_atomically(target, grid, frames, recipe, lambda counts: build_prefix(grid, sample, georef, counts))
    blob = Header.from_byte_counts(grid, sample, counts).to_bytes()
    if write_header:
        _write_small_atomically(ByteSource.of(f"{target.url}.header", storage_options), blob)
    return blob


def _as_band_array(data):
    """``(array-like (B, Y, X), (crs, transform) or None, encoding)`` from the input."""
    encoding, geo = {}, None
    if hasattr(data, "dims") and hasattr(data, "variable"):  # an xarray DataArray
        encoding = dict(data.encoding)
        if data.ndim == 2:
            data = data.expand_dims("band")
        if data.ndim != 3:
            raise ValueError(f"a DataArray to write must be (band, y, x), got dims {data.dims}")
        geo = _rio_georeferencing(data)
        values = data.data
    else:
        values = data if hasattr(data, "__array_function__") else np.asarray(data)
        if values.ndim == 2:
            values = values[None]
        if values.ndim != 3:
            raise ValueError(f"data must be (B, Y, X) or (Y, X), got shape {values.shape}")
    if 0 in values.shape:
        raise ValueError(f"cannot write an empty raster of shape {values.shape}")
    return values, geo, encoding


def _rio_georeferencing(data):
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:
        return None
    crs = data.rio.crs
    if crs is None:
        return None
    return crs, tuple(data.rio.transform())[:6]


def _sample_type(requested, encoding, dtype) -> SampleType:
    if requested is not None:
        return requested if isinstance(requested, SampleType) else sample_type_from_name(requested)
    if "sample_type" in encoding:
        candidate = sample_type_from_name(encoding["sample_type"])
        if candidate.dtype == dtype:
            return candidate
    return sample_type_for_dtype(dtype)


def _tile_shape(tile_size) -> tuple[int, int]:
    if isinstance(tile_size, (int, np.integer)) and not isinstance(tile_size, bool):
        sizes = (int(tile_size), int(tile_size))
    else:
        sizes = tuple(int(v) for v in tile_size)
    if len(sizes) != 2 or not all(1 <= v <= 65535 for v in sizes):
        raise ValueError(f"tile_size must be an int or (tile_length, tile_width) between 1 and 65535, got {tile_size!r}")
    return sizes


def _stored_frame(array, grid: FrameGrid, sample: SampleType, index: int) -> np.ndarray:
    bands, rows, cols = grid.frame_window(index)
    return sample.encode(np.asarray(array[bands, rows, cols]))


def choose_recipe(array, grid: FrameGrid, sample: SampleType, compression: str) -> str:
    """The OpenZL recipe for ``compression``: ``"auto"``, ``"portable"`` or a recipe.

    ``auto`` and ``portable`` compress a few sample frames with each candidate
    and keep the smallest; both are lossless.
    """
    if compression not in ("auto", "portable"):
        if not isinstance(compression, str) or ">" not in compression:
            raise ValueError(f"compression must be 'auto', 'portable' or a GeoZL recipe like 'planar>zigzag>zstd', got {compression!r}")
        return compression
    candidates = [r for r in (AUTO_RECIPES if compression == "auto" else PORTABLE_RECIPES) if applicable(r, sample.storage)]
    picks = np.unique(np.linspace(0, grid.frame_count - 1, _SAMPLE_FRAMES).astype(int))
    samples = [_stored_frame(array, grid, sample, int(k)) for k in picks]
    sizes = {}
    for recipe in candidates:
        try:
            sizes[recipe] = sum(len(encode_frame(s, recipe)) for s in samples)
        except RuntimeError:
            continue  # a recipe that does not apply to this element type
    return min(sizes, key=sizes.get)


def _write_atomically(target: ByteSource, grid: FrameGrid, frames, recipe: str, make_prefix) -> np.ndarray:
    """Write frames after a placeholder prefix, then the real prefix, then rename."""
    base = base_frame_offset(grid)
    directory = os.path.dirname(os.path.abspath(target.local_path)) if target.is_local else None
    fd, tmp = tempfile.mkstemp(prefix=".rumi-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.seek(base)
            counts = _encode_in_order(frames, recipe, f.write)
            f.seek(0)
            f.write(make_prefix(counts))
            f.flush()
            os.fsync(f.fileno())
        _publish(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return counts


def _encode_in_order(frames, recipe: str, sink, workers: int | None = None) -> np.ndarray:
    """Encode frames on a thread pool, handing each to ``sink`` in frame order."""
    workers = workers or min(4, os.cpu_count() or 1)
    counts = []
    with ThreadPoolExecutor(workers) as pool:
        pending = deque()
        for stored in frames:
            pending.append(pool.submit(encode_frame, stored, recipe))
            if len(pending) >= 2 * workers:  # bounded: a few frames in memory, not the image
                counts.append(sink(pending.popleft().result()))
        while pending:
            counts.append(sink(pending.popleft().result()))
    return np.asarray(counts, dtype=np.int64)


def _publish(tmp: str, target: ByteSource) -> None:
    if target.is_local:
        os.replace(tmp, target.local_path)
    else:
        fs, path = target._fs_path
        fs.put_file(tmp, path)  # object stores make a PUT visible whole or not at all
        os.unlink(tmp)


def _write_small_atomically(target: ByteSource, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(target.local_path)) if target.is_local else None
    fd, tmp = tempfile.mkstemp(prefix=".rumi-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        _publish(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
