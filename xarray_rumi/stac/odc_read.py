"""One rumi source on one odc-stac output chunk, step by step as ``odc.loader.RioReader`` (docs/stac.md)."""

from __future__ import annotations

import functools
import itertools
import logging
import math
from dataclasses import dataclass

import numpy as np

from ..datamodel.coords import corner_transform
from ..errors import RumiFormatError
from ..reading.open import open_image
from .read import ItemImage

log = logging.getLogger(__name__)

#: How far (in source pixels, before scaling) each GDAL resampling kernel reaches from a pixel's centre.
KERNEL_RADIUS = {"nearest": 1, "bilinear": 1, "cubic": 2, "cubic_spline": 2, "lanczos": 3}
#: Source pixels added to the kernel's reach: GDAL sizes its window from the raster it is handed (docs/stac.md).
EXTRA_MARGIN = 20
#: Sample types GDAL warps (rasterio 1.4 with GDAL 3.10); anything else is pasted, or upcast, or refused.
WARPABLE = frozenset(np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
                                            "float32", "float64", "complex64", "complex128"))


@dataclass(frozen=True)
class ChunkRequest:
    """0-based ``bands`` of one rumi file under odc's ``RasterLoadParams``; ``src_nodata`` from ``raster:bands``.

    ``bands`` is filled as odc asks band by band, so at compute time it holds every band the load wants.
    """

    href: str
    asset: ItemImage
    bands: set | tuple
    cfg: object
    src_nodata: float | None = None


@dataclass(frozen=True)
class ChunkPixels:
    """``pixels[i]`` is band ``bands[i]`` on ``roi_dst`` (empty for a read error skipped with fail_on_error=False)."""

    roi_dst: tuple[slice, slice]
    bands: tuple[int, ...]
    pixels: np.ndarray

    def band(self, band: int, dst: np.ndarray | None = None) -> tuple[tuple[slice, slice], np.ndarray]:
        """``(roi, pixels)`` of band ``band`` (0-based), as odc's readers return them (into ``dst`` if given)."""
        pixels = self.pixels[self.bands.index(band)]
        if dst is None:
            return self.roi_dst, pixels
        dst[self.roi_dst] = pixels
        return self.roi_dst, dst[self.roi_dst]


def source_geobox(asset: ItemImage):
    """The source image's ``odc.geo.GeoBox``, with the corner transform GDAL reports for its GeoTIFF twin."""
    from affine import Affine
    from odc.geo.geobox import GeoBox

    georef, grid = asset.georeferencing, blob_header(asset.blob).grid
    if not georef.is_defined:
        raise ValueError("a rumi asset without a CRS cannot be loaded onto a grid: its Item has no proj:code")
    return GeoBox((grid.image_length, grid.image_width), Affine(*corner_transform(georef)), georef.crs_code)


def read_chunk(request: ChunkRequest, dst_geobox) -> ChunkPixels:
    """``request``'s bands on the output chunk ``dst_geobox``, pasted or warped as odc's GeoTIFF reader does."""
    from odc.geo.overlap import compute_reproject_roi
    from odc.geo.roi import roi_is_empty
    from odc.loader import resolve_dst_dtype, resolve_dst_nodata, resolve_src_nodata

    cfg, bands, header = request.cfg, tuple(sorted(set(request.bands))), blob_header(request.asset.blob)
    src_geobox = source_geobox(request.asset)
    # odc's tolerance: with nearest resampling a sub-pixel shift still pastes.
    info = compute_reproject_roi(src_geobox, dst_geobox, ttol=0.9 if cfg.nearest else 0.05)
    roi_dst = tuple(info.roi_dst)
    sample_dtype = header.sample_type.dtype
    out = np.ndarray((len(bands), *(s.stop - s.start for s in roi_dst)),
                     dtype=resolve_dst_dtype(str(sample_dtype), cfg))
    src_nodata = resolve_src_nodata(request.src_nodata, cfg)
    dst_nodata = resolve_dst_nodata(out.dtype, cfg, src_nodata)
    if out.size == 0 or roi_is_empty(info.roi_src):  # or the chunk's grid overlaps, but no source pixel lands in it
        out[...] = dst_nodata if dst_nodata is not None else 0
        return ChunkPixels(roi_dst, bands, out)
    paste = bool(info.paste_ok and info.read_shrink == 1)
    _refuse_what_gdal_cannot_give(request.href, sample_dtype, out.dtype, paste, cfg.resampling)
    rows, cols = (range(s.start, s.stop) for s in info.roi_src)
    if not paste:
        rows, cols = _grown(rows, cols, src_geobox.shape.yx, cfg.resampling, info.scale)
    try:
        image = open_image(request.href, header=header, georeferencing=request.asset.georeferencing,
                           claimed_by=request.asset.record)
        pixels = _read_bands(image, bands, rows, cols)
    except (OSError, RumiFormatError) as error:  # what fail_on_error=False skips, as odc skips rasterio's
        if cfg.fail_on_error:
            raise
        log.warning("Ignoring read failure reading %s (reason: '%s')", request.href, error)
        return ChunkPixels(np.s_[0:0, 0:0], bands, out[:, 0:0, 0:0])
    if paste:
        out[...] = cast_as_gdal(pixels, out.dtype, one_at_a_time=one_value_columns(cols, header.grid.tile_width))
        # odc's order: the nodata test is on the cast pixels, where a clamped nodata does not count
        if dst_nodata is not None and not _same_nodata(src_nodata, dst_nodata):
            np.copyto(out, dst_nodata, where=_nodata_mask(out, src_nodata))
    else:
        window = src_geobox[rows.start:rows.stop, cols.start:cols.stop]
        _warp(pixels.astype(gdal_dtype(pixels.dtype), copy=False), out, window, dst_geobox[info.roi_dst],
              cfg.resampling, src_nodata, dst_nodata)
    return ChunkPixels(roi_dst, bands, out)


