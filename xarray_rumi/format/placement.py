"""Where things sit in a rumi file, derived from the shape alone."""

from __future__ import annotations

import numpy as np

from ..errors import RumiFormatError
from .grid import FrameGrid

# The eleven tags of the fixed IFD (spec: *The fixed IFD*), by number.
IMAGE_WIDTH, IMAGE_LENGTH, BITS_PER_SAMPLE, SAMPLES_PER_PIXEL = 256, 257, 258, 277
TILE_WIDTH, TILE_LENGTH, TILE_OFFSETS, TILE_BYTE_COUNTS = 322, 323, 324, 325
SAMPLE_FORMAT, MODEL_TRANSFORMATION, GEO_KEY_DIRECTORY = 339, 34264, 34735
SHORT, LONG, DOUBLE, LONG8 = 3, 4, 12, 16
TYPE_CODES = {SHORT: "<u2", LONG: "<u4", DOUBLE: "<f8", LONG8: "<u8"}
TYPE_SIZES = {type_code: np.dtype(code).itemsize for type_code, code in TYPE_CODES.items()}

#: (tag, name, type, count: a number, "B" for one per band or "N" for one per frame), in the IFD's order.
FIXED_TAGS = (
    (IMAGE_WIDTH, "ImageWidth", LONG, 1),
    (IMAGE_LENGTH, "ImageLength", LONG, 1),
    (BITS_PER_SAMPLE, "BitsPerSample", SHORT, "B"),
    (SAMPLES_PER_PIXEL, "SamplesPerPixel", SHORT, 1),
    (TILE_WIDTH, "TileWidth", SHORT, 1),
    (TILE_LENGTH, "TileLength", SHORT, 1),
    (TILE_OFFSETS, "TileOffsets", LONG8, "N"),
    (TILE_BYTE_COUNTS, "TileByteCounts", LONG, "N"),
    (SAMPLE_FORMAT, "SampleFormat", SHORT, "B"),
    (MODEL_TRANSFORMATION, "ModelTransformationTag", DOUBLE, 16),
    (GEO_KEY_DIRECTORY, "GeoKeyDirectoryTag", SHORT, 16),
)

# TIFF's header is the "preamble" here, as "header" means the blob.
PREAMBLE_SIZE = 16
IFD_OFFSET = 16
TAG_COUNT = len(FIXED_TAGS)
IFD_SIZE = 8 + 20 * TAG_COUNT + 8  # entry count, 11 entries, next-IFD offset
IFD_HEAD_SIZE = PREAMBLE_SIZE + IFD_SIZE
MODEL_TRANSFORMATION_SIZE = 16 * 8
GEOREFERENCING_SIZE = MODEL_TRANSFORMATION_SIZE + 16 * 2


def expected_counts(samples_per_pixel: int, frame_count: int) -> dict[int, int]:
    """The count every tag must have for ``B`` bands and ``N`` frames, in the IFD's order."""
    per = {"B": samples_per_pixel, "N": frame_count}
    return {tag: per.get(count, count) for tag, _, _, count in FIXED_TAGS}


def external_sizes(samples_per_pixel: int, frame_count: int) -> dict[int, int]:
    """Bytes each tag stores out of line (its value does not fit 8 bytes), keyed by tag, in rising tag order.

    >>> external_sizes(5, 2)
    {258: 10, 324: 16, 339: 10, 34264: 128, 34735: 32}
    """
    counts = expected_counts(samples_per_pixel, frame_count)
    sizes = {tag: TYPE_SIZES[type_code] * counts[tag] for tag, _, type_code, _ in FIXED_TAGS}
    return {tag: size for tag, size in sizes.items() if size > 8}


def base_frame_offset(grid: FrameGrid) -> int:
    """Byte offset of the first frame: ``252 +`` the external values."""
    return IFD_HEAD_SIZE + sum(external_sizes(grid.samples_per_pixel, grid.frame_count).values())


def georeferencing_offset(grid: FrameGrid) -> int:
    """Byte offset of the ModelTransformation values; GeoKeys follow them."""
    return base_frame_offset(grid) - GEOREFERENCING_SIZE


def check_frames_inside(offsets, byte_counts, file_size: int, *, from_blob: bool = False,
                        name: str = "the file") -> None:
    """Refuse (``frames.truncated``) a file of ``file_size`` bytes that does not hold every frame whole.

    >>> check_frames_inside(np.array([412, 512, 612]), np.array([100, 100, 50]), 600)
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: frames.truncated: the file is 600 bytes, but its frames end at byte 662 (62 bytes missing): frame 1 of 3 is the first cut short or absent, 2 in all
    """
    ends = np.asarray(offsets, dtype=np.int64) + np.asarray(byte_counts, dtype=np.int64)
    cut = np.flatnonzero(ends > file_size)
    if not cut.size:
        return
    first, last_end = int(cut[0]), int(ends.max())
    missing = last_end - file_size
    raise RumiFormatError(
        "frames.truncated",
        f"{name} is {file_size} bytes, but its frames end at byte {last_end} ({missing} "
        f"byte{'s' if missing > 1 else ''} missing): frame {first} of {ends.size} is the first cut short "
        f"or absent, {cut.size} in all"
        + (": the file was cut after its blob was made, or the blob is not this file's" if from_blob else ""),
    )
