"""Bad input: only RumiFormatError (or OSError), no hang, no memory out of proportion.

Hypothesis mutates valid blobs, file prefixes and whole files.  Whatever the
parsers accept must also be canonical: the blob a writer makes from the
accepted byte counts is the blob given, byte for byte.
"""

from __future__ import annotations

import pathlib
import struct
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest
from _rumi_bytes import make, ramp
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import xarray_rumi
from xarray_rumi import Limits, RumiFormatError
from xarray_rumi.format.blob import Header, pack_residuals
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.geo import Georeferencing
from xarray_rumi.format.grid import FrameGrid, FrameUnit
from xarray_rumi.format.ifd import build_prefix, check_frame_layout, parse_prefix, prefix_size
from xarray_rumi.frames.codec import decode_frame, encode_frame

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])
WIDE = Limits(max_frame_byte_count=2**32 - 1)  # any count a LONG holds
BLOB_FUZZ = settings(FUZZ, max_examples=400)  # a few milliseconds an example; the deep rules need more of them


def _blobs() -> list[bytes]:
    rng = np.random.default_rng(0)
    u8, c16 = sample_type_from_name("uint8"), sample_type_from_name("cint16")
    out = []
    for grid, sample in ((FrameGrid(600, 600, 512, 512, 1), u8), (FrameGrid(50, 40, 16, 8, 3), u8),
                         (FrameGrid(97, 13, 7, 5, 2, FrameUnit.CELL), c16), (FrameGrid(1, 1, 1, 1, 1), u8)):
        counts = rng.integers(1, 3000, grid.frame_count)
        out.append(Header.from_byte_counts(grid, sample, counts).to_bytes())
    out.append(Header.from_byte_counts(FrameGrid(9, 9, 3, 3, 1), u8, [44] * 9).to_bytes())
    # 7 frames at 5 bits: 35 bits, so the last byte has 5 unused bits that must stay zero.
    out.append(Header.from_byte_counts(FrameGrid(7, 1, 1, 1, 1), u8, [40, 33, 61, 35, 33, 50, 47]).to_bytes())
    return out


BLOBS = _blobs()


def _prefixes() -> list[bytes]:
    out = []
    for grid, sample, georef in (
        (FrameGrid(50, 40, 16, 16, 3), sample_type_from_name("uint16"), Georeferencing()),
        (FrameGrid(20, 20, 16, 16, 6, FrameUnit.CELL), sample_type_from_name("float32"),
         Georeferencing(32618, 1, 1, (30, 0, 5e5, 0, -30, 4e6))),
        (FrameGrid(1, 1, 1, 1, 1), sample_type_from_name("bool"), Georeferencing(4326, 2, 2, (1, 0, 0, 0, -1, 0))),
        (FrameGrid(3, 1, 1, 1, 1), sample_type_from_name("int8"), Georeferencing()),
    ):
        out.append(build_prefix(grid, sample, georef, np.arange(grid.frame_count) + 5))
    return out


PREFIXES = _prefixes()


@st.composite
def mutated(draw, sources: list[bytes]):
    """A source with a few bytes overwritten, a field set to an extreme, truncated or extended."""
    data = bytearray(draw(st.sampled_from(sources)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["byte", "byte", "word", "truncate", "extend"]))
        if kind == "byte" and data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "word" and len(data) >= 4:
            at = draw(st.integers(0, len(data) - 4))
            data[at: at + 4] = draw(st.sampled_from([0, 1, 2**31, 2**32 - 1, 16, 28])).to_bytes(4, "little")
        elif kind == "truncate":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "extend":
            data += draw(st.binary(max_size=40))
    return bytes(data)


def canonical_blob(header: Header) -> bytes:
    """The blob a writer makes for ``header``'s grid, sample type and byte counts.

    The spec makes the encoding canonical (the true minimum, the minimum width,
    zero padding); the writer also records a single-band grid as tile frames,
    which the spec lets a blob state either way, so the frame-unit byte of a
    single-band blob is compared as the writer's.
    """
    return Header.from_byte_counts(header.grid, header.sample_type, header.byte_counts()).to_bytes()


def as_the_writer_states_it(blob: bytes, header: Header) -> bytes:
    if header.grid.samples_per_pixel == 1:
        return blob[:22] + bytes([0]) + blob[23:]  # frame_unit: either reading of one band is the same file
    return blob


#: The blob's fields after magic and version: (offset, size), from the spec's table.
BLOB_FIELDS = [(6, 4), (10, 4), (14, 2), (16, 2), (18, 2), (20, 1), (21, 1), (22, 1), (23, 4), (27, 1)]


