"""The BigTIFF preamble and the single fixed IFD, written and parsed strictly."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import RumiFormatError
from .container import refuse_later_file
from .dtypes import SampleType, sample_type
from .geo import Georeferencing
from .grid import FrameGrid, FrameUnit
from .limits import DEFAULT_LIMITS, Limits
from .placement import (BITS_PER_SAMPLE, FIXED_TAGS, GEO_KEY_DIRECTORY, IFD_HEAD_SIZE, IFD_OFFSET, IMAGE_LENGTH,
                        IMAGE_WIDTH, MODEL_TRANSFORMATION, PREAMBLE_SIZE, SAMPLES_PER_PIXEL, SAMPLE_FORMAT, TAG_COUNT,
                        TILE_BYTE_COUNTS, TILE_LENGTH, TILE_OFFSETS, TILE_WIDTH, TYPE_CODES, TYPE_SIZES,
                        base_frame_offset, expected_counts, external_sizes)

TAG_NAMES = {tag: name for tag, name, _, _ in FIXED_TAGS}
TAG_TYPES = {tag: type_code for tag, _, type_code, _ in FIXED_TAGS}
FIELD_MAXIMA = {tag: 2 ** (8 * TYPE_SIZES[type_code]) - 1 for tag, _, type_code, _ in FIXED_TAGS}
# Tags that explain a rejection better than "not in the fixed IFD".
_FORBIDDEN = {
    **dict.fromkeys((273, 278, 279), "file-profile.tiled"),  # strips
    **dict.fromkeys((254, 330, 338), "file-profile.single-image"),  # NewSubfileType, SubIFDs, ExtraSamples
    **dict.fromkeys((33550, 33922, 34736, 34737), "georeferencing.tags"),  # GeoTIFF's other tags
}


def build_prefix(grid: FrameGrid, sample: SampleType, georef: Georeferencing, byte_counts) -> bytes:
    """Everything before the first frame: BigTIFF preamble, IFD and external values (see :func:`parse_prefix`)."""
    counts = np.asarray(byte_counts, dtype=np.int64)
    n, b = grid.frame_count, grid.samples_per_pixel
    if counts.shape != (n,) or counts.min() < 1 or counts.max() > 0xFFFFFFFF:
        raise ValueError(f"need {n} byte counts between 1 and 2**32 - 1")
    base = base_frame_offset(grid)
    numbers = {
        IMAGE_WIDTH: grid.image_width, IMAGE_LENGTH: grid.image_length,
        BITS_PER_SAMPLE: [sample.bits_per_sample] * b, SAMPLES_PER_PIXEL: b,
        TILE_WIDTH: grid.tile_width, TILE_LENGTH: grid.tile_length,
        TILE_OFFSETS: base + np.concatenate([[0], np.cumsum(counts[:-1])]), TILE_BYTE_COUNTS: counts,
        SAMPLE_FORMAT: [sample.sample_format] * b,
    }
    values = {tag: np.asarray(value).astype(TYPE_CODES[TAG_TYPES[tag]]).tobytes() for tag, value in numbers.items()}
    values.update({MODEL_TRANSFORMATION: georef.model_transformation(), GEO_KEY_DIRECTORY: georef.geo_keys()})
    entries, external = [], []
    cursor = IFD_HEAD_SIZE
    for (tag, _, type_code, _), count in zip(FIXED_TAGS, expected_counts(b, n).values()):
        value = values[tag]
        if len(value) <= 8:
            field = value.ljust(8, b"\0")
        else:
            field = struct.pack("<Q", cursor)
            external.append(value)
            cursor += len(value)
        entries.append(struct.pack("<HHQ", tag, type_code, count) + field)
    preamble = b"II" + struct.pack("<HHHQ", 43, 8, 0, IFD_OFFSET)
    prefix = preamble + struct.pack("<Q", TAG_COUNT) + b"".join(entries) + struct.pack("<Q", 0) + b"".join(external)
    if len(prefix) != base:  # a bug, never bad input: frames written after it would be located wrong
        raise RuntimeError(f"internal error: the IFD writer made {len(prefix)} bytes before the frames, "
                           f"placement.base_frame_offset says {base}")
    return prefix


@dataclass(frozen=True)
class ParsedIFD:
    """What the fixed IFD says, every structural check passed."""

    grid: FrameGrid
    sample_type: SampleType
    georeferencing: Georeferencing
    tile_offsets: np.ndarray
    tile_byte_counts: np.ndarray


def prefix_size(head: bytes, limits: Limits = DEFAULT_LIMITS) -> int:
    """How many bytes of the file :func:`parse_prefix` needs, from its first 252."""
    entries = _entries(head)
    if [(tag, type_code) for tag, type_code, _, _ in entries] != [(tag, t) for tag, _, t, _ in FIXED_TAGS]:
        return IFD_HEAD_SIZE
    by_tag = {tag: (count, field) for tag, _, count, field in entries}
    frames = by_tag[TILE_OFFSETS][0]
    if frames > limits.max_frames:
        raise RumiFormatError(
            "fixed-ifd.limits", f"TileOffsets claims {frames} frames, above Limits.max_frames ({limits.max_frames})")
    bands, = struct.unpack_from("<H", by_tag[SAMPLES_PER_PIXEL][1])
    return IFD_HEAD_SIZE + sum(external_sizes(bands, frames).values())


def parse_prefix(data: bytes, limits: Limits = DEFAULT_LIMITS) -> ParsedIFD:
    """Parse and check the BigTIFF preamble, the IFD and its external values (``RumiFormatError`` names the rule).

    >>> grid = FrameGrid(40, 30, 16, 16, 2, FrameUnit.CELL)
    >>> parsed = parse_prefix(build_prefix(grid, sample_type(2, 16), Georeferencing(), [9] * 6))
    >>> parsed.grid == grid, parsed.tile_offsets[:3].tolist()
    (True, [484, 493, 502])
    """
    by_tag = _tag_table(_entries(data))

    def inline_scalar(tag: int) -> int:
        count, field = by_tag[tag]
        if count != 1:
            raise RumiFormatError("fixed-ifd.counts", f"{TAG_NAMES[tag]} must have count 1, got {count}")
        return int(np.frombuffer(field, TYPE_CODES[TAG_TYPES[tag]], count=1)[0])

    width, length, spp = inline_scalar(IMAGE_WIDTH), inline_scalar(IMAGE_LENGTH), inline_scalar(SAMPLES_PER_PIXEL)
    tile_width, tile_length = inline_scalar(TILE_WIDTH), inline_scalar(TILE_LENGTH)
    offsets_count = by_tag[TILE_OFFSETS][0]
    # Cell frames are the fewer: a grid that fails the frame limit as cells fails it either way.
    provisional = FrameGrid(width, length, tile_width, tile_length, spp, FrameUnit.CELL).check(limits, rule="fixed-ifd")
    positions = provisional.positions
    # One band: both units agree; tile frames, as every single-band blob records.
    if offsets_count == positions * spp:
        unit = FrameUnit.TILE
    elif offsets_count == positions:
        unit = FrameUnit.CELL
    else:
        raise RumiFormatError(
            "frame-unit.count",
            f"TileOffsets has {offsets_count} entries; a {provisional.tiles_across} x {provisional.tiles_down} grid "
            f"with {spp} bands needs {positions} (cell) or {positions * spp} (tile)",
        )
    grid = FrameGrid(width, length, tile_width, tile_length, spp, unit).check(limits, rule="fixed-ifd")
    for tag, expected in expected_counts(spp, grid.frame_count).items():
        if by_tag[tag][0] != expected:
            raise RumiFormatError("fixed-ifd.counts",
                                  f"{TAG_NAMES[tag]} must have count {expected}, got {by_tag[tag][0]}")
    values = _values(data, by_tag)
    bits = np.frombuffer(values[BITS_PER_SAMPLE], "<u2")
    formats = np.frombuffer(values[SAMPLE_FORMAT], "<u2")
    if len(set(bits.tolist())) != 1 or len(set(formats.tolist())) != 1:
        raise RumiFormatError("sample-encoding.bands", "all bands must use the same (sample_format, bits_per_sample) pair")
    sample = sample_type(int(formats[0]), int(bits[0]))
    grid.check(limits, rule="fixed-ifd", bytes_per_sample=sample.bytes_per_sample)
    georef = Georeferencing.from_tags(values[MODEL_TRANSFORMATION], values[GEO_KEY_DIRECTORY])
    tile_offsets = np.frombuffer(values[TILE_OFFSETS], "<u8").astype(np.int64)
    tile_byte_counts = np.frombuffer(values[TILE_BYTE_COUNTS], "<u4").astype(np.int64)
    return ParsedIFD(grid, sample, georef, tile_offsets, tile_byte_counts)


def parse_head(head: bytes) -> dict[int, tuple[int, tuple | None]]:
    """``{tag: (count, values if inline else None)}`` from a file's first 252 bytes.

    >>> grid = FrameGrid(40, 30, 16, 16, 2)
    >>> head = parse_head(build_prefix(grid, sample_type(2, 16), Georeferencing(), [9] * 12)[:252])
    >>> head[IMAGE_WIDTH], head[SAMPLE_FORMAT], head[TILE_OFFSETS]
    ((1, (40,)), (2, (2, 2)), (12, None))
    """
    stated = {}
    for tag, (count, field) in _tag_table(_entries(head)).items():
        type_code = TAG_TYPES[tag]
        inline = TYPE_SIZES[type_code] * count <= 8
        stated[tag] = (count, tuple(np.frombuffer(field, TYPE_CODES[type_code], count=count).tolist()) if inline else None)
    return stated


def _check_preamble(data: bytes) -> None:
    _check_file_kind(bytes(data[:PREAMBLE_SIZE]))
    if len(data) < IFD_HEAD_SIZE:
        raise RumiFormatError("file-profile.truncated",
                              f"a rumi file is at least {IFD_HEAD_SIZE} bytes before its frames, got {len(data)}")
    magic, offset_size, reserved, first_ifd = struct.unpack_from("<HHHQ", data, 2)
    if magic != 43 or offset_size != 8 or reserved != 0:
        raise RumiFormatError("file-profile.bigtiff",
                              f"not a BigTIFF header (version {magic}, offset size {offset_size}, reserved {reserved})")
    if first_ifd != IFD_OFFSET:
        raise RumiFormatError("placement.ifd", f"the IFD must start at byte 16, immediately after the header; it is at {first_ifd}")
    count, = struct.unpack_from("<Q", data, IFD_OFFSET)
    if count != TAG_COUNT:
        raise RumiFormatError("fixed-ifd.tags", f"the IFD must hold exactly {TAG_COUNT} tags, it holds {count}")
    next_ifd, = struct.unpack_from("<Q", data, IFD_OFFSET + 8 + 20 * TAG_COUNT)
    if next_ifd != 0:
        raise RumiFormatError("file-profile.single-ifd", f"the file must have exactly one IFD; next IFD offset is {next_ifd}")


def _check_file_kind(head: bytes) -> None:
    """Refuse a file that is not little-endian BigTIFF, saying what it is instead."""
    refuse_later_file(head)
    if not head:
        raise RumiFormatError("file-profile.truncated", "not a rumi file: the file is empty")
    if not (b"II".startswith(head[:2]) or b"MM".startswith(head[:2])):
        raise RumiFormatError("file-profile.little-endian",
                              f"not a rumi file: it does not begin with a TIFF header (II, got {head[:2]!r})")
    if head[:2] == b"MM":
        version = struct.unpack_from(">H", head, 2)[0] if len(head) >= 4 else None
        kind = {42: "classic TIFF", 43: "BigTIFF"}.get(version, "TIFF")
        raise RumiFormatError("file-profile.little-endian", f"not a rumi file: a big-endian {kind} (it begins with "
                              "MM); rumi files are little-endian BigTIFF (II, version 43): rumi convert makes one "
                              "from it")
    if len(head) >= 4 and struct.unpack_from("<H", head, 2)[0] == 42:
        raise RumiFormatError("file-profile.bigtiff", "not a rumi file: a classic TIFF (version 42, 32-bit offsets); "
                              "rumi files are BigTIFF (version 43): rumi convert makes one from it")
    if len(head) < PREAMBLE_SIZE:
        plural = "s" if len(head) > 1 else ""
        raise RumiFormatError("file-profile.truncated", f"not a rumi file: {len(head)} byte{plural}, shorter "
                              f"than the {PREAMBLE_SIZE}-byte BigTIFF header every rumi file begins with")


def _entries(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """The IFD's ``(tag, type, count, value field)`` entries, once the preamble around them is checked."""
    _check_preamble(data)
    at = [IFD_OFFSET + 8 + 20 * i for i in range(TAG_COUNT)]
    return [(*struct.unpack_from("<HHQ", data, i), bytes(data[i + 12: i + 20])) for i in at]