def _warp(pixels, out, src_geobox, dst_geobox, resampling: str, src_nodata, dst_nodata) -> None:
    """odc's ``rasterio.warp.reproject``, band by band with a source nodata (GDAL would merge the bands' validity)."""
    import rasterio.warp
    from odc.geo.warp import resampling_s2rio

    common = dict(src_transform=src_geobox.transform, src_crs=str(src_geobox.crs), src_nodata=src_nodata,
                  dst_crs=str(dst_geobox.crs), dst_transform=dst_geobox.transform, dst_nodata=dst_nodata,
                  resampling=resampling_s2rio(resampling))
    for band_pixels, band_out in [(pixels, out)] if src_nodata is None else zip(pixels, out):
        rasterio.warp.reproject(band_pixels, band_out, **common)


def _refuse_what_gdal_cannot_give(href: str, samples: np.dtype, out: np.dtype, paste: bool, resampling: str) -> None:
    """``ValueError`` where GDAL has no ``out`` type for this paste or warp."""
    if out in WARPABLE or (paste and np.can_cast(samples, out, "safe")):
        return
    what = (f"loaded as dtype={out.name!r} on their own grid: not every value fits, and GDAL, which casts" if paste
            else f"reprojected into dtype={out.name!r} ({resampling} resampling onto another grid): GDAL, which warps")
    raise ValueError(
        f"{href}: {samples} samples cannot be {what} for odc's GeoTIFF reader, has no {out}. "
        "Load them with dtype= a type GDAL has (dtype='float32' for float types and bfloat16, 'uint8'/'int8' for "
        "1- to 6-bit integers, 'complex64' for complex integers), or as they are onto their own grid")


def refuse_unloadable_dtype(href: str, samples: np.dtype, cfg) -> None:
    """The ``ValueError`` :func:`read_chunk` would raise on every chunk, pasted or warped, for odc's ``cfg.dtype``."""
    from odc.loader import resolve_dst_dtype

    _refuse_what_gdal_cannot_give(href, samples, resolve_dst_dtype(str(samples), cfg), True, cfg.resampling)


def gdal_dtype(dtype: np.dtype) -> np.dtype:
    """The type GDAL holds samples of ``dtype`` in: the type itself, or the GeoTIFF type that holds every value."""
    if dtype in WARPABLE:
        return dtype
    for wider in (np.dtype("uint8"), np.dtype("int8"), np.dtype("float32"), np.dtype("complex64")):
        if np.can_cast(dtype, wider, "safe"):  # ml_dtypes registers its types' safe casts
            return wider
    raise ValueError(f"no type GDAL reads holds every {dtype} value")