def claimed_size(blob: bytes) -> int | None:
    """The size the fields of ``blob`` claim (28 + ceil(N * count_bits / 8)), or None when it is no use to fit."""
    if len(blob) < 28:
        return None
    width, length, tile_width, tile_length, bands = struct.unpack_from("<IIHHH", blob, 6)
    unit, count_bits = blob[22], blob[27]
    if not (tile_width and tile_length and bands) or unit > 1 or count_bits > 32:
        return None
    frames = -(-width // tile_width) * -(-length // tile_length) * (bands if unit == 0 else 1)
    packed = -(-frames * count_bits // 8)
    return 28 + packed if packed <= 1 << 14 else None


@st.composite
def respelled(draw, blob: bytes):
    """The same byte counts spelled as the spec forbids: a wider count_bits, a smaller count_min, or padding.

    Each of these blobs is well-formed in every other way, so only the canonical-encoding rules refuse it.
    ``blob`` is returned as it is when it does not parse.
    """
    try:
        header = Header.from_bytes(blob, WIDE)
    except RumiFormatError:
        return blob
    residuals, count_min, count_bits = header.residuals(), header.count_min, header.count_bits
    how = draw(st.sampled_from(["wider", "lower-minimum", "padding"]))
    if how == "wider" and count_bits < 32:
        count_bits = draw(st.integers(count_bits + 1, min(32, count_bits + 3)))
    elif how == "lower-minimum" and count_min > 1:
        shift = draw(st.integers(1, count_min - 1))
        count_min, residuals = count_min - shift, residuals + np.uint64(shift)
        count_bits = int(residuals.max()).bit_length()
    packed = bytearray(pack_residuals(residuals, count_bits))
    used = header.frame_count * count_bits % 8
    if how == "padding" and used:
        packed[-1] |= 1 << draw(st.integers(used, 7))
    return blob[:23] + struct.pack("<IB", count_min, count_bits) + bytes(packed)


@st.composite
def mutated_blobs(draw):
    """A valid blob edited with its layout in mind, so that mutants get past ``blob.size`` to the rules behind it.

    Besides :func:`mutated`'s edits: a field set near its value or to an extreme, one bit flipped (often in
    the last byte, where the padding bits are), the packed region resized to exactly what the fields claim,
    and the counts spelled non-canonically (:func:`respelled`).
    """
    data = bytearray(draw(st.sampled_from(BLOBS)))
    edits = draw(st.lists(st.sampled_from(["field", "field", "bit", "fit", "respell", "generic"]),
                          min_size=1, max_size=4))
    for kind in edits + ["fit"] * draw(st.booleans()):
        if kind == "respell":
            data = bytearray(draw(respelled(bytes(data))))
        elif kind == "field" and len(data) >= 28:
            at, size = draw(st.sampled_from(BLOB_FIELDS))
            value = int.from_bytes(data[at: at + size], "little")
            top = (1 << 8 * size) - 1
            value = draw(st.sampled_from([value - 1, value + 1, value + 2, 2 * value, value // 2, 0, 1, top]))
            data[at: at + size] = (value & top).to_bytes(size, "little")
        elif kind == "bit" and data:
            at = draw(st.one_of(st.integers(0, len(data) - 1), st.just(len(data) - 1)))
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "fit" and (size := claimed_size(bytes(data))) is not None:
            if size < len(data):
                del data[size:]
            else:  # zeros or a repeated pattern: a large draw of random bytes would exhaust Hypothesis's buffer
                pattern = draw(st.sampled_from([b"\0", b"\xff"]) | st.binary(min_size=1, max_size=8))
                data += (pattern * (size - len(data)))[: size - len(data)]
        elif kind == "generic":
            data = bytearray(draw(mutated([bytes(data)])))
    return bytes(data)


@BLOB_FUZZ
@given(mutated_blobs())
def test_blob_parser_accepts_only_canonical_blobs(blob):
    tracemalloc.start()
    try:
        header = Header.from_bytes(blob)
    except RumiFormatError:
        return
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 64 * len(blob) + (1 << 20)
    assert canonical_blob(header) == as_the_writer_states_it(blob, header)
    counts = header.byte_counts()
    assert counts.min() >= 1 and counts.max() <= 2**32 - 1
    assert header.offset(header.frame_count) == header.base_frame_offset + int(counts.sum())


@FUZZ
@given(mutated(PREFIXES))
def test_prefix_parser_raises_only_rumi_errors(prefix):
    try:
        needed = prefix_size(prefix)
        parsed = parse_prefix(prefix)
        check_frame_layout(parsed)
    except RumiFormatError:
        return
    assert needed <= len(prefix)
    rebuilt = build_prefix(parsed.grid, parsed.sample_type, parsed.georeferencing, parsed.tile_byte_counts)
    again = parse_prefix(rebuilt)
    assert (again.grid, again.sample_type, again.georeferencing) == (
        parsed.grid, parsed.sample_type, parsed.georeferencing)
    assert np.array_equal(again.tile_offsets, parsed.tile_offsets)


@pytest.fixture(scope="module")
def small_files(tmp_path_factory) -> list[bytes]:
    tmp = tmp_path_factory.mktemp("fuzz")
    return [
        make(tmp, ramp((2, 20, 24)), "a.rumi", tile_size=16)[2],
        make(tmp, ramp((3, 9, 9), "float32"), "b.rumi", tile_size=8, frame_unit="cell")[2],
        make(tmp, np.array([[[1, 0], [0, 1]]], bool), "c.rumi", tile_size=1)[2],
    ]


@FUZZ
@given(data=st.data())
def test_validate_on_mutated_files(tmp_path, small_files, data):
    broken = data.draw(mutated(small_files))
    path = tmp_path / "m.rumi"
    path.write_bytes(broken)
    try:
        xarray_rumi.validate(path)
    except (RumiFormatError, OSError):
        return
    # Accepted: then it is a readable rumi file (a mutation inside a checksum-free region can be benign).
    image = xarray_rumi.open_image(path)
    assert image.read().shape == image.grid.shape
    assert xarray_rumi.header_from_file(path) == image.header.to_bytes()


def open_through_the_blob_alone(path, blob):
    """Open with a blob and no georeferencing: the one way to open that reads nothing at all."""
    return xarray_rumi.open_image(path, header=blob, georeferencing=False)


@BLOB_FUZZ
@example(BLOBS[0])  # unmutated blobs: the accepting branch runs on every run, not only when Hypothesis finds it
@example(BLOBS[2])
@example(BLOBS[4])
@given(mutated_blobs())
def test_open_with_mutated_blob(tmp_path, blob):
    """Opening through a damaged blob refuses it as the blob parser does, or opens exactly the blob given."""
    path = tmp_path / "empty.rumi"
    path.write_bytes(b"")  # any read would raise OSError, which fails this test: the open must read nothing
    try:
        parsed, parser_rule = Header.from_bytes(blob), None
    except RumiFormatError as exc:
        parsed, parser_rule = None, exc.rule
    try:
        image = open_through_the_blob_alone(path, blob)
    except RumiFormatError as exc:  # any other exception type fails the test
        event(f"refused: {exc.rule}")
        assert exc.rule.startswith("blob.") and exc.rule == parser_rule
        return
    event("opened")
    assert parser_rule is None, f"the opener accepted a blob the parser refuses ({parser_rule})"
    header = image.header
    assert header == parsed
    assert canonical_blob(header) == as_the_writer_states_it(blob, header)
    assert Header.from_bytes(header.to_bytes()) == header
    assert not image.georeferencing.is_defined
    counts, offsets = header.byte_counts(), header.offsets()
    assert counts.size == header.grid.frame_count and counts.min() >= 1
    assert offsets[0] == header.base_frame_offset
    assert np.array_equal(np.diff(offsets), counts[:-1])
    assert header.frames_end == offsets[-1] + counts[-1]


def test_decode_refuses_a_bomb_without_expanding_it(tmp_path):
    """A frame of 256 MiB of zeros, passed with a 16 x 16 shape, is refused in bounded memory."""
    bomb = encode_frame(np.zeros((1, 16384, 16384), np.uint8), "id>zstd")
    assert len(bomb) < 64 * 1024
    frame_path = tmp_path / "bomb.ozl"
    frame_path.write_bytes(bomb)
    script = textwrap.dedent(f"""
        import pathlib, resource, sys
        from xarray_rumi import RumiFormatError
        from xarray_rumi.format.dtypes import sample_type_from_name
        from xarray_rumi.frames.codec import decode_frame
        frame = pathlib.Path({str(frame_path)!r}).read_bytes()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if sys.argv[1] == "bomb":
            try:
                decode_frame(frame, sample_type_from_name("uint8"), (1, 16, 16))
            except RumiFormatError as exc:
                print(exc.rule)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    out = subprocess.run([sys.executable, "-c", script, "bomb"], capture_output=True, text=True, check=True,
                         timeout=60).stdout.split()
    assert out[0] == "frame.decode"
    assert int(out[1]) < 16 * 1024  # KiB: far below the 256 MiB the frame expands to
    # The same frame with the shape it really has decodes (so the refusal above is the bound, not damage).
    assert decode_frame(encode_frame(np.zeros((1, 64, 64), np.uint8), "id>zstd"),
                        sample_type_from_name("uint8"), (1, 64, 64)).shape == (1, 64, 64)


def test_a_huge_claim_in_the_ifd_is_refused_before_reading(tmp_path):
    data = bytearray(make(tmp_path, ramp((1, 32, 32)), tile_size=16)[2])
    # TileOffsets and TileByteCounts claiming 2**40 frames: refused from the first 252 bytes.
    for index in (6, 7):
        data[24 + 20 * index + 4: 24 + 20 * index + 12] = (2**40).to_bytes(8, "little")
    path = pathlib.Path(tmp_path / "claim.rumi")
    path.write_bytes(bytes(data))
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.validate(path)
    assert info.value.rule == "fixed-ifd.limits"


@FUZZ
@given(data=st.data())
def test_reading_a_mutated_file_through_its_blob(tmp_path, small_files, data):
    index = data.draw(st.integers(0, len(small_files) - 1))
    original = small_files[index]
    path = tmp_path / "r.rumi"
    path.write_bytes(original)
    blob = xarray_rumi.header_from_file(path)
    expected = xarray_rumi.open_image(path, blob).read()
    path.write_bytes(data.draw(mutated([original])))
    try:
        values = xarray_rumi.open_image(path, blob).read()
    except (RumiFormatError, OSError):
        return
    # The blob locates the frames and every frame is checksummed: damage is refused or was not in what is read.
    np.testing.assert_array_equal(values, expected)
    assert values.dtype == expected.dtype
