"""Checking a blob against the fixed head of its file's IFD (spec rule ``blob.matches-file``)."""

from __future__ import annotations

import numpy as np

from ..errors import RumiFormatError
from .blob import Header
from .dtypes import SAMPLE_TYPES
from .grid import FrameGrid, FrameUnit
from .ifd import TAG_NAMES, parse_head
from .placement import (BITS_PER_SAMPLE, GEOREFERENCING_SIZE, IFD_HEAD_SIZE, IMAGE_LENGTH, IMAGE_WIDTH, SAMPLE_FORMAT,
                        SAMPLES_PER_PIXEL, TILE_BYTE_COUNTS, TILE_LENGTH, TILE_OFFSETS, TILE_WIDTH, external_sizes,
                        georeferencing_offset)


def ifd_head_ranges(grid: FrameGrid, *, georeferencing: bool = False) -> list[tuple[int, int]]:
    """The byte ranges of a file that :func:`check_blob_against_ifd_head` needs for ``grid``.

    >>> ifd_head_ranges(FrameGrid(100, 100, 100, 100, 13), georeferencing=True)
    [(0, 278), (434, 620)]
    """
    external = external_sizes(grid.samples_per_pixel, grid.frame_count)
    tags = georeferencing_offset(grid)
    end = tags + GEOREFERENCING_SIZE if georeferencing else tags
    if SAMPLE_FORMAT not in external:  # BitsPerSample and SampleFormat inline: the 252 bytes hold them
        return [(0, IFD_HEAD_SIZE), (tags, end)] if georeferencing else [(0, IFD_HEAD_SIZE)]
    return [(0, IFD_HEAD_SIZE + external[BITS_PER_SAMPLE]), (tags - external[SAMPLE_FORMAT], end)]


def split_head(grid: FrameGrid, payloads, *, georeferencing: bool = False) -> tuple[bytes, bytes, bytes]:
    """``(head, sample_formats, georeferencing tags)``: the bytes of :func:`ifd_head_ranges` taken apart.

    >>> [len(p) for p in split_head(FrameGrid(9, 9, 9, 9, 3), [b"h" * 252, b"g" * 160], georeferencing=True)]
    [252, 0, 160]
    """
    head, *rest = payloads
    tail = rest[0] if rest else b""
    if not georeferencing:
        return head, tail, b""
    if SAMPLE_FORMAT not in external_sizes(grid.samples_per_pixel, grid.frame_count):
        return head, b"", tail
    return head, tail[:-GEOREFERENCING_SIZE], tail[-GEOREFERENCING_SIZE:]


def check_blob_against_ifd_head(blob: Header, head: bytes, sample_formats: bytes = b"") -> None:
    """Refuse (``blob.matches-file``) a blob that disagrees with its file's IFD head (:func:`split_head`)."""
    stated = parse_head(head)
    grid = blob.grid
    _check_sizes(grid, {tag: stated[tag] for tag in _SIZE_TAGS})
    bands = grid.samples_per_pixel
    _check_sample_type(blob.sample_type, _per_band(stated[BITS_PER_SAMPLE][1], head[IFD_HEAD_SIZE:], bands),
                       _per_band(stated[SAMPLE_FORMAT][1], sample_formats, bands))
    _check_frame_count(grid, stated[TILE_OFFSETS][0])
    counts = tuple(blob.byte_counts().tolist()) if grid.frame_count <= 2 else None
    _agree(f"frame byte counts {counts}", stated[TILE_BYTE_COUNTS], counts, "TileByteCounts")
    _agree(f"frame offsets ({blob.base_frame_offset},)", stated[TILE_OFFSETS],
           (blob.base_frame_offset,) if grid.frame_count == 1 else None, "TileOffsets")