def cast_as_gdal(pixels: np.ndarray, dtype, one_at_a_time: np.ndarray | None = None) -> np.ndarray:
    """``pixels`` cast as GDAL casts into a ``dtype`` buffer; ``ValueError`` for a non-GDAL type that loses values."""
    dtype = np.dtype(dtype)
    if pixels.dtype == dtype:
        return pixels
    if dtype not in WARPABLE:
        _refuse_what_gdal_cannot_give("pixels", pixels.dtype, dtype, True, "nearest")
        return pixels.astype(dtype)
    values = pixels.astype(gdal_dtype(pixels.dtype), copy=False)
    from_complex = values.dtype.kind == "c"
    if from_complex and dtype.kind != "c":
        values = values.real
    if dtype.kind not in "iu":
        with np.errstate(over="ignore"):  # float64 past float32's range: an infinity, as GDAL gives
            return values.astype(dtype)
    if values.dtype.kind == "f":
        out = _rounded_and_clamped(values, dtype)
        if not from_complex and values.dtype == np.float32 and dtype == np.int16:
            _as_eight_at_a_time(values, out, one_at_a_time)
        return out
    info, source = np.iinfo(dtype), np.iinfo(values.dtype)
    return np.clip(values, max(info.min, source.min), min(info.max, source.max)).astype(dtype)


def _rounded_and_clamped(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """GDAL's float to integer: ``x ± 0.5`` truncated, clamped, NaN 0 (and float64 2**64 to uint64 0, as GDAL 3.10)."""
    info, half = np.iinfo(dtype), values.dtype.type(0.5)
    with np.errstate(invalid="ignore"):
        rounded = np.where(values >= 0, np.trunc(values + half), np.trunc(values - half))
        # the type's top may round up past the type in float; the bottom (0 or -2**n) is exact
        top, bottom = values.dtype.type(info.max), values.dtype.type(info.min)
        out = np.zeros(values.shape, dtype)
        inside = (rounded > bottom) & (rounded < top)
        np.copyto(out, rounded, where=inside, casting="unsafe")
        out[rounded >= top] = info.max
        out[rounded <= bottom] = info.min
        if values.dtype == np.float64 and dtype == np.uint64:
            out[values == 2.0 ** 64] = 0
    return out


def _as_eight_at_a_time(values: np.ndarray, out: np.ndarray, one_at_a_time: np.ndarray | None) -> None:
    """GDAL 3.10's float32 to int16 kernel (eight at a time: exact rounding, NaN -32768), but for ``one_at_a_time``."""
    kernel = np.ones(values.shape, bool) if one_at_a_time is None else np.broadcast_to(~one_at_a_time, values.shape)
    with np.errstate(invalid="ignore"):
        exactly = np.clip(np.floor(values.astype(np.float64) + 0.5), -32768, 32767)
        np.copyto(out, exactly, where=kernel & (values >= 0), casting="unsafe")
    out[kernel & np.isnan(values)] = -32768


def one_value_columns(cols: range, tile_width: int) -> np.ndarray:
    """Columns GDAL converts one value at a time: the last ``len(run) % 8`` of each row's run inside a tile."""
    columns = np.arange(cols.start, cols.stop)
    run_start = np.maximum(columns // tile_width * tile_width, cols.start)
    run_stop = np.minimum((columns // tile_width + 1) * tile_width, cols.stop)
    return columns >= run_stop - (run_stop - run_start) % 8


def _read_bands(image, bands: tuple[int, ...], rows: range, cols: range) -> np.ndarray:
    """The window of sorted ``bands``: one read per run of consecutive bands, or one for cell frames."""
    runs = ([list(bands)] if image.grid.bands_per_frame > 1 else
            [[band for _, band in run] for _, run in itertools.groupby(enumerate(bands), lambda p: p[1] - p[0])])
    parts = []
    for run in runs:
        pixels = image.read_window(range(run[0], run[-1] + 1), rows, cols)
        parts.append(pixels if len(run) == run[-1] - run[0] + 1 else pixels[[b - run[0] for b in run]])
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _grown(rows: range, cols: range, shape, resampling: str, scale: float) -> tuple[range, range]:
    """odc's source window grown by GDAL's kernel reach, so GDAL treats no pixel it would read as outside."""
    margin = math.ceil((KERNEL_RADIUS.get(resampling, 1) + EXTRA_MARGIN) * max(1.0, float(scale)))
    height, width = shape
    return (range(max(0, rows.start - margin), min(height, rows.stop + margin)),
            range(max(0, cols.start - margin), min(width, cols.stop + margin)))


@functools.lru_cache(maxsize=64)
def blob_header(blob: bytes):
    """The parsed blob, cached per process."""
    from ..format.blob import Header

    return Header.from_bytes(blob)


def _same_nodata(a, b) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


def _nodata_mask(pixels: np.ndarray, nodata) -> np.ndarray:
    """Where ``pixels`` are nodata, by odc's rule (NaN always counts in floats)."""
    equal = np.zeros(pixels.shape, bool) if nodata is None else pixels == nodata
    return equal | np.isnan(pixels) if pixels.dtype.kind == "f" else equal
