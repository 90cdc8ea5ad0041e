"""Quicklooks: a small PNG of a rumi image, read from as few frames and samples as it can."""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np

from ..io.source import ByteSource
from ..reading.open import open_image
from ..writing.staging import write_small

SIZE = 1024
PERCENTILES = (2.0, 98.0)
#: The grey of a band of one value.
MID_GREY = 128
#: PNG colour types by channels per pixel: grey, grey and alpha, RGB, RGB and alpha.
_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def strided_indices(length: int, step: int) -> np.ndarray:
    """Every ``step``-th index, centred in the span it stands for."""
    return np.arange(step // 2, length, step)


def quicklook(path, header=None, *, bands=None, size: int = SIZE, percentiles=PERCENTILES,
              storage_options=None) -> np.ndarray:
    """A rumi file's quicklook, ``uint8`` grey or RGB from one or three 1-based ``bands``; no data adds alpha.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(3 * 40 * 60, dtype="uint16").reshape(3, 40, 60), tile_size=16)
    >>> quicklook(path, blob, size=20).shape
    (13, 20, 3)
    """
    image = open_image(path, header, storage_options=storage_options)
    _, length, width = image.grid.shape
    chosen, step = _sampling(image.grid.shape, bands, size)
    samples = image.read_points(np.asarray(chosen), strided_indices(length, step), strided_indices(width, step))
    return stretch(samples, percentiles)


def stretch(samples: np.ndarray, percentiles=PERCENTILES) -> np.ndarray:
    """``(bands, rows, cols)`` samples as ``uint8`` grey or RGB, between ``(low, high)`` percentiles of 0 to 100."""
    try:
        low, high = (float(p) for p in percentiles)
    except (TypeError, ValueError):
        low = high = math.nan
    if not 0 <= low < high <= 100:  # NaN fails every comparison
        raise ValueError(f"a quicklook's percentiles are (low, high) with 0 <= low < high <= 100, "
                         f"got {tuple(percentiles) if np.iterable(percentiles) else percentiles}")
    values = np.asarray(samples)
    if np.iscomplexobj(values):
        values = np.abs(values * 0.5)  # halved, so no magnitude overflows
    values = values.astype(np.float64)
    finite = np.isfinite(values)
    layers = [_stretch_band(band, known, (low, high)) for band, known in zip(values, finite)]
    valid = finite.all(axis=0)
    if not valid.all():
        layers.append(np.where(valid, 255, 0).astype(np.uint8))
    return layers[0] if len(layers) == 1 else np.stack(layers, axis=-1)


def _stretch_band(band: np.ndarray, finite: np.ndarray, percentiles) -> np.ndarray:
    known = band[finite]
    if known.size == 0:
        return np.zeros(band.shape, np.uint8)
    lowest, highest = known.min(), known.max()
    if lowest == highest:
        return np.where(finite, MID_GREY, 0).astype(np.uint8)
    with np.errstate(over="ignore"):
        if not np.isfinite(highest - lowest):  # a quarter is exact here and keeps every difference finite
            band, known = band / 4, known / 4
    low, high = np.percentile(known, percentiles)
    if high > low:
        with np.errstate(over="ignore", invalid="ignore"):  # a spread of subnormals may overflow: clipped
            scaled = np.clip((band - low) / (high - low) * 255.0, 0, 255)
    else:
        scaled = np.where(band > low, 255.0, 0.0)
    return np.where(finite, np.rint(scaled), 0).astype(np.uint8)


def encode_png(pixels: np.ndarray) -> bytes:
    """An 8-bit PNG of ``uint8`` ``(rows, cols)`` or ``(rows, cols, channels)`` pixels."""
    pixels = np.ascontiguousarray(pixels, np.uint8)
    channels = 1 if pixels.ndim == 2 else pixels.shape[2] if pixels.ndim == 3 else 0
    if channels not in _COLOUR_TYPES:
        raise ValueError(f"a PNG is made of (rows, cols) or (rows, cols, 1 to 4) pixels, not {pixels.shape}")
    rows, cols = pixels.shape[:2]
    # filter type 0 (none) on every scanline: zlib does the compressing
    scanlines = np.concatenate([np.zeros((rows, 1), np.uint8), pixels.reshape(rows, -1)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", cols, rows, 8, _COLOUR_TYPES[channels], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 6))
            + chunk(b"IEND", b""))


def write_quicklook(out, pixels: np.ndarray, storage_options=None) -> None:
    """Write ``pixels`` as a PNG to a path or fsspec URL, whole or not at all.

    >>> import tempfile, os
    >>> write_quicklook(os.path.join(tempfile.mkdtemp(), "look.png"), np.zeros((2, 2), np.uint8))
    """
    write_small(ByteSource.of(out, storage_options), encode_png(pixels))


def _sampling(shape: tuple[int, int, int], bands, size: int) -> tuple[list[int], int]:
    """The 0-based bands shown, and one stride for both axes so the longest side has at most ``size`` samples."""
    count, length, width = shape
    chosen = ([1, 2, 3] if count >= 3 else [1]) if bands is None else [int(b) for b in np.atleast_1d(bands)]
    if len(chosen) not in (1, 3):
        raise ValueError(f"a quicklook shows one band (grey) or three (RGB), not {len(chosen)}")
    outside = [b for b in chosen if not 1 <= b <= count]
    if outside:
        raise ValueError(f"bands {outside} are not among the image's bands 1 to {count}")
    if size < 1:
        raise ValueError(f"a quicklook's size must be at least 1 pixel, got {size}")
    return [b - 1 for b in chosen], max(1, math.ceil(max(length, width) / size))


def data_array_quicklook(array, *, bands=None, size: int = SIZE, percentiles=PERCENTILES) -> np.ndarray:
    """The quicklook of a ``(band, y, x)`` or ``(y, x)`` DataArray, strided before loading."""
    if array.ndim == 2:
        array = array.expand_dims("band")
    if array.ndim != 3:
        raise ValueError(f"a quicklook is of a (band, y, x) or (y, x) array, not dims {array.dims}")
    chosen, step = _sampling(array.shape, bands, size)
    band_dim, y_dim, x_dim = array.dims
    picked = array.isel({band_dim: chosen, y_dim: slice(step // 2, None, step), x_dim: slice(step // 2, None, step)})
    return stretch(np.asarray(picked.values), percentiles)
