"""The parameters of ``write`` and ``convert``, checked for type and range before any work (docs/writing.md)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..format.grid import FrameGrid, FrameUnit
from ..format.ifd import FIELD_MAXIMA, IMAGE_LENGTH, IMAGE_WIDTH, SAMPLES_PER_PIXEL, TAG_NAMES, TILE_LENGTH, TILE_WIDTH

MAX_TILE_SIDE = min(FIELD_MAXIMA[TILE_WIDTH], FIELD_MAXIMA[TILE_LENGTH])


def tile_shape(tile_size) -> tuple[int, int]:
    """``(tile_length, tile_width)`` from an int or a pair of ints; ``TypeError`` otherwise, ``ValueError`` out of range.

    >>> tile_shape(256), tile_shape((128, np.int64(64)))
    ((256, 256), (128, 64))
    """
    if _is_count(tile_size):
        sides = (tile_size, tile_size)
    elif isinstance(tile_size, (tuple, list, np.ndarray)) and np.ndim(tile_size) == 1 and len(tile_size) == 2:
        sides = tuple(tile_size)
    else:
        sides = None
    if sides is None or not all(_is_count(side) for side in sides):
        got = (f"the string {tile_size!r}: a string is not read as a number; pass tile_size=int(...)"
               if isinstance(tile_size, (str, bytes)) else f"{tile_size!r} (a {type(tile_size).__name__})")
        raise TypeError(f"tile_size must be an int or a (tile_length, tile_width) pair of ints, got {got}")
    if not all(1 <= side <= MAX_TILE_SIDE for side in sides):
        raise ValueError(f"tile_size must be between 1 and {MAX_TILE_SIDE} px, got {tile_size!r}")
    return int(sides[0]), int(sides[1])


def _is_count(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def parse_frame_unit(value) -> FrameUnit | None:
    """The :class:`FrameUnit` that ``frame_unit`` names, or ``None`` for ``"auto"`` (chosen by measuring).

    >>> parse_frame_unit("cell"), parse_frame_unit(0), parse_frame_unit("auto")
    (<FrameUnit.CELL: 1>, <FrameUnit.TILE: 0>, None)
    """
    if isinstance(value, str) and value == "auto":
        return None
    try:
        return FrameUnit.parse(value)
    except ValueError:
        raise ValueError(f"frame_unit must be 'tile', 'cell', 'auto', 0 or 1, got {value!r}") from None


def check_storage_options(storage_options) -> None:
    """Refuse ``storage_options`` that are not a mapping (or ``None``) before any work."""
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise TypeError(f"storage_options must be a dict of fsspec options or None, got {storage_options!r} "
                        f"(a {type(storage_options).__name__})")


def check_fits_tiff(grid: FrameGrid) -> None:
    """Refuse an image whose size does not fit its TIFF field, from the shape alone (the IFD is built last)."""
    sizes = ((IMAGE_WIDTH, grid.image_width, "an image {} px wide", "px"),
             (IMAGE_LENGTH, grid.image_length, "an image {} px tall", "px"),
             (SAMPLES_PER_PIXEL, grid.samples_per_pixel, "an image of {} bands", "bands"))
    for tag, value, what, unit in sizes:
        if value > FIELD_MAXIMA[tag]:
            raise ValueError(f"{what.format(value)} does not fit a TIFF file: {TAG_NAMES[tag]} is at most "
                             f"{FIELD_MAXIMA[tag]} {unit}; write it as several images")