def _tag_table(entries: list[tuple[int, int, int, bytes]]) -> dict[int, tuple[int, bytes]]:
    """``{tag: (count, value field)}``, once the entries are exactly the fixed tags with their types."""
    tags = [e[0] for e in entries]
    for tag in tags:
        if tag not in TAG_NAMES:
            raise RumiFormatError(_FORBIDDEN.get(tag, "fixed-ifd.tags"),
                                  f"the IFD holds tag {tag}, which the fixed IFD does not allow")
    if len(set(tags)) != len(tags) or sorted(tags) != tags:
        raise RumiFormatError("fixed-ifd.order", f"tags must appear once each in rising order, got {tags}")
    if len(tags) != TAG_COUNT:
        missing = sorted(set(TAG_NAMES) - set(tags))
        raise RumiFormatError("fixed-ifd.tags", f"the IFD lacks {[TAG_NAMES[t] for t in missing]}")
    for tag, type_code, _, _ in entries:
        if type_code != TAG_TYPES[tag]:
            raise RumiFormatError("fixed-ifd.types",
                                  f"{TAG_NAMES[tag]} must have type {TAG_TYPES[tag]}, got {type_code}")
    return {tag: (count, field) for tag, _, count, field in entries}


def _values(data: bytes, by_tag: dict) -> dict[int, bytes]:
    """Each tag's value bytes, external placement checked."""
    cursor = IFD_HEAD_SIZE
    values = {}
    for tag, name, type_code, _ in FIXED_TAGS:
        count, field = by_tag[tag]
        size = TYPE_SIZES[type_code] * count
        if size <= 8:
            if field[size:] != b"\0" * (8 - size):
                raise RumiFormatError("placement.inline", f"{name}: the unused bytes of an inline value must be zero")
            values[tag] = field[:size]
            continue
        offset, = struct.unpack("<Q", field)
        if offset != cursor:
            raise RumiFormatError("placement.external", f"{name} must be stored at byte {cursor}, "
                                  f"immediately after the previous value, but is at {offset}")
        if len(data) < cursor + size:
            raise RumiFormatError("file-profile.truncated", f"the file ends inside the {name} values")
        values[tag] = bytes(data[cursor: cursor + size])
        cursor += size
    return values


