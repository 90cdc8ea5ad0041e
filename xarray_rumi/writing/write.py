"""Writing compliant rumi files from numpy, xarray and Dask: the entry point.

Recipes are chosen on a few sample frames (``frames/choose.py``), frames are
encoded in frame-index order with a bounded number in flight
(``encoded.py``), and streamed to a staging file after the fixed-size
prefix, which is renamed into place only when complete (``staging.py``): a
failure leaves nothing at the target path.
"""

from __future__ import annotations

import logging

import numpy as np

from ..format.blob import Header
from ..format.dtypes import SampleType, sample_type_for_dtype, sample_type_from_name
from ..format.geo import RasterType, georeferencing
from ..format.grid import FrameGrid, FrameUnit
from ..format.ifd import build_prefix
from ..format.layout import base_frame_offset
from ..format.limits import DEFAULT_LIMITS
from ..frames.choose import lossy_error, plan, profile_window, sample_frames
from ..io.source import ByteSource
from ..io.threads import default_threads
from .encoded import DaskFrames, dask_encoded_frames, threaded_encoded_frames
from .staging import Writeback, staged, write_small

logger = logging.getLogger(__name__)

#: What a DataArray read from a rumi file keeps in its encoding, and the defaults otherwise.
_DEFAULTS = {"tile_size": 512, "frame_unit": "tile", "raster_type": "area"}


def write(path, data, *, tile_size=None, frame_unit=None, crs=None, transform=None, raster_type=None,
          sample_type=None, compression="auto", storage_options=None, write_header=True, progress=None) -> bytes:
    """Write ``data`` as a rumi file and return its header blob.

    ``data`` is a numpy array ``(B, Y, X)`` or ``(Y, X)``, a Dask array, or a
    DataArray ``(band, y, x)`` whose rioxarray CRS and transform are used when
    ``crs`` / ``transform`` are not given.  ``tile_size``, ``frame_unit``,
    ``raster_type`` and ``sample_type`` left as ``None`` come from a
    DataArray's encoding (what it was read with; its ``AREA_OR_POINT``
    attribute for the raster type), else 512, ``"tile"``, ``"area"`` and the
    dtype's own type.  Dask-backed data is computed a window of frames at a
    time, and compressed where its blocks live on an active distributed
    client, else on the process's threads; either way only a few windows
    of frames are in memory.  ``path`` may be any fsspec URL.  With ``write_header``
    the blob is also stored beside the file as ``<path>.header``.
    ``progress``, if given, is called with 1 after each frame is written
    (``tqdm(...).update`` fits).

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = write(path, np.ones((2, 100, 80), "uint16"), tile_size=64,
    ...              crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    >>> len(blob), os.path.exists(path + ".header")
    (28, True)
    """
    array, geo_defaults, encoding = _as_band_array(data)
    tile_size, frame_unit, raster_type = (
        given if given is not None else encoding.get(name, _DEFAULTS[name])
        for name, given in (("tile_size", tile_size), ("frame_unit", frame_unit), ("raster_type", raster_type))
    )
    if crs is None and transform is None and geo_defaults:
        crs, transform = geo_defaults
        if RasterType.parse(raster_type) is RasterType.POINT:
            # rioxarray's transform refers to pixel corners (GDAL's convention);
            # a PixelIsPoint matrix maps pixel indices to pixel centres.
            a, b, c, d, e, f = transform
            transform = (a, b, c + 0.5 * (a + b), d, e, f + 0.5 * (d + e))
    sample = _sample_type(sample_type, encoding, array.dtype)
    georef = georeferencing(crs, transform, raster_type)
    tile_length, tile_width = _tile_shape(tile_size)
    bands, length, width = array.shape
    grid = FrameGrid(width, length, tile_width, tile_length, bands, FrameUnit.parse(frame_unit))
    grid.check(DEFAULT_LIMITS, bytes_per_sample=sample.bytes_per_sample)  # what a reader would refuse
    if lossy_error(compression) is not None and (sample.storage != sample.dtype or sample.dtype.kind not in "iuf"):
        raise ValueError(f"lossy compression needs plain integer or float samples, not {sample.name}")
    from dask import is_dask_collection  # imported here: importing xarray_rumi does not load Dask

    lazy = is_dask_collection(array)
    workers = default_threads()
    if lazy:
        source = DaskFrames(array, grid)
        indices = sample_frames(grid, compression)
        stored = {k: sample.encode(np.asarray(v)) for k, v in zip(indices, source.compute(indices))}
        recipes = plan(grid, stored.__getitem__, compression, workers=workers)
        frames = dask_encoded_frames(source, grid, sample, recipes, workers)
    else:
        # only the centre of a sample frame is measured: no need to copy the rest
        recipes = plan(grid, lambda k: sample.encode(np.asarray(array[profile_window(grid.frame_window(k))])),
                       compression, workers=workers)
        frames = threaded_encoded_frames(array, grid, sample, recipes, workers)
    target = ByteSource.of(path, storage_options)
    if progress is not None:
        frames = _reporting(frames, progress)
    counts = _write_atomically(target, grid, frames, lambda counts: build_prefix(grid, sample, georef, counts))
    blob = Header.from_byte_counts(grid, sample, counts).to_bytes()
    logger.debug("wrote %s: %d frames, %d bytes of frames (%s, %s)", target.url, grid.frame_count, int(counts.sum()),
                 sample.name, "from Dask" if lazy else "from memory")
    if write_header:
        write_small(ByteSource.of(f"{target.url}.header", storage_options), blob)
        logger.debug("wrote %s.header: %d bytes", target.url, len(blob))
    return blob


def _as_band_array(data):
    """``(array-like (B, Y, X), (crs, transform) or None, encoding)`` from the input."""
    encoding, geo = {}, None
    if hasattr(data, "dims") and hasattr(data, "variable"):  # an xarray DataArray
        encoding = dict(data.encoding)
        if "raster_type" not in encoding and str(data.attrs.get("AREA_OR_POINT", "")).lower() == "point":
            encoding["raster_type"] = "point"
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


def _reporting(frames, progress):
    for frame in frames:
        yield frame
        progress(1)


def _write_atomically(target: ByteSource, grid: FrameGrid, frames, make_prefix) -> np.ndarray:
    """Write encoded frames after room for the prefix, then the prefix, then publish."""
    with staged(target) as f:
        f.seek(base_frame_offset(grid))
        with Writeback(f if target.is_local else None) as writeback:
            counts = np.fromiter((writeback.wrote(f.write(frame)) for frame in frames), dtype=np.int64)
        f.seek(0)
        f.write(make_prefix(counts))
    return counts
