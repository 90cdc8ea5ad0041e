"""Where things sit in a rumi file, derived from the shape alone.

The IFD is fixed at byte 16 and 236 bytes long; only values larger than 8
bytes go out of line, so the start of the frame data follows from ``B`` and
``N`` (spec: *Deriving base_frame_offset*).
"""

from __future__ import annotations

from .grid import FrameGrid

BIGTIFF_HEADER_SIZE = 16
IFD_OFFSET = 16
TAG_COUNT = 11
IFD_SIZE = 8 + 20 * TAG_COUNT + 8  # entry count, 11 entries, next-IFD offset
MODEL_TRANSFORMATION_SIZE = 16 * 8
GEO_KEY_DIRECTORY_SIZE = 16 * 2
GEOREFERENCING_SIZE = MODEL_TRANSFORMATION_SIZE + GEO_KEY_DIRECTORY_SIZE


def external_sizes(samples_per_pixel: int, frame_count: int) -> dict[int, int]:
    """Bytes each tag stores out of line, keyed by tag, in rising tag order.

    >>> external_sizes(5, 2)
    {258: 10, 324: 16, 339: 10, 34264: 128, 34735: 32}
    """
    b, n = samples_per_pixel, frame_count
    sizes = {
        258: 2 * b if b >= 5 else 0,
        324: 8 * n if n >= 2 else 0,
        325: 4 * n if n >= 3 else 0,
        339: 2 * b if b >= 5 else 0,
        34264: MODEL_TRANSFORMATION_SIZE,
        34735: GEO_KEY_DIRECTORY_SIZE,
    }
    return {tag: size for tag, size in sizes.items() if size}


def base_frame_offset(grid: FrameGrid) -> int:
    """Byte offset of the first frame: ``252 + external``.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> base_frame_offset(FrameGrid(256, 256, 256, 256, 1))
    412
    """
    external = sum(external_sizes(grid.samples_per_pixel, grid.frame_count).values())
    return BIGTIFF_HEADER_SIZE + IFD_SIZE + external


def georeferencing_offset(grid: FrameGrid) -> int:
    """Byte offset of the ModelTransformation values; GeoKeys follow them.

    Both are always the last external values, so they end at the first frame.
    """
    return base_frame_offset(grid) - GEOREFERENCING_SIZE
