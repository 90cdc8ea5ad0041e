"""Writing rumi files from numpy, xarray and Dask: the entry point (docs/writing.md, docs/architecture.md)."""

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
from .data_array import GDAL_SAMPLE_TYPES, GcpsNotStoredWarning, as_band_array, gcps_note
from .blocks import check_frame_block
from .encoded import DaskFrames, dask_encoded_frames, threaded_encoded_frames
from .parameters import check_fits_tiff, check_storage_options, parse_frame_unit, tile_shape
from .staging import Writeback, staged, write_small

logger = logging.getLogger(__name__)

# tile frames unless asked: a Cube's images share the frame unit, so it must not depend on the data
_DEFAULTS = {"tile_size": 512, "frame_unit": "tile", "raster_type": "area"}


def write(path, data, *, tile_size=None, frame_unit=None, crs=None, transform=None, raster_type=None,
          sample_type=None, compression="auto", storage_options=None, write_header=True, progress=None) -> bytes:
    """Write ``data`` as a rumi file at ``path`` (any fsspec URL) and return its header blob.

    ``data``: numpy or Dask ``(B, Y, X)`` or ``(Y, X)``, or a DataArray read by dimension name, its CRS,
    transform and encoding used where arguments are ``None``.  What rumi cannot store is named in a warning;
    a failure leaves nothing at ``path``.  ``write_header`` also stores ``<path>.header``; ``progress(1)``
    follows each frame.  The rules: docs/writing.md.

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = write(path, np.ones((2, 100, 80), "uint16"), tile_size=64,
    ...              crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    >>> len(blob), os.path.exists(path + ".header")
    (28, True)
    """
    check_storage_options(storage_options)
    array, encoding, rio_crs, rio_transform, gcps, unstored = as_band_array(data)
    tile_size, frame_unit, raster_type = (
        given if given is not None else encoding.get(name, _DEFAULTS[name])
        for name, given in (("tile_size", tile_size), ("frame_unit", frame_unit), ("raster_type", raster_type))
    )
    if gcps is not None and (crs is None or transform is None):
        unstored = ((gcps_note(gcps), GcpsNotStoredWarning), *unstored)
    crs = rio_crs if crs is None else crs
    if transform is None and crs is not None and rio_transform is not None:  # a DataArray without a CRS writes none
        transform = rio_transform()
        if RasterType.parse(raster_type) is RasterType.POINT:
            transform = corner_to_centre(transform)   # rioxarray's transform is GDAL's, for pixel corners
    sample = _sample_type(sample_type, encoding, array)
    georef = georeferencing(crs, transform, raster_type)
    tile_length, tile_width = tile_shape(tile_size)
    bands, length, width = array.shape
    named_unit = parse_frame_unit(frame_unit)  # None: chosen by measuring, starting from tiles
    unit = FrameUnit.TILE if named_unit is None else named_unit
    grid = FrameGrid(width, length, tile_width, tile_length, bands, unit)
    check_fits_tiff(grid)  # the IFD is built last
    grid.check(DEFAULT_LIMITS, bytes_per_sample=sample.bytes_per_sample)  # what a reader would refuse
    may_use_cells = named_unit is None and _cells_allowed(grid, sample)
    if lossy_error(compression) is not None and (sample.storage != sample.dtype or sample.dtype.kind not in "iuf"):
        raise ValueError(f"lossy compression needs plain integer or float samples, not {sample.name}")
    from dask import is_dask_collection  # importing xarray_rumi does not load Dask

    lazy = is_dask_collection(array)
    workers = computing_threads()
    if lazy:
        source = DaskFrames(array, grid)
        indices = sample_frames(grid, compression)
        stored = {}
        for k, block in zip(indices, source.compute(indices)):
            check_frame_block(block, k, grid, array.dtype)  # a sample frame too: the recipe is chosen on it
            stored[k] = sample.encode(np.asarray(block))
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
    with staged(target) as f:
        f.seek(base_frame_offset(grid))
        with Writeback(f if target.is_local else None) as writeback:
            counts = np.fromiter((writeback.wrote(f.write(frame)) for frame in frames), dtype=np.int64)
        f.seek(0)
        f.write(build_prefix(grid, sample, georef, counts))
    blob = Header.from_byte_counts(grid, sample, counts).to_bytes()
    logger.debug("wrote %s: %d frames, %d bytes of frames (%s, %s)", target.url, grid.frame_count, int(counts.sum()),
                 sample.name, "from Dask" if lazy else "from memory")
    if write_header:
        write_small(ByteSource.of(f"{target.url}.header", storage_options), blob)
        logger.debug("wrote %s.header: %d bytes", target.url, len(blob))
    for note, category in unstored:
        warnings.warn(note, category, stacklevel=2)
    return blob


def _cells_allowed(tiles: FrameGrid, sample: SampleType) -> bool:
    """Whether a cell grid of these tiles is within what a reader accepts."""
    try:
        dataclasses.replace(tiles, frame_unit=FrameUnit.CELL).check(DEFAULT_LIMITS,
                                                                    bytes_per_sample=sample.bytes_per_sample)
    except RumiFormatError:
        return False
    return True


def _sample_type(requested, encoding, array) -> SampleType:
    dtype = array.dtype
    if requested is not None:
        return requested if isinstance(requested, SampleType) else sample_type_from_name(requested)
    if "sample_type" in encoding:
        candidate = sample_type_from_name(encoding["sample_type"])
        if candidate.dtype == dtype:
            return candidate
    gdal = GDAL_SAMPLE_TYPES.get(encoding.get("rasterio_dtype"))
    if gdal is not None and sample_type_from_name(gdal).dtype == dtype:
        # rioxarray widened complex integers; kept for values in memory that fit (Dask would compute twice)
        candidate = sample_type_from_name(gdal)
        if isinstance(array, np.ndarray):
            try:
                candidate.encode(array)
                return candidate
            except ValueError:  # a value the narrower type cannot hold: the dtype's own type keeps it
                pass
    return sample_type_for_dtype(dtype)


def _reporting(frames, progress):
    for frame in frames:
        yield frame
        progress(1)
