"""Quicklooks: a small PNG of a rumi image, read from as few frames and samples as it can.

The image is sampled on a regular grid of at most ``size`` points along its
longest side (``RumiImage.read_points``: only the frames holding a sampled
point, and in cell-frame files only the chosen bands' frames, are fetched and
decoded), stretched per band between two percentiles, and written as an
8-bit grey or RGB PNG.

The PNG is written here, with ``zlib`` and ``struct`` from the standard
library: an 8-bit grey or RGB PNG is a signature and three chunks, and
writing them takes fewer lines than declaring an imaging dependency
(Pillow, imageio), none of which the core dependencies bring.
"""

from __future__ import annotations

import math
import os
import struct
import zlib

import numpy as np

from ..reading.open import open_image

#: The quicklook's longest side, in pixels, by default.
SIZE = 1024
#: The percentiles each band is stretched between, by default.
PERCENTILES = (2.0, 98.0)


def sample_step(length: int, width: int, size: int) -> int:
    """One stride for both axes, so the longest side has at most ``size`` samples and the aspect is kept.

    >>> sample_step(40, 60, 20), sample_step(3, 5, 1024)
    (3, 1)
    """
    if size < 1:
        raise ValueError(f"a quicklook's size must be at least 1 pixel, got {size}")
    return max(1, math.ceil(max(length, width) / size))


def sample_indices(length: int, step: int) -> np.ndarray:
    """Every ``step``-th index of ``range(length)``, each centred in the span of pixels it stands for.

    >>> sample_indices(10, 3).tolist(), sample_indices(3, 1).tolist()
    ([1, 4, 7], [0, 1, 2])
    """
    return np.arange(step // 2, length, step)


def default_bands(count: int) -> list[int]:
    """1-based bands shown by default: the first three as RGB when there are three or more, else the first as grey."""
    return [1, 2, 3] if count >= 3 else [1]


def quicklook(path, header=None, *, bands=None, size: int = SIZE, percentiles=PERCENTILES,
              storage_options=None) -> np.ndarray:
    """The quicklook of a rumi file as ``uint8`` ``(rows, cols)`` (grey) or ``(rows, cols, 3)`` (RGB).

    ``bands`` are 1-based band numbers: one (grey) or three (red, green,
    blue); default :func:`default_bands`.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(3 * 40 * 60, dtype="uint16").reshape(3, 40, 60), tile_size=16)
    >>> quicklook(path, blob, size=20).shape
    (13, 20, 3)
    """
    image = path if hasattr(path, "read_points") else open_image(path, header, storage_options=storage_options)
    count, length, width = image.grid.shape
    chosen = _check_bands(bands, count)
    step = sample_step(length, width, size)
    rows, cols = sample_indices(length, step), sample_indices(width, step)
    samples = image.read_points(np.asarray(chosen) - 1, rows, cols)
    return stretch(samples, percentiles)


def stretch(samples: np.ndarray, percentiles=PERCENTILES) -> np.ndarray:
    """``(bands, rows, cols)`` samples as ``uint8`` grey ``(rows, cols)`` or RGB ``(rows, cols, 3)``.

    Each band is scaled linearly so its low percentile is 0 and its high
    one 255 (NaN and infinities are 0); complex samples show their magnitude.

    >>> stretch(np.array([[[0, 5, 10]]]), (0, 100)).tolist()
    [[0, 128, 255]]
    """
    values = np.asarray(samples)
    if np.iscomplexobj(values):
        values = np.abs(values)
    values = values.astype(np.float64)
    out = np.zeros(values.shape, np.uint8)
    for k, band in enumerate(values):
        finite = np.isfinite(band)
        if not finite.any():
            continue
        low, high = np.percentile(band[finite], percentiles)
        scale = 255.0 / (high - low) if high > low else 0.0
        scaled = np.clip((band - low) * scale, 0, 255) if scale else np.where(band > low, 255.0, 0.0)
        out[k] = np.where(finite, np.rint(scaled), 0).astype(np.uint8)
    return out[0] if len(out) == 1 else np.moveaxis(out, 0, -1)


def encode_png(pixels: np.ndarray) -> bytes:
    """An 8-bit PNG of ``uint8`` grey ``(rows, cols)`` or RGB ``(rows, cols, 3)`` pixels.

    >>> encode_png(np.zeros((2, 3), np.uint8))[:8]
    b'\\x89PNG\\r\\n\\x1a\\n'
    """
    pixels = np.ascontiguousarray(pixels, np.uint8)
    if pixels.ndim == 2:
        colour_type = 0
    elif pixels.ndim == 3 and pixels.shape[2] == 3:
        colour_type = 2
    else:
        raise ValueError(f"a PNG is made of (rows, cols) or (rows, cols, 3) pixels, not {pixels.shape}")
    rows, cols = pixels.shape[:2]
    # Every scanline starts with its filter type, 0 (none): zlib does the compressing.
    scanlines = np.concatenate([np.zeros((rows, 1), np.uint8), pixels.reshape(rows, -1)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", cols, rows, 8, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 6))
            + chunk(b"IEND", b""))


def write_quicklook(out, pixels: np.ndarray, storage_options=None) -> None:
    """Write ``pixels`` as a PNG to a path or fsspec URL."""
    import fsspec

    with fsspec.open(os.fspath(out), "wb", **(storage_options or {})) as f:
        f.write(encode_png(pixels))


def _check_bands(bands, count: int) -> list[int]:
    chosen = default_bands(count) if bands is None else [int(b) for b in np.atleast_1d(bands)]
    if len(chosen) not in (1, 3):
        raise ValueError(f"a quicklook shows one band (grey) or three (RGB), not {len(chosen)}")
    outside = [b for b in chosen if not 1 <= b <= count]
    if outside:
        raise ValueError(f"bands {outside} are not among the image's bands 1 to {count}")
    return chosen


def data_array_quicklook(array, *, bands=None, size: int = SIZE, percentiles=PERCENTILES) -> np.ndarray:
    """The quicklook of a ``(band, y, x)`` or ``(y, x)`` DataArray, strided before loading: a lazy one reads little."""
    if array.ndim == 2:
        array = array.expand_dims("band")
    if array.ndim != 3:
        raise ValueError(f"a quicklook is of a (band, y, x) or (y, x) array, not dims {array.dims}")
    band_dim, y_dim, x_dim = array.dims
    chosen = _check_bands(bands, array.sizes[band_dim])
    step = sample_step(array.sizes[y_dim], array.sizes[x_dim], size)
    picked = array.isel({band_dim: [b - 1 for b in chosen], y_dim: slice(step // 2, None, step),
                         x_dim: slice(step // 2, None, step)})
    return stretch(np.asarray(picked.values), percentiles)


__all__ = ["PERCENTILES", "SIZE", "data_array_quicklook", "encode_png", "quicklook", "stretch", "write_quicklook"]
