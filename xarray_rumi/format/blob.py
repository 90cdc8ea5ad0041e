"""The header blob: 28 bytes of fields, then bit-packed frame byte counts.

Decoding checks every claim against the bytes given and :class:`Limits`
before allocating; counts and offsets come out of vectorised numpy, never a
Python loop over frames, and a blob whose counts are all equal
(``count_bits == 0``) allocates nothing per frame at all.
"""

from __future__ import annotations

import dataclasses
import operator
import struct
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import RumiFormatError
from .dtypes import SAMPLE_TYPES, SampleType, sample_type
from .grid import FrameGrid, FrameUnit
from .layout import base_frame_offset
from .limits import DEFAULT_LIMITS, Limits

MAGIC = 0x45564F4C
VERSION = 1
_FIELDS = struct.Struct("<IHIIHHHBBBIB")
HEADER_SIZE = _FIELDS.size  # 28
# Frames unpacked at a time when checking a blob: unpacking holds ~40 bytes a frame in temporaries,
# so a slice stays under 1 MiB (the bound tests/properties/test_format_fuzz.py holds the parser to).
_CHECK_SLICE = 1 << 14
_UINT8 = SAMPLE_TYPES[(1, 8)]  # for the examples below


@dataclass(frozen=True)
class Header:
    """A decoded header blob: the grid, the sample type and the frame sizes.

    >>> grid = FrameGrid(600, 600, 512, 512, 1)
    >>> h = Header.from_byte_counts(grid, _UINT8, [900, 300, 310, 100])
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
        """Encode counts canonically: the true minimum, the minimum width.

        A single-band grid is recorded with frame unit tile (0) whichever unit
        it was given: the two layouts are then the same file, and one blob
        per file keeps ``header_from_file(path)`` equal to what the writer
        returned.

        >>> Header.from_byte_counts(FrameGrid(4, 4, 4, 4, 1, FrameUnit.CELL), _UINT8, [9]).grid.frame_unit
        <FrameUnit.TILE: 0>
        """
        if grid.samples_per_pixel == 1 and grid.frame_unit is not FrameUnit.TILE:
            grid = dataclasses.replace(grid, frame_unit=FrameUnit.TILE)
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
        grid = FrameGrid(width, length, tile_width, tile_length, spp, FrameUnit(unit))
        grid.check(limits, rule="blob", bytes_per_sample=sample.bytes_per_sample)
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
        header._check_canonical(limits)
        return header

    def _check_canonical(self, limits: Limits) -> None:
        used_bits = self.grid.frame_count * self.count_bits
        if used_bits % 8 and self.packed[-1] >> (used_bits % 8):
            raise RumiFormatError("blob.padding", "unused bits in the final byte must be zero")
        smallest, largest = 0, 0
        if self.count_bits:
            # In slices, so checking a blob costs a bounded amount of memory.
            smallest, largest = 1 << 32, 0
            for start in range(0, self.frame_count, _CHECK_SLICE):
                part = self.residuals(start, min(start + _CHECK_SLICE, self.frame_count))
                smallest, largest = min(smallest, int(part.min())), max(largest, int(part.max()))
            if smallest != 0:
                raise RumiFormatError(
                    "blob.canonical", f"count_min {self.count_min} is not the smallest frame byte count "
                    f"(every residual is at least {smallest})")
            if largest.bit_length() != self.count_bits:
                raise RumiFormatError(
                    "blob.canonical", f"count_bits is {self.count_bits}, but the largest residual ({largest}) "
                    f"needs {largest.bit_length()}")
        if self.count_min + largest > 0xFFFFFFFF:
            raise RumiFormatError("blob.byte-counts", "a frame byte count does not fit TileByteCounts (LONG)")
        if self.count_min + largest > limits.max_frame_byte_count:
            raise RumiFormatError(
                "blob.limits", f"a frame of {self.count_min + largest} bytes exceeds Limits.max_frame_byte_count "
                f"({limits.max_frame_byte_count})")

    def to_bytes(self) -> bytes:
        """The blob as stored beside the file or in a catalog."""
        g = self.grid
        fields = _FIELDS.pack(
            MAGIC, VERSION, g.image_width, g.image_length, g.tile_width, g.tile_length,
            g.samples_per_pixel, self.sample_type.bits_per_sample, self.sample_type.sample_format,
            int(g.frame_unit), self.count_min, self.count_bits,
        )
        return fields + self.packed

    def __getstate__(self):
        # Dask ships headers to workers: send the blob's fields, not the
        # 8-bytes-a-frame prefix sum cached here, which is rebuilt on demand.
        return {name: self.__dict__[name] for name in ("grid", "sample_type", "count_min", "count_bits", "packed")}

    def __setstate__(self, state):
        self.__dict__.update(state)

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
        """Byte count of one frame, O(1): at most five bytes of the blob are read.

        >>> h = Header.from_byte_counts(FrameGrid(3, 1, 1, 1, 1), _UINT8, [7, 9, 8])
        >>> [h.byte_count(k) for k in range(3)]
        [7, 9, 8]
        """
        index = self._checked_index(index)
        if not self.count_bits:
            return self.count_min
        lo = index * self.count_bits
        chunk = self.packed[lo >> 3: (lo + self.count_bits + 7) >> 3]
        residual = (int.from_bytes(chunk, "little") >> (lo & 7)) & ((1 << self.count_bits) - 1)
        return self.count_min + residual

    @cached_property
    def _residual_prefix(self) -> np.ndarray:
        # prefix[k] = sum(residual[0:k]): one vectorised pass, 8 bytes a frame,
        # built on first use; every offset is then a lookup.
        prefix = np.zeros(self.frame_count + 1, np.int64)
        np.cumsum(self.residuals(), out=prefix[1:])
        return prefix

    def offset(self, index: int) -> int:
        """``base + k * count_min + sum(residual[0:k])`` for frame ``k`` (``k = N``: the end).

        O(1) once the residual prefix sum exists (built on first use, vectorised).
        """
        index = self._checked_index(index, allow_end=True)
        prefix = self._residual_prefix[index] if self.count_bits else 0
        return self.base_frame_offset + index * self.count_min + int(prefix)

    def offsets(self, indices=None) -> np.ndarray:
        """Offsets of ``indices`` (all frames by default), vectorised; ``N`` gives the end."""
        if indices is None:
            indices = np.arange(self.frame_count, dtype=np.int64)
        indices = self._checked_indices(indices, allow_end=True)
        prefix = self._residual_prefix[indices] if self.count_bits else 0
        return self.base_frame_offset + indices * self.count_min + prefix

    @property
    def file_size(self) -> int:
        """Where the last frame ends, which is the size of the file."""
        return self.offset(self.frame_count)

    def ranges(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, stops)`` byte ranges of the frames ``indices``."""
        indices = self._checked_indices(indices)
        starts = self.offsets(indices)
        counts = self.count_min + (
            self._residual_prefix[indices + 1] - self._residual_prefix[indices] if self.count_bits else 0
        )
        return starts, starts + counts

    def _checked_index(self, index: int, allow_end: bool = False) -> int:
        index = operator.index(index)
        if not 0 <= index < self.frame_count + allow_end:
            raise IndexError(f"frame {index} is outside 0..{self.frame_count - 1}")
        return index

    def _checked_indices(self, indices, allow_end: bool = False) -> np.ndarray:
        # Negative indices would wrap around in numpy and name the wrong frame.
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.frame_count + allow_end):
            raise IndexError(f"frame indices must lie in 0..{self.frame_count - 1}")
        return indices


