"""A PNG reader independent of stac/quicklook.py's writer, and the georeferenced scene the quicklook and stac tests write."""

from __future__ import annotations

import struct
import zlib

import numpy as np

import xarray_rumi


def read_png(data: bytes) -> np.ndarray:
    """Decode what encode_png writes (8-bit grey or RGB, filter 0), checking every chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind, body = data[position + 4:position + 8], data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        position += 12 + length
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and colour in (0, 2) and b"IEND" in chunks
    channels = 3 if colour == 2 else 1
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + width * channels)
    assert (raw[:, 0] == 0).all()
    pixels = raw[:, 1:].reshape(height, width, channels)
    return pixels[..., 0] if channels == 1 else pixels


def scene(tmp_path, bands=4, rows=600, cols=900, tile=128, **kwargs):
    y, x = np.mgrid[0:rows, 0:cols]
    data = np.stack([(x * (b + 1) + y * 3) % 4000 for b in range(bands)]).astype(np.uint16)
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, data, tile_size=tile, crs=32633, transform=(10, 0, 500000, 0, -10, 5000000),
                             **kwargs)
    return path, blob, data
