"""Writing compliant rumi files from numpy, xarray and Dask: the entry point.

Recipes are chosen on a few sample frames (``frames/choose.py``), frames are
encoded in frame-index order with a bounded number in flight
(``encoded.py``), and streamed to a staging file after the fixed-size
prefix, which is renamed into place only when complete (``staging.py``): a
failure leaves nothing at the target path.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings

import numpy as np

from ..errors import RumiFormatError
from ..format.blob import Header
from ..format.dtypes import SampleType, sample_type_for_dtype, sample_type_from_name
from ..format.geo import RasterType, corner_to_centre, georeferencing
from ..format.grid import FrameGrid, FrameUnit
from ..format.ifd import build_prefix
from ..format.placement import base_frame_offset
from ..format.limits import DEFAULT_LIMITS
from ..frames.choose import lossy_error, plan_frames, profile_window, sample_frames
from ..io.source import ByteSource
from ..runtime.threads import computing_threads
from .data_array import (GDAL_SAMPLE_TYPES, BandLabelsNotStoredWarning, GcpsNotStoredWarning, NodataNotStoredWarning,
                         ScaleNotStoredWarning, as_band_array, band_labels_note, gcps_note, nodata_note, scale_note)
from .blocks import check_frame_block
from .encoded import DaskFrames, dask_encoded_frames, threaded_encoded_frames
from .parameters import check_fits_tiff, check_storage_options, parse_frame_unit, tile_shape
from .staging import Writeback, staged, write_small

logger = logging.getLogger(__name__)

#: What a DataArray read from a rumi file keeps in its encoding, and the defaults otherwise.  Tile frames
#: unless asked: the frame unit is part of what a Cube's images share, so it must not depend on the data
#: (``frame_unit="auto"`` lets ``compression="auto"`` choose; docs/writing.md).
_DEFAULTS = {"tile_size": 512, "frame_unit": "tile", "raster_type": "area"}


def write(path, data, *, tile_size=None, frame_unit=None, crs=None, transform=None, raster_type=None,
          sample_type=None, compression="auto", storage_options=None, write_header=True, progress=None) -> bytes:
    """Write ``data`` as a rumi file at ``path`` (any fsspec URL) and return its header blob.

    ``data`` is a numpy or Dask array ``(B, Y, X)`` or ``(Y, X)``, or a
    DataArray taken by dimension name, bringing its CRS, transform and
    encoding; what rumi cannot store (nodata, scale, band labels, GCPs) is
    named in a warning, a masked array is refused.  Arguments left as
    ``None`` come from a DataArray's encoding, else 512, ``"tile"``,
    ``"area"`` and the dtype's own type.  Dask data is computed a window of
    frames at a time, on a distributed client's workers when it is Dask's
    scheduler.  A failure leaves nothing at ``path``.  With ``write_header``
    the blob is also stored as ``<path>.header``; ``progress(1)`` is called
    after each frame.  The rules, one by one: docs/writing.md.

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = write(path, np.ones((2, 100, 80), "uint16"), tile_size=64,
    ...              crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    >>> len(blob), os.path.exists(path + ".header")
    (28, True)
    """
    check_storage_options(storage_options)
    array, rio_georeferencing, encoding, nodata, scaling, gcps, band_labels = as_band_array(data)
    tile_size, frame_unit, raster_type = (
        given if given is not None else encoding.get(name, _DEFAULTS[name])
        for name, given in (("tile_size", tile_size), ("frame_unit", frame_unit), ("raster_type", raster_type))
    )
    # GCPs are not an affine transform: rioxarray's CRS (the GCPs') with its identity transform is a false location
    dropped_gcps = gcps is not None and (crs is None or transform is None)
    if gcps is not None:
        rio_georeferencing = None
    if rio_georeferencing is not None:
        crs = rio_georeferencing.crs if crs is None else crs
        if transform is None and crs is not None:  # a DataArray without a CRS writes no transform
            transform = rio_georeferencing.transform()
            if RasterType.parse(raster_type) is RasterType.POINT:
                transform = corner_to_centre(transform)   # rioxarray's transform is GDAL's, for pixel corners
    sample = _sample_type(sample_type, encoding, array)
    georef = georeferencing(crs, transform, raster_type)
    tile_length, tile_width = tile_shape(tile_size)
    bands, length, width = array.shape
    named_unit = parse_frame_unit(frame_unit)
    chosen_unit = named_unit is None
    unit = FrameUnit.TILE if chosen_unit else named_unit
    grid = FrameGrid(width, length, tile_width, tile_length, bands, unit)
    check_fits_tiff(grid)  # the IFD is built last: its fields' limits are checked first
    grid.check(DEFAULT_LIMITS, bytes_per_sample=sample.bytes_per_sample)  # what a reader would refuse
    may_use_cells = chosen_unit and _cells_allowed(grid, sample)
    if lossy_error(compression) is not None and (sample.storage != sample.dtype or sample.dtype.kind not in "iuf"):
        raise ValueError(f"lossy compression needs plain integer or float samples, not {sample.name}")
    from dask import is_dask_collection  # imported here: importing xarray_rumi does not load Dask

    lazy = is_dask_collection(array)
    workers = computing_threads()
    if lazy:
        source = DaskFrames(array, grid)
        indices = sample_frames(grid, compression)
        stored = {k: sample.encode(np.asarray(_checked(v, k, grid, array.dtype)))
                  for k, v in zip(indices, source.compute(indices))}
        sampled = grid
        grid, recipes = plan_frames(sampled, stored.__getitem__, compression, workers=workers,
                                    may_use_cells=may_use_cells)
        if grid != sampled:  # cell frames: blocks of all bands
            source = DaskFrames(array, grid, source.cluster)
        frames = dask_encoded_frames(source, grid, sample, recipes, workers)
    else:
        tiles = grid
        # only the centre of a sample frame is measured: no need to copy the rest
        grid, recipes = plan_frames(
            tiles, lambda k: sample.encode(np.asarray(array[profile_window(tiles.frame_window(k))])),
            compression, workers=workers, may_use_cells=may_use_cells)
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
    if dropped_gcps:
        warnings.warn(gcps_note(gcps), GcpsNotStoredWarning, stacklevel=2)
    if band_labels is not None:
        warnings.warn(band_labels_note(*band_labels), BandLabelsNotStoredWarning, stacklevel=2)
    if nodata is not None:
        warnings.warn(nodata_note(nodata), NodataNotStoredWarning, stacklevel=2)
    if scaling:
        warnings.warn(scale_note(scaling), ScaleNotStoredWarning, stacklevel=2)
    return blob


def _checked(block, index: int, grid: FrameGrid, dtype):
    check_frame_block(block, index, grid, dtype)  # a sample frame too: the recipe is chosen on it
    return block


def _cells_allowed(tiles: FrameGrid, sample: SampleType) -> bool:
    """Whether a cell grid of these tiles is within what a reader accepts, so that the writer may choose it."""
    try:
        dataclasses.replace(tiles, frame_unit=FrameUnit.CELL).check(DEFAULT_LIMITS,
                                                                    bytes_per_sample=sample.bytes_per_sample)
    except RumiFormatError:
        return False
    return True


def _sample_type(requested, encoding, array) -> SampleType:
    """``sample_type=``, else the one the array was read with (encoding), else its dtype's own."""
    dtype = array.dtype
    if requested is not None:
        return requested if isinstance(requested, SampleType) else sample_type_from_name(requested)
    if "sample_type" in encoding:
        candidate = sample_type_from_name(encoding["sample_type"])
        if candidate.dtype == dtype:
            return candidate
    gdal = GDAL_SAMPLE_TYPES.get(encoding.get("rasterio_dtype"))
    if gdal is not None and sample_type_from_name(gdal).dtype == dtype:
        # rioxarray widened a complex integer GeoTIFF to complex floats; keep its type as rumi convert does, but
        # only for values in memory that fit it exactly: Dask data would have to be computed twice to know
        candidate = sample_type_from_name(gdal)
        if isinstance(array, np.ndarray) and _fits(candidate, array):
            return candidate
    return sample_type_for_dtype(dtype)


def _fits(sample: SampleType, values: np.ndarray) -> bool:
    try:
        sample.encode(values)
    except ValueError:  # a value the narrower type cannot hold: the dtype's own type keeps it
        return False
    return True


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