def pack_residuals(residuals: np.ndarray, count_bits: int) -> bytes:
    """Pack residuals LSB-first at ``count_bits`` bits each, no padding.

    Eight residuals fill exactly ``count_bits`` bytes, so the residuals are
    packed as rows of eight: each of the eight columns is shifted into place
    and OR-ed into the at most five bytes it touches, vectorised over rows.

    >>> pack_residuals(np.array([1, 2, 3]), 2).hex()   # 0b11_10_01
    '39'
    """
    if count_bits == 0:
        return b""
    values = np.asarray(residuals, dtype=np.uint64).ravel() & np.uint64((1 << count_bits) - 1)
    rows = -(-values.size // 8)
    grouped = np.zeros(rows * 8, np.uint64)
    grouped[: values.size] = values
    grouped = grouped.reshape(rows, 8)
    out = np.zeros((rows, count_bits), np.uint8)
    for j in range(8):
        lo = j * count_bits
        shifted = grouped[:, j] << np.uint64(lo & 7)  # at most 39 bits
        for b in range(min(5, count_bits - (lo >> 3))):
            out[:, (lo >> 3) + b] |= ((shifted >> np.uint64(8 * b)) & np.uint64(0xFF)).astype(np.uint8)
    return out.tobytes()[: -(-values.size * count_bits // 8)]


def unpack_residuals(packed: bytes, count_bits: int, start: int, stop: int) -> np.ndarray:
    """Residuals ``start:stop`` (uint64), reading only the bytes that hold them.

    >>> unpack_residuals(bytes([0b11100100]), 2, 1, 4).tolist()
    [1, 2, 3]
    """
    count = max(stop - start, 0)
    if count_bits == 0 or count == 0:
        return np.zeros(count, np.uint64)
    first_byte = (start * count_bits) >> 3
    end_byte = -(-(stop * count_bits) // 8)
    # A residual spans at most 39 bits from its first byte: gather 5 bytes
    # per residual from a zero-padded copy of just the bytes they occupy.
    buf = np.zeros(end_byte - first_byte + 5, np.uint8)
    window = np.frombuffer(packed, np.uint8, count=end_byte - first_byte, offset=first_byte)
    buf[: window.size] = window
    lo = np.arange(count, dtype=np.uint64) * np.uint64(count_bits) + np.uint64(start * count_bits - first_byte * 8)
    first = (lo >> np.uint64(3)).astype(np.intp)
    word = np.zeros(count, np.uint64)
    for j in range(5):
        word |= buf[first + j].astype(np.uint64) << np.uint64(8 * j)
    return (word >> (lo & np.uint64(7))) & np.uint64((1 << count_bits) - 1)
