"""The header blob: 28 bytes of fields, then bit-packed frame byte counts."""

from __future__ import annotations

import bisect
import dataclasses
import operator
import struct
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import RumiFormatError
from .container import refuse_later_blob
from .dtypes import SampleType, sample_type
from .grid import FrameGrid, FrameUnit
from .placement import base_frame_offset
from .limits import DEFAULT_LIMITS, Limits

MAGIC = 0x45564F4C
VERSION = 1
_FIELDS = struct.Struct("<IHIIHHHBBBIB")
HEADER_SIZE = _FIELDS.size  # 28
# ~20 bytes of temporaries a frame: a slice stays under the 1 MiB tests/properties/test_format_fuzz.py allows.
_CHECK_SLICE = 1 << 14
# ~1 MiB of temporaries, yet large enough that numpy's cost per call is small beside the work.
_CHECK_BATCH = 1 << 16


@dataclass(frozen=True)
class Header:
    """A decoded header blob: the grid, the sample type and the frame sizes.

    >>> grid = FrameGrid(600, 600, 512, 512, 1)
    >>> h = Header.from_byte_counts(grid, sample_type(1, 8), [900, 300, 310, 100])
    >>> (h.count_min, h.count_bits, len(h.to_bytes()))
    (100, 10, 33)
    >>> Header.from_bytes(h.to_bytes()).offset(2), h.byte_count(3)
    (1660, 100)
    """

    grid: FrameGrid
    sample_type: SampleType
    count_min: int
    count_bits: int
    packed: bytes | memoryview  # a view of the parsed blob, not a copy
    blob: bytes | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_byte_counts(cls, grid: FrameGrid, sample: SampleType, byte_counts) -> Header:
        """Encode counts canonically (the true minimum, the least width); one band is always tile frames."""
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
        header = cls._from_fields(blob, limits)._with_residuals(blob)
        header._check_canonical(limits)
        return header

    @classmethod
    def _from_fields(cls, blob: bytes, limits: Limits) -> Header:
        """The fields of ``blob`` checked, without residuals."""
        try:
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
            grid = FrameGrid(width, length, tile_width, tile_length, spp, FrameUnit(unit))
            grid.check(limits, rule="blob", bytes_per_sample=sample.bytes_per_sample)
        except RumiFormatError as refusal:
            refuse_later_blob(blob, refusal)
            raise
        return cls(grid, sample, count_min, count_bits, b"")

    @property
    def blob_size(self) -> int:
        """Bytes of the blob these fields describe."""
        return HEADER_SIZE + -(-self.frame_count * self.count_bits // 8)

    def _with_residuals(self, blob: bytes) -> Header:
        """This header with the residuals of ``blob``, whose size is checked."""
        if len(blob) != self.blob_size:
            raise RumiFormatError(
                "blob.size", f"{self.frame_count} frames at {self.count_bits} bits need exactly {self.blob_size} "
                f"bytes, got {len(blob)}")
        if self.frame_count == 1 and self.count_bits:
            raise RumiFormatError("blob.canonical", "a single-frame blob must have count_bits 0")
        return type(self)(self.grid, self.sample_type, self.count_min, self.count_bits,
                          memoryview(blob)[HEADER_SIZE:], blob)

    def _check_canonical(self, limits: Limits) -> None:
        smallest, largest = 0, 0
        if self.count_bits:
            smallest, largest = 1 << 32, 0
            for start in range(0, self.frame_count, _CHECK_SLICE):
                part = self.residuals(start, min(start + _CHECK_SLICE, self.frame_count))
                smallest, largest = min(smallest, int(part.min())), max(largest, int(part.max()))
        last_byte = self.packed[-1] if len(self.packed) else 0
        fault = int(_count_faults(np.array([self.count_min]), np.array([smallest]), np.array([largest]),
                                  np.array([last_byte], np.uint8), self.count_bits, self.frame_count, limits)[0])
        if fault >= 0:
            raise _count_fault(fault, self.count_min, smallest, largest, self.count_bits, limits)

    def to_bytes(self) -> bytes:
        """The blob bytes: the one parsed, or built once."""
        return self.blob if self.blob is not None else self._built_blob

    @cached_property
    def _built_blob(self) -> bytes:
        g = self.grid
        fields = _FIELDS.pack(
            MAGIC, VERSION, g.image_width, g.image_length, g.tile_width, g.tile_length,
            g.samples_per_pixel, self.sample_type.bits_per_sample, self.sample_type.sample_format,
            int(g.frame_unit), self.count_min, self.count_bits,
        )
        return fields + self.packed

    def __getstate__(self):
        # Dask ships headers to workers: the fields only, not the cached prefix sum (8 bytes a frame).
        state = {name: self.__dict__[name] for name in ("grid", "sample_type", "count_min", "count_bits")}
        return {**state, "packed": bytes(self.packed)}

    def __setstate__(self, state):
        self.__dict__.update(state, blob=None)

    @property
    def frame_count(self) -> int:
        return self.grid.frame_count

    @cached_property
    def base_frame_offset(self) -> int:
        return base_frame_offset(self.grid)

    def residuals(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Residuals of frames ``start:stop`` (uint64)."""
        stop = self.frame_count if stop is None else stop
        return unpack_residuals(self.packed, self.count_bits, start, stop)

    def byte_counts(self) -> np.ndarray:
        """Byte counts of every frame in frame-index order (int64)."""
        return self.residuals().astype(np.int64) + self.count_min

    def byte_count(self, index: int) -> int:
        """Byte count of one frame, reading at most five bytes of the blob."""
        index = self._checked_index(index)
        if not self.count_bits:
            return self.count_min
        lo = index * self.count_bits
        chunk = self.packed[lo >> 3: (lo + self.count_bits + 7) >> 3]
        residual = (int.from_bytes(chunk, "little") >> (lo & 7)) & ((1 << self.count_bits) - 1)
        return self.count_min + residual

    @cached_property
    def _residual_prefix(self) -> np.ndarray:
        # prefix[k] = sum(residual[0:k]): every offset is then a lookup.
        prefix = np.zeros(self.frame_count + 1, np.int64)
        np.cumsum(self.residuals(), out=prefix[1:])
        return prefix

    def offset(self, index: int) -> int:
        """``base + k * count_min + sum(residual[0:k])`` for frame ``k`` (``k = N``: the end)."""
        index = self._checked_index(index, allow_end=True)
        prefix = int(self._residual_prefix[index]) if self.count_bits else 0  # scalar arithmetic: one read's cost
        return self.base_frame_offset + index * self.count_min + prefix

    def offsets(self, indices=None) -> np.ndarray:
        """Offsets of ``indices`` (default: all frames); ``N`` gives the end."""
        if indices is None:
            indices = np.arange(self.frame_count, dtype=np.int64)
        indices = self._checked_indices(indices, allow_end=True)
        prefix = self._residual_prefix[indices] if self.count_bits else 0
        return self.base_frame_offset + indices * self.count_min + prefix

    @property
    def frames_end(self) -> int:
        """The file size the blob claims (``RumiImage.file_size`` is the real one)."""
        return self.offset(self.frame_count)

    def ranges(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, stops)`` byte ranges of the frames ``indices``."""
        indices = self._checked_indices(indices)
        return self.offsets(indices), self.offsets(indices + 1)  # frames lie back to back

    def frame_at(self, byte: int) -> int:
        """The frame holding file position ``byte`` (``-1`` before the first frame, ``N`` past the last)."""
        if byte < self.base_frame_offset:
            return -1
        if not self.count_bits:  # equal counts: arithmetic, never an offset per frame
            return min((byte - self.base_frame_offset) // self.count_min, self.frame_count)
        return bisect.bisect_right(range(self.frame_count + 1), byte, key=self.offset) - 1

    def _checked_index(self, index: int, allow_end: bool = False) -> int:
        index = operator.index(index)
        if not 0 <= index < self.frame_count + allow_end:
            raise IndexError(f"frame {index} is outside 0..{self.frame_count - 1}")
        return index

    def _checked_indices(self, indices, allow_end: bool = False) -> np.ndarray:
        # numpy would wrap negative indices around to the wrong frame
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.frame_count + allow_end):
            raise IndexError(f"frame indices must lie in 0..{self.frame_count - 1}")
        return indices


def max_blob_size(limits: Limits = DEFAULT_LIMITS) -> int:
    """The size of the largest blob ``limits`` admit."""
    return HEADER_SIZE + 4 * limits.max_frames


def claimed_blob_size(blob: bytes, limits: Limits = DEFAULT_LIMITS) -> int | None:
    """The size the fixed part of ``blob`` claims for the whole blob, ``None`` if those 28 bytes are unsound.

    >>> claimed_blob_size(b"not a blob") is None
    True
    """
    try:
        return Header._from_fields(bytes(blob[:HEADER_SIZE]), limits).blob_size
    except RumiFormatError:
        return None


def headers_from_bytes(blobs, limits: Limits = DEFAULT_LIMITS, *, names=None) -> list[Header]:
    """:meth:`Header.from_bytes` of many blobs, each distinct blob checked once; the first refusal names
    ``names[position]`` (default: the position).

    >>> grid = FrameGrid(600, 600, 512, 512, 1)
    >>> a, b = (Header.from_byte_counts(grid, sample_type(1, 8), c).to_bytes() for c in ([9, 5, 7, 6], [5, 6, 8, 9]))
    >>> headers = headers_from_bytes([a, b, a])
    >>> [h.byte_count(0) for h in headers], headers[0] is headers[2]
    ([9, 5, 9], True)
    """
    blobs = [blob if type(blob) is bytes else bytes(blob) for blob in blobs]
    alike: dict[bytes, list[bytes]] = {}  # distinct blobs by every field but count_min
    for blob in dict.fromkeys(blobs):
        alike.setdefault(blob[:_COUNT_MIN.start] + blob[_COUNT_MIN.stop:HEADER_SIZE], []).append(blob)
    parsed: dict[bytes, Header] = {}
    refused: dict[bytes, RumiFormatError] = {}
    for group in alike.values():
        fields, count_mins = _check_alike(group, limits) if len(group) > 1 else (None, [None])
        for blob, count_min in zip(group, count_mins):
            if count_min is not None:
                parsed[blob] = Header(fields.grid, fields.sample_type, count_min, fields.count_bits,
                                      memoryview(blob)[HEADER_SIZE:], blob)
                continue
            try:  # alike to no other, or refused by the batch check: parsed alone, for the rule it breaks
                parsed[blob] = Header.from_bytes(blob, limits)
            except RumiFormatError as error:
                refused[blob] = error
    if refused:
        position = next(i for i, blob in enumerate(blobs) if blob in refused)
        error = refused[blobs[position]]
        name = f"blob {position}" if names is None else names[position]
        raise RumiFormatError(error.rule, f"{name}: {error.detail}")
    return [parsed[blob] for blob in blobs]


_COUNT_MIN = slice(23, 27)


def _count_faults(count_min, smallest, largest, last_byte, count_bits: int, frames: int, limits: Limits) -> np.ndarray:
    """Per blob, the index of the first :func:`_count_fault` rule it breaks, ``-1`` for none."""
    unused_bits = (last_byte >> (frames * count_bits % 8)) if frames * count_bits % 8 else np.zeros_like(last_byte)
    largest_count = count_min + largest.astype(np.int64)
    faults = np.stack([
        count_min < 1,
        unused_bits != 0,
        (smallest != 0) & bool(count_bits),
        (largest < 1 << max(count_bits - 1, 0)) & bool(count_bits),
        largest_count > 0xFFFFFFFF,
        largest_count > limits.max_frame_byte_count,
    ])
    return np.where(faults.any(axis=0), faults.argmax(axis=0), -1)


def _count_fault(fault: int, count_min: int, smallest: int, largest: int, count_bits: int,
                 limits: Limits) -> RumiFormatError:
    rule, detail = [
        ("blob.byte-counts", "count_min is 0, but every frame byte count must be greater than zero"),
        ("blob.padding", "unused bits in the final byte must be zero"),
        ("blob.canonical", f"count_min {count_min} is not the smallest frame byte count "
                           f"(every residual is at least {smallest})"),
        ("blob.canonical", f"count_bits is {count_bits}, but the largest residual ({largest}) "
                           f"needs {largest.bit_length()}"),
        ("blob.byte-counts", "a frame byte count does not fit TileByteCounts (LONG)"),
        ("blob.limits", f"a frame of {count_min + largest} bytes exceeds Limits.max_frame_byte_count "
                        f"({limits.max_frame_byte_count})"),
    ][fault]
    return RumiFormatError(rule, detail)


def _check_alike(blobs: list[bytes], limits: Limits) -> tuple[Header | None, list[int | None]]:
    """The fields ``blobs`` share but ``count_min``, and the ``count_min`` of each blob that keeps every rule, else
    ``None``."""
    passed: list[int | None] = [None] * len(blobs)
    try:
        fields = Header._from_fields(blobs[0][:_COUNT_MIN.start] + b"\1\0\0\0" + blobs[0][_COUNT_MIN.stop:], limits)
    except RumiFormatError:
        return None, passed
    frames, bits = fields.frame_count, fields.count_bits
    if (frames == 1 and bits) or frames > _CHECK_BATCH:
        return fields, passed
    size = fields.blob_size
    sized = [i for i, blob in enumerate(blobs) if len(blob) == size]
    per_batch = max(1, _CHECK_BATCH // frames)
    for start in range(0, len(sized), per_batch):
        rows = sized[start:start + per_batch]
        joined = np.frombuffer(b"".join([blobs[i] for i in rows]), np.uint8).reshape(len(rows), size)
        count_min = joined[:, _COUNT_MIN].copy().view("<u4").ravel().astype(np.int64)
        smallest = largest = last_byte = np.zeros(len(rows), np.int64)
        if bits:
            residuals = unpack_rows(joined[:, HEADER_SIZE:], bits, frames)
            smallest, largest, last_byte = residuals.min(axis=1), residuals.max(axis=1), joined[:, -1]
        good = _count_faults(count_min, smallest, largest, last_byte, bits, frames, limits) < 0
        for i, value, ok in zip(rows, count_min.tolist(), good.tolist()):
            if ok:
                passed[i] = value
    return fields, passed


def pack_residuals(residuals: np.ndarray, count_bits: int) -> bytes:
    """Pack residuals LSB-first at ``count_bits`` bits each, no padding.

    >>> pack_residuals(np.array([1, 2, 3]), 2).hex()
    '39'
    """
    values = np.asarray(residuals, dtype="<u8").ravel()
    # in slices: a residual's bits take 64 bytes as numpy unpacks them
    bits = [np.unpackbits(values[start:start + _CHECK_BATCH].view(np.uint8).reshape(-1, 8), axis=1,
                          bitorder="little")[:, :count_bits].ravel() for start in range(0, values.size, _CHECK_BATCH)]
    return np.packbits(np.concatenate([np.empty(0, np.uint8), *bits]), bitorder="little").tobytes()


def unpack_residuals(packed: bytes, count_bits: int, start: int, stop: int) -> np.ndarray:
    """Residuals ``start:stop`` (uint64), reading only the bytes that hold them."""
    count = max(stop - start, 0)
    if count_bits == 0 or count == 0:
        return np.zeros(count, np.uint64)
    aligned = start - start % 8  # groups of eight residuals start on a byte
    first_byte = aligned * count_bits // 8
    end_byte = -(-(stop * count_bits) // 8)
    window = np.frombuffer(packed, np.uint8, count=end_byte - first_byte, offset=first_byte)
    return unpack_rows(window[np.newaxis], count_bits, stop - aligned)[0, start - aligned:].astype(np.uint64)


def unpack_rows(packed: np.ndarray, count_bits: int, count: int) -> np.ndarray:
    """The first ``count`` residuals (uint32) of each row of ``packed`` (uint8, one blob's residuals a row)."""
    rows, size = packed.shape
    groups = -(-count // 8)
    grouped = np.zeros((rows, groups * count_bits), np.uint8)
    used = min(size, groups * count_bits)
    grouped[:, :used] = packed[:, :used]
    grouped = grouped.reshape(rows, groups, count_bits)
    out = np.empty((rows, groups, 8), np.uint32)
    for j in range(8):
        first, shift = divmod(j * count_bits, 8)
        width = -(-(shift + count_bits) // 8)
        word_type = np.uint32 if shift + count_bits <= 32 else np.uint64
        word = grouped[:, :, first].astype(word_type)
        for b in range(1, width):
            word |= grouped[:, :, first + b].astype(word_type) << word_type(8 * b)
        out[:, :, j] = (word >> word_type(shift)) & word_type((1 << count_bits) - 1)
    return out.reshape(rows, groups * 8)[:, :count]
