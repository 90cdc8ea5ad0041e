"""Bad input: only RumiFormatError (or OSError), no hang, no memory out of proportion.

Hypothesis mutates valid blobs, file prefixes and whole files.  Whatever the
parsers accept must also be canonical: it re-encodes to the same bytes.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xarray_rumi
from _rumi_bytes import make, ramp
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.geo import Georeferencing
from xarray_rumi.format.grid import FrameGrid, FrameUnit
from xarray_rumi.format.ifd import build_prefix, check_frame_layout, parse_prefix, prefix_size
from xarray_rumi.frames.codec import decode_frame, encode_frame

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])


def _blobs() -> list[bytes]:
    rng = np.random.default_rng(0)
    u8, c16 = sample_type_from_name("uint8"), sample_type_from_name("cint16")
    out = []
    for grid, sample in ((FrameGrid(600, 600, 512, 512, 1), u8), (FrameGrid(50, 40, 16, 8, 3), u8),
                         (FrameGrid(97, 13, 7, 5, 2, FrameUnit.CELL), c16), (FrameGrid(1, 1, 1, 1, 1), u8)):
        counts = rng.integers(1, 3000, grid.frame_count)
        out.append(Header.from_byte_counts(grid, sample, counts).to_bytes())
    out.append(Header.from_byte_counts(FrameGrid(9, 9, 3, 3, 1), u8, [44] * 9).to_bytes())
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


@FUZZ
@given(mutated(BLOBS))
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
    assert header.to_bytes() == blob
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


@FUZZ
@given(mutated(BLOBS[1:3]))
def test_open_with_mutated_blob(tmp_path, blob):
    path = tmp_path / "none.rumi"
    path.write_bytes(b"")
    try:
        xarray_rumi.open_image(path, blob, read_georef=False)
    except RumiFormatError:
        pass


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
    path.write_bytes(data.draw(mutated([original])))
    try:
        image = xarray_rumi.open_image(path, blob)
        values = image.read()
    except (RumiFormatError, OSError):
        return
    assert values.shape == image.grid.shape