def check_frame_layout(parsed: ParsedIFD, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse TileOffsets and TileByteCounts that break the spec's frame layout (``frames.*``, ``placement.*``)."""
    offsets, counts = parsed.tile_offsets, parsed.tile_byte_counts
    if counts.size and counts.min() < 1:
        first = int(np.argmin(counts))
        raise RumiFormatError("frames.sparse", f"frame {first} has TileByteCounts 0; no frame may be sparse")
    if counts.size and counts.max() > limits.max_frame_byte_count:
        raise RumiFormatError("frames.limits",
                              f"a frame of {int(counts.max())} bytes exceeds Limits.max_frame_byte_count")
    base = base_frame_offset(parsed.grid)
    expected = base + np.concatenate([[0], np.cumsum(counts[:-1])])
    mismatch = np.flatnonzero(offsets != expected)
    if not mismatch.size:
        return
    k = int(mismatch[0])
    # Sorted only to say why: frames all there, back to back, but not in frame-index order.
    order = np.argsort(offsets, kind="stable")
    by_position = offsets[order]
    if by_position[0] == base and np.array_equal(by_position[1:], (by_position + counts[order])[:-1]):
        raise RumiFormatError("frames.order", f"frames are not in frame-index order (frame {k} is at byte "
                              f"{int(offsets[k])}, expected {int(expected[k])}); a band-interleaved layout is rejected")
    if k == 0:
        raise RumiFormatError("placement.frame-data", f"frame data must start at byte {base}, immediately after the "
                              f"external values; TileOffsets[0] is {int(offsets[0])}")
    raise RumiFormatError("frames.contiguous", f"frame {k} must start at byte {int(expected[k])}, right after frame "
                          f"{k - 1}; it starts at {int(offsets[k])}")