def check_blob_against_file(blob: Header, file_header: Header) -> None:
    """Refuse (``blob.matches-file``) a blob that disagrees with its file's whole IFD, read as a Header.

    >>> from .dtypes import sample_type_from_name
    >>> grid, uint8 = FrameGrid(8, 8, 4, 4, 1), sample_type_from_name("uint8")
    >>> check_blob_against_file(Header.from_byte_counts(grid, uint8, [1, 2, 3, 5]),
    ...                         Header.from_byte_counts(grid, uint8, [1, 2, 3, 4]))
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: blob.matches-file: blob says frame 3 holds 5 bytes, the file's IFD says 4 (TileByteCounts)
    """
    file_grid = file_header.grid
    _check_sizes(blob.grid, {tag: (1, (getattr(file_grid, name),)) for tag, name in _SIZE_TAGS.items()})
    file_sample = file_header.sample_type
    bands = file_grid.samples_per_pixel
    _check_sample_type(blob.sample_type, (file_sample.bits_per_sample,) * bands, (file_sample.sample_format,) * bands)
    _check_frame_count(blob.grid, file_grid.frame_count)
    differ = np.flatnonzero(blob.byte_counts() != file_header.byte_counts())
    if differ.size:
        k = int(differ[0])
        raise RumiFormatError("blob.matches-file", f"blob says frame {k} holds {blob.byte_count(k)} bytes, "
                              f"the file's IFD says {file_header.byte_count(k)} (TileByteCounts)")


_SIZE_TAGS = {IMAGE_WIDTH: "image_width", IMAGE_LENGTH: "image_length", TILE_WIDTH: "tile_width",
              TILE_LENGTH: "tile_length", SAMPLES_PER_PIXEL: "samples_per_pixel"}


def _check_sizes(grid: FrameGrid, stated: dict) -> None:
    for tag, name in _SIZE_TAGS.items():
        _agree(f"{name} {getattr(grid, name)}", stated[tag], (getattr(grid, name),), TAG_NAMES[tag])


def _agree(blob_says: str, stated: tuple[int, tuple | None], expected: tuple | None, tag_name: str) -> None:
    """Raise unless an inline tag holds ``expected`` (``None``: the blob does not say)."""
    count, values = stated
    if expected is None or values == expected:
        return
    file_says = values if values is None or len(values) != 1 else values[0]
    raise RumiFormatError("blob.matches-file", f"blob says {blob_says}, the file's IFD says "
                          f"{file_says if values is not None else f'{count} values'} ({tag_name})")


def _check_sample_type(sample, bits: tuple, formats: tuple) -> None:
    # Same-width types (uint16, float16, ...) decode from the same bytes: only these tags tell them apart.
    if set(bits) == {sample.bits_per_sample} and set(formats) == {sample.sample_format}:
        return
    if len(set(bits)) == 1 and len(set(formats)) == 1:
        file_type = SAMPLE_TYPES.get((formats[0], bits[0]))
        says = f"{file_type.name if file_type else 'no valid type'} (sample format {formats[0]}, {bits[0]} bits)"
    else:
        says = f"sample formats {formats} and bits {bits} across its bands"
    raise RumiFormatError("blob.matches-file", f"blob says {sample.name} (sample format {sample.sample_format}, "
                          f"{sample.bits_per_sample} bits), the file's IFD says {says}")


def _per_band(inline: tuple | None, out_of_line: bytes, bands: int) -> tuple:
    """A per-band SHORT tag's values: inline, or from the bytes after the IFD."""
    if inline is not None:
        return inline
    return tuple(np.frombuffer(out_of_line, "<u2", count=min(bands, len(out_of_line) // 2)).tolist())


def _check_frame_count(grid: FrameGrid, file_frames: int) -> None:
    if file_frames == grid.frame_count:
        return
    units = {grid.positions * grid.samples_per_pixel: FrameUnit.TILE, grid.positions: FrameUnit.CELL}
    if file_frames in units:
        raise RumiFormatError("blob.matches-file", f"blob frame_unit is {grid.frame_unit.name.lower()}, "
                              f"the file's TileOffsets say {units[file_frames].name.lower()}")
    raise RumiFormatError("blob.matches-file", f"blob says {grid.frame_count} frames, the file's IFD says "
                          f"{file_frames} (TileOffsets)")


__all__ = ["IFD_HEAD_SIZE", "check_blob_against_file", "check_blob_against_ifd_head", "ifd_head_ranges",
           "split_head"]
