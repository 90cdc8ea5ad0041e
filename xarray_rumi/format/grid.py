"""The frame grid: which frame holds which pixels, for both frame units."""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import RumiFormatError
from .limits import DEFAULT_LIMITS, Limits


class FrameUnit(enum.IntEnum):
    """What one frame holds: one band (``TILE``) or all bands (``CELL``)."""

    TILE = 0
    CELL = 1

    @classmethod
    def parse(cls, value) -> FrameUnit:
        """Accept ``"tile"``/``"cell"``, 0/1 or a ``FrameUnit``; ``ValueError`` otherwise."""
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        if not isinstance(value, bool) and hasattr(value, "__index__") and value in (0, 1):
            return cls(operator.index(value))  # numpy integers too, never 0.5
        raise ValueError(f"frame_unit must be 'tile', 'cell', 0 or 1, got {value!r}")


@dataclass(frozen=True)
class FrameGrid:
    """The image shape, nominal tile shape, band count and frame unit.

    >>> g = FrameGrid(image_width=1000, image_length=600, tile_width=512,
    ...               tile_length=256, samples_per_pixel=3, frame_unit=FrameUnit.TILE)
    >>> (g.tiles_across, g.tiles_down, g.frame_count)
    (2, 3, 18)
    >>> g.frame_shape(g.frame_index(row=2, col=1, band=2))
    (1, 88, 488)
    """

    image_width: int
    image_length: int
    tile_width: int
    tile_length: int
    samples_per_pixel: int
    frame_unit: FrameUnit = FrameUnit.TILE

    def __post_init__(self) -> None:
        for name in ("image_width", "image_length", "tile_width", "tile_length", "samples_per_pixel"):
            object.__setattr__(self, name, int(getattr(self, name)))
        object.__setattr__(self, "frame_unit", FrameUnit(int(self.frame_unit)))

    @cached_property
    def tiles_across(self) -> int:
        return -(-self.image_width // self.tile_width)

    @cached_property
    def tiles_down(self) -> int:
        return -(-self.image_length // self.tile_length)

    @cached_property
    def positions(self) -> int:
        return self.tiles_across * self.tiles_down

    @property
    def bands_per_frame(self) -> int:
        return self.samples_per_pixel if self.frame_unit is FrameUnit.CELL else 1

    @property
    def frames_per_position(self) -> int:
        return 1 if self.frame_unit is FrameUnit.CELL else self.samples_per_pixel

    @cached_property
    def frame_count(self) -> int:
        return self.positions * self.frames_per_position

    @property
    def shape(self) -> tuple[int, int, int]:
        """The image as ``(B, Y, X)``."""
        return (self.samples_per_pixel, self.image_length, self.image_width)

    @property
    def largest_frame_samples(self) -> int:
        """Samples of the largest frame (the first: edge frames are cut, never larger)."""
        h, w = min(self.tile_length, self.image_length), min(self.tile_width, self.image_width)
        return self.bands_per_frame * h * w

    def check(self, limits: Limits = DEFAULT_LIMITS, *, rule: str = "grid", bytes_per_sample: int | None = None) -> FrameGrid:
        """``self``, unless the spec forbids the grid or its size exceeds ``limits`` (``RumiFormatError``)."""
        if self.tile_width < 1 or self.tile_length < 1:
            raise RumiFormatError(f"{rule}.tile-size", "tile_width and tile_length must be greater than zero")
        if self.samples_per_pixel < 1:
            raise RumiFormatError(f"{rule}.samples-per-pixel", "samples_per_pixel must be at least 1")
        if self.image_width < 1 or self.image_length < 1:
            raise RumiFormatError(f"{rule}.image-size", "image_width and image_length must be at least 1 pixel")
        if self.frame_count > limits.max_frames:
            raise RumiFormatError(f"{rule}.limits", f"{self.frame_count} frames exceed the limit of "
                                  f"{limits.max_frames} (Limits.max_frames)")
        if bytes_per_sample is not None and self.largest_frame_samples * bytes_per_sample > limits.max_frame_bytes:
            raise RumiFormatError(f"{rule}.limits", f"a frame of {self.largest_frame_samples} samples of "
                                  f"{bytes_per_sample} bytes exceeds Limits.max_frame_bytes ({limits.max_frame_bytes})")
        image_bytes = self.samples_per_pixel * self.image_length * self.image_width * (bytes_per_sample or 0)
        if image_bytes > limits.max_image_bytes:
            raise RumiFormatError(f"{rule}.limits", f"an image of {image_bytes} decoded bytes exceeds "
                                  f"Limits.max_image_bytes ({limits.max_image_bytes})")
        return self

    def frame_index(self, row: int, col: int, band: int = 0) -> int:
        """The spec's ``frame_index``; ``band`` is ignored for cell frames."""
        position = row * self.tiles_across + col
        if self.frame_unit is FrameUnit.CELL:
            return position
        return position * self.samples_per_pixel + band

    def frame_location(self, index: int) -> tuple[int, int, int]:
        """``(row, col, first band)`` of frame ``index``."""
        if not 0 <= index < self.frame_count:
            raise IndexError(f"frame {index} is outside 0..{self.frame_count - 1}")
        position, band = divmod(int(index), self.frames_per_position)
        row, col = divmod(position, self.tiles_across)
        return row, col, band

    def frame_window(self, index: int) -> tuple[slice, slice, slice]:
        """The ``(band, y, x)`` slices of the image that frame ``index`` holds."""
        row, col, band = self.frame_location(index)
        y0, x0 = row * self.tile_length, col * self.tile_width
        y1 = min(y0 + self.tile_length, self.image_length)
        x1 = min(x0 + self.tile_width, self.image_width)
        return slice(band, band + self.bands_per_frame), slice(y0, y1), slice(x0, x1)

    def frame_shape(self, index: int) -> tuple[int, int, int]:
        """``(bands, h, w)`` of frame ``index``, cut to the image bounds."""
        bands, ys, xs = self.frame_window(index)
        return (bands.stop - bands.start, ys.stop - ys.start, xs.stop - xs.start)

    def frame_locations(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`frame_location` of every frame, vectorised."""
        # repeats: cheaper than dividing a million indices
        per_position, across = self.frames_per_position, self.tiles_across
        rows = np.repeat(np.arange(self.tiles_down, dtype=np.int64), across * per_position)
        cols = np.tile(np.repeat(np.arange(across, dtype=np.int64), per_position), self.tiles_down)
        return rows, cols, np.tile(np.arange(per_position, dtype=np.int64), self.positions)

    @property
    def frame_grid_shape(self) -> tuple[int, int, int]:
        """``(frames per position, tiles down, tiles across)``."""
        return (self.frames_per_position, self.tiles_down, self.tiles_across)

    def on_frame_grid(self, values) -> np.ndarray:
        """Per-frame ``values`` in frame-index order, as a view of :attr:`frame_grid_shape`."""
        grid = np.asarray(values).reshape(self.tiles_down, self.tiles_across, self.frames_per_position)
        return grid.transpose(2, 0, 1)

    def edge_masks(self) -> tuple[np.ndarray, np.ndarray]:
        """Masks over frame indices: right-edge frames, bottom-edge frames (the corner in neither)."""
        right = np.zeros(self.frame_grid_shape[1:] + (self.frames_per_position,), bool)
        bottom = np.zeros_like(right)
        right[:-1, -1] = True
        bottom[-1, :-1] = True
        return right.reshape(-1), bottom.reshape(-1)

    @cached_property
    def frame_sizes(self) -> frozenset[tuple[int, int]]:
        """The distinct ``(h, w)`` of the frames."""
        _, heights, widths = self.frame_chunks
        return frozenset((h, w) for h in set(heights) for w in set(widths))

    @property
    def frame_chunks(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """The ``(band, y, x)`` Dask chunks of one frame each."""
        return (
            (self.bands_per_frame,) * self.frames_per_position,
            axis_sizes(self.image_length, self.tile_length),
            axis_sizes(self.image_width, self.tile_width),
        )

    def frames_touching(self, bands: range, rows: range, cols: range) -> np.ndarray:
        """Frame indices overlapping a ``(band, y, x)`` window, in frame-index order."""
        if not (len(bands) and len(rows) and len(cols)):
            return np.empty(0, np.int64)
        r = np.arange(rows.start // self.tile_length, (rows.stop - 1) // self.tile_length + 1)
        c = np.arange(cols.start // self.tile_width, (cols.stop - 1) // self.tile_width + 1)
        positions = (r[:, None] * self.tiles_across + c[None, :]).ravel()
        if self.frame_unit is FrameUnit.CELL:
            return positions.astype(np.int64)
        b = np.arange(bands.start, bands.stop)
        return (positions[:, None] * self.samples_per_pixel + b[None, :]).ravel().astype(np.int64)

    def frames_at_points(self, bands, rows, cols) -> FramePoints:
        """The outer selection ``bands x rows x cols`` (in-range indices), grouped by the frames holding them.

        >>> points = FrameGrid(50, 40, 16, 16, 3).frames_at_points(np.array([2]), np.array([39, 1]), np.array([20, 0, 17]))
        >>> points.frames.tolist(), [(where.tolist(), inside.tolist()) for where, inside in points.in_frame(29)]
        ([2, 5, 26, 29], [([0], [0]), ([0], [7]), ([0, 2], [4, 1])])
        """
        return FramePoints(self, bands, rows, cols)

    def edge_sizes(self) -> tuple[int, int]:
        """``(last row height, last column width)`` of the grid."""
        return (
            self.image_length - (self.tiles_down - 1) * self.tile_length,
            self.image_width - (self.tiles_across - 1) * self.tile_width,
        )


class FramePoints:
    """What :meth:`FrameGrid.frames_at_points` returns."""

    def __init__(self, grid: FrameGrid, bands, rows, cols):
        self.grid = grid
        self._axes = (_by_block(bands, grid.bands_per_frame), _by_block(rows, grid.tile_length),
                      _by_block(cols, grid.tile_width))
        band_blocks, row_blocks, col_blocks = (np.fromiter(axis, np.int64, len(axis)) for axis in self._axes)
        positions = (row_blocks[:, None] * grid.tiles_across + col_blocks[None, :]).reshape(-1)
        self.frames = (positions[:, None] * grid.frames_per_position + band_blocks[None, :]).reshape(-1)

    def in_frame(self, index: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """``(positions in the selection, positions in the frame)`` for each axis ``(band, y, x)`` of frame ``index``."""
        position, band = divmod(index, self.grid.frames_per_position)
        row, col = divmod(position, self.grid.tiles_across)
        bands, rows, cols = self._axes
        return bands[band], rows[row], cols[col]


def _by_block(points, size: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{block: (positions in points, offsets in the block)}`` of the points along one axis, blocks rising."""
    points = np.asarray(points, dtype=np.int64)
    block = points // size
    order = np.argsort(block, kind="stable")
    blocks, starts = np.unique(block[order], return_index=True)
    return {b: (chosen, points[chosen] - b * size) for b, chosen in zip(blocks.tolist(), np.split(order, starts[1:]))}


def axis_sizes(extent: int, tile: int) -> tuple[int, ...]:
    """The frame sizes along one axis: whole tiles, then the cut edge.

    >>> axis_sizes(1000, 256)
    (256, 256, 256, 232)
    """
    full, rest = divmod(extent, tile)
    return (tile,) * full + ((rest,) if rest else ())


def overlap(frame: slice, window: range) -> tuple[slice, slice]:
    """``(slice into the window, slice into the frame)`` of one axis where a frame and a window meet.

    >>> overlap(slice(32, 64), range(40, 100))
    (slice(0, 24, None), slice(8, 32, None))
    """
    lo, hi = max(frame.start, window.start), min(frame.stop, window.stop)
    return slice(lo - window.start, hi - window.start), slice(lo - frame.start, hi - frame.start)
