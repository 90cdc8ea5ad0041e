"""The header blob: 28 bytes of fields, then bit-packed frame byte counts.

Decoding checks every claim against the bytes given and :class:`Limits`
before allocating; counts and offsets come out of vectorised numpy, never a
Python loop over frames, and a blob whose counts are all equal
(``count_bits == 0``) allocates nothing per frame at all.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import RumiFormatError
from .dtypes import SampleType, sample_type
from .grid import FrameGrid, FrameUnit
from .layout import base_frame_offset
from .limits import DEFAULT_LIMITS, Limits

MAGIC = 0x45564F4C
VERSION = 1
_FIELDS = struct.Struct("<IHIIHHHBBBIB")
HEADER_SIZE = _FIELDS.size  # 28


@dataclass(frozen=True)
class Header:
    """A decoded header blob: the grid, the sample type and the frame sizes.

    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> grid = FrameGrid(600, 600, 512, 512, 1)
    >>> h = Header.from_byte_counts(grid, sample_type_from_name("uint8"), [900, 300, 310, 100])
    >>> (h.count_min, h.count_bits, len(h.to_bytes()))
    (100, 10, 33)
    >>> Header.from_bytes(h.to_bytes()).offset(2), h.byte_count(3)
    (1660, 100)
    """

    grid: FrameGrid
    sample_type: SampleType
    count_min: int
    count_bits: int
    packed: bytes

    # -- construction ---------------------------------------------------

    @classmethod
    def from_byte_counts(cls, grid: FrameGrid, sample: SampleType, byte_counts) -> Header:
        """Encode counts canonically: the true minimum, the minimum width."""
        counts = np.asarray(byte_counts, dtype=np.int64).ravel()
        if counts.size != grid.frame_count:
            raise ValueError(f"expected {grid.frame_count} byte counts, got {counts.size}")
        if counts.size == 0 or counts.min() < 1 or counts.max() > 0xFFFFFFFF:
            raise ValueError("every frame byte count must be between 1 and 2**32 - 1")
        count_min = int(counts.min())
        residuals = (counts - count_min).astype(np.uint64)
        count_bits = int(residuals.max()).bit_length()
        return cls(grid, sample, count_min, count_bits, pack_residuals(residuals, count_bits))

    @classmethod
    def from_bytes(cls, blob: bytes, limits: Limits = DEFAULT_LIMITS) -> Header:
        """Parse and check a blob against every rule of the spec's *Header blob*."""
        blob = bytes(blob)
        if len(blob) < HEADER_SIZE:
            raise RumiFormatError("blob.size", f"a blob is at least {HEADER_SIZE} bytes, got {len(blob)}")
        (magic, version, width, length, tile_width, tile_length, spp,
         bits, fmt, unit, count_min, count_bits) = _FIELDS.unpack_from(blob)
        if magic != MAGIC:
            raise RumiFormatError("blob.magic", f"expected 0x{MAGIC:08X} (bytes 4C 4F 56 45), got 0x{magic:08X}")
        if version != VERSION:
            raise RumiFormatError("blob.version", f"this reader implements version {VERSION}, got {version}")
        sample = sample_type(fmt, bits, rule="blob.sample-encoding")
        if unit not in (0, 1):
            raise RumiFormatError("blob.frame-unit", f"frame_unit must be 0 (tile) or 1 (cell), got {unit}")
        if count_bits > 32:
            raise RumiFormatError("blob.count-bits", f"count_bits must be between 0 and 32, got {count_bits}")
        if count_min < 1:
            raise RumiFormatError("blob.byte-counts", "count_min is 0, but every frame byte count must be greater than zero")
        grid = FrameGrid(width, length, tile_width, tile_length, spp, FrameUnit(unit)).check(limits, rule="blob")
        n = grid.frame_count
        packed_size = -(-n * count_bits // 8)
        if len(blob) != HEADER_SIZE + packed_size:
            raise RumiFormatError(
                "blob.size",
                f"{n} frames at {count_bits} bits need exactly {HEADER_SIZE + packed_size} bytes, got {len(blob)}",
            )
        if n == 1 and count_bits:
            raise RumiFormatError("blob.canonical", "a single-frame blob must have count_bits 0")
        header = cls(grid, sample, count_min, count_bits, blob[HEADER_SIZE:])
        header._check_canonical()
        return header

    def _check_canonical(self) -> None:
        used_bits = self.grid.frame_count * self.count_bits
        if used_bits % 8 and self.packed[-1] >> (used_bits % 8):
            raise RumiFormatError("blob.padding", "unused bits in the final byte must be zero")
        if not self.count_bits:
            return
        residuals = self.residuals()
        if int(residuals.min()) != 0:
            raise RumiFormatError("blob.canonical", "count_min is not the smallest frame byte count")
        if int(residuals.max()).bit_length() != self.count_bits:
            raise RumiFormatError("blob.canonical", "count_bits is wider than the largest residual needs")
        if self.count_min + int(residuals.max()) > 0xFFFFFFFF:
            raise RumiFormatError("blob.byte-counts", "a frame byte count does not fit TileByteCounts (LONG)")

    def to_bytes(self) -> bytes:
        """The blob as stored beside the file or in a catalog."""
        g = self.grid
        fields = _FIELDS.pack(
            MAGIC, VERSION, g.image_width, g.image_length, g.tile_width, g.tile_length,
            g.samples_per_pixel, self.sample_type.bits_per_sample, self.sample_type.sample_format,
            int(g.frame_unit), self.count_min, self.count_bits,
        )
        return fields + self.packed

    # -- access -----------------------------------------------------------

    @property
    def frame_count(self) -> int:
        return self.grid.frame_count

    @cached_property
    def base_frame_offset(self) -> int:
        return base_frame_offset(self.grid)

    def residuals(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Residuals of frames ``start:stop`` as uint64, read straight from the bits."""
        stop = self.frame_count if stop is None else stop
        return unpack_residuals(self.packed, self.count_bits, start, stop)

    def byte_counts(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Byte counts of frames ``start:stop`` in frame-index order (int64)."""
        return self.residuals(start, stop).astype(np.int64) + self.count_min

    def byte_count(self, index: int) -> int:
        """Byte count of one frame, O(1)."""
        index = self._checked_index(index)
        return int(self.byte_counts(index, index + 1)[0])

    @cached_property
    def _residual_prefix(self) -> np.ndarray:
        # prefix[k] = sum(residual[0:k]); 8 bytes a frame, built once on demand.
        prefix = np.zeros(self.frame_count + 1, np.int64)
        np.cumsum(self.residuals(), out=prefix[1:])
        return prefix

    def offset(self, index: int) -> int:
        """``base + k * count_min + sum(residual[0:k])`` for frame ``k``, O(1)."""
        index = self._checked_index(index, allow_end=True)
        prefix = self._residual_prefix[index] if self.count_bits else 0
        return self.base_frame_offset + index * self.count_min + int(prefix)

    def offsets(self, indices=None) -> np.ndarray:
        """Offsets of ``indices`` (all frames by default), vectorised."""
        if indices is None:
            indices = np.arange(self.frame_count, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        prefix = self._residual_prefix[indices] if self.count_bits else 0
        return self.base_frame_offset + indices * self.count_min + prefix

    @property
    def file_size(self) -> int:
        """Where the last frame ends, which is the size of the file."""
        return self.offset(self.frame_count)

    def ranges(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, stops)`` byte ranges of the frames ``indices``."""
        indices = np.asarray(indices, dtype=np.int64)
        starts = self.offsets(indices)
        counts = self.count_min + (
            self._residual_prefix[indices + 1] - self._residual_prefix[indices] if self.count_bits else 0
        )
        return starts, starts + counts

    def _checked_index(self, index: int, allow_end: bool = False) -> int:
        index = int(index)
        if not 0 <= index < self.frame_count + allow_end:
            raise IndexError(f"frame {index} is outside 0..{self.frame_count - 1}")
        return index


def pack_residuals(residuals: np.ndarray, count_bits: int) -> bytes:
    """Pack residuals LSB-first at ``count_bits`` bits each, no padding."""
    if count_bits == 0:
        return b""
    values = np.asarray(residuals, dtype=np.uint64)
    bits = ((values[:, None] >> np.arange(count_bits, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    return np.packbits(bits.ravel(), bitorder="little").tobytes()


def unpack_residuals(packed: bytes, count_bits: int, start: int, stop: int) -> np.ndarray:
    """Residuals ``start:stop``; each one reads at most 5 bytes of ``packed``."""
    count = max(stop - start, 0)
    if count_bits == 0:
        return np.zeros(count, np.uint64)
    # A residual spans at most 39 bits from its first byte: gather 5 bytes,
    # with zero padding so the gather never leaves the array.
    buf = np.frombuffer(packed + b"\0" * 5, np.uint8)
    lo = np.arange(start, stop, dtype=np.uint64) * np.uint64(count_bits)
    first = (lo >> np.uint64(3)).astype(np.int64)
    word = np.zeros(count, np.uint64)
    for j in range(5):
        word |= buf[first + j].astype(np.uint64) << np.uint64(8 * j)
    return (word >> (lo & np.uint64(7))) & np.uint64((1 << count_bits) - 1)


def read_header(blob: bytes, limits: Limits = DEFAULT_LIMITS) -> Header:
    """Parse a header blob (alias of :meth:`Header.from_bytes`).

    >>> read_header(b"\\0" * 28)
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: blob.magic: expected 0x45564F4C (bytes 4C 4F 56 45), got 0x00000000
    """
    return Header.from_bytes(blob, limits)
