"""The header blob: exact bytes, canonical encoding, every rejection, O(1) access."""

from __future__ import annotations

import struct
import tracemalloc

import numpy as np
import pytest
from steps import python_steps, steps_and_peak

from xarray_rumi import Limits, RumiFormatError
from xarray_rumi.format.blob import Header, pack_residuals, unpack_residuals
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameGrid, FrameUnit

FIELDS = struct.Struct("<IHIIHHHBBBIB")
UINT8 = sample_type_from_name("uint8")
WIDE = Limits(max_frame_byte_count=2**32 - 1)  # lets count_bits reach 32 in these tests


def fields(width=600, length=600, tile_width=512, tile_length=512, bands=1, bits=8, fmt=1, unit=0,
           count_min=100, count_bits=0, magic=0x45564F4C, version=1) -> bytes:
    return FIELDS.pack(magic, version, width, length, tile_width, tile_length, bands, bits, fmt, unit,
                       count_min, count_bits)


def pack_by_hand(residuals, bits) -> bytes:
    """The spec's packing with Python integers: LSB first, no padding."""
    value = sum(r << (i * bits) for i, r in enumerate(residuals))
    return value.to_bytes(-(-len(residuals) * bits // 8), "little")


def rule_of(blob: bytes, limits: Limits = Limits()) -> str:
    with pytest.raises(RumiFormatError) as info:
        Header.from_bytes(blob, limits)
    return info.value.rule


def peak_of(run) -> int:
    """The peak of memory ``run()`` allocates, in bytes."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- exact bytes ------------------------------------------------------------------------------------

def test_four_frames_hand_computed():
    grid = FrameGrid(600, 600, 512, 512, 1)
    header = Header.from_byte_counts(grid, UINT8, [900, 300, 310, 100])
    # count_min 100; residuals 800, 200, 210, 0; bit_length(800) = 10; 40 bits = 5 bytes.
    expected = fields(count_min=100, count_bits=10) + pack_by_hand([800, 200, 210, 0], 10)
    assert header.to_bytes() == expected
    assert expected[:4] == bytes.fromhex("4C4F5645")
    assert len(expected) == 28 + 5


def test_field_offsets_match_the_spec_table():
    blob = Header.from_byte_counts(FrameGrid(70000, 3, 300, 2, 7, FrameUnit.CELL),
                                   sample_type_from_name("bfloat16"), [5] * 468).to_bytes()
    assert struct.unpack_from("<I", blob, 0)[0] == 0x45564F4C
    assert struct.unpack_from("<H", blob, 4)[0] == 1
    assert struct.unpack_from("<I", blob, 6)[0] == 70000
    assert struct.unpack_from("<I", blob, 10)[0] == 3
    assert struct.unpack_from("<HHH", blob, 14) == (300, 2, 7)
    assert blob[20:23] == bytes([16, 102, 1])
    assert struct.unpack_from("<I", blob, 23)[0] == 5
    assert blob[27] == 0 and len(blob) == 28


def test_three_frames_leave_unused_bits_zero():
    grid = FrameGrid(3, 1, 1, 1, 1)
    blob = Header.from_byte_counts(grid, UINT8, [12, 10, 15]).to_bytes()
    # residuals 2, 0, 5 at 3 bits: 0b101_000_010 in 9 bits -> 2 bytes, 7 unused bits zero.
    assert blob[23:28] == struct.pack("<IB", 10, 3)
    assert blob[28:] == bytes([0b01_000_010, 0b1])


def test_equal_counts_and_single_frame_need_no_packed_bytes():
    assert len(Header.from_byte_counts(FrameGrid(9, 9, 3, 3, 2), UINT8, [44] * 18).to_bytes()) == 28
    single = Header.from_byte_counts(FrameGrid(5, 5, 8, 8, 3, FrameUnit.CELL), UINT8, [123])
    assert single.count_bits == 0 and single.to_bytes() == fields(5, 5, 8, 8, 3, unit=1, count_min=123)


def test_count_bits_32():
    grid = FrameGrid(2, 1, 1, 1, 1)
    header = Header.from_byte_counts(grid, UINT8, [1, 2**32 - 1])
    assert header.count_bits == 32
    blob = header.to_bytes()
    assert blob[28:] == pack_by_hand([0, 2**32 - 2], 32)
    back = Header.from_bytes(blob, WIDE)
    assert back.byte_counts().tolist() == [1, 2**32 - 1]
    assert back.offset(2) == 252 + 16 + 160 + 2**32  # 2 frames: TileOffsets external, TileByteCounts inline
    assert rule_of(blob) == "blob.limits"  # beyond the default Limits.max_frame_byte_count


def test_canonical_two_writers_same_bytes():
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 5000, 97)
    grid = FrameGrid(97, 1, 1, 1, 1)
    a = Header.from_byte_counts(grid, UINT8, counts).to_bytes()
    assert Header.from_bytes(a).to_bytes() == a
    assert a == Header.from_byte_counts(grid, UINT8, counts.tolist()).to_bytes()


def test_writer_refuses_counts_out_of_range():
    grid = FrameGrid(2, 1, 1, 1, 1)
    for bad in ([0, 5], [5, 2**32], [5]):
        with pytest.raises(ValueError):
            Header.from_byte_counts(grid, UINT8, bad)


# -- every rejection ------------------------------------------------------------------------------

def test_magic():
    assert rule_of(fields(magic=0x4C4F5645)) == "blob.magic"  # the bytes reversed
    assert rule_of(b"\0" * 28) == "blob.magic"


@pytest.mark.parametrize("version", [0, 2, 0x0100, 0xFFFF])
def test_version(version):
    assert rule_of(fields(version=version)) == "blob.version"


@pytest.mark.parametrize("extra", [-1, 1, 100])
def test_size_must_be_exact(extra):
    good = Header.from_byte_counts(FrameGrid(3, 1, 1, 1, 1), UINT8, [12, 10, 15]).to_bytes()
    bad = good[:extra] if extra < 0 else good + b"\0" * extra
    assert rule_of(bad) == "blob.size"


def test_size_shorter_than_the_fields():
    for n in range(28):
        assert rule_of(fields()[:n]) == "blob.size"


def test_size_with_count_bits_but_no_packed_bytes():
    assert rule_of(fields(count_bits=5)) == "blob.size"


@pytest.mark.parametrize("bits, fmt", [(8, 3), (16, 5), (3, 1), (8, 4), (16, 6), (8, 107), (0, 0)])
def test_sample_encoding(bits, fmt):
    assert rule_of(fields(bits=bits, fmt=fmt)) == "blob.sample-encoding"


@pytest.mark.parametrize("unit", [2, 3, 255])
def test_frame_unit(unit):
    assert rule_of(fields(unit=unit)) == "blob.frame-unit"


@pytest.mark.parametrize("bits", [33, 64, 255])
def test_count_bits_above_32(bits):
    assert rule_of(fields(count_bits=bits) + b"\0" * 100) == "blob.count-bits"


def test_count_min_zero():
    assert rule_of(fields(count_min=0)) == "blob.byte-counts"


def test_count_min_not_the_minimum():
    # counts 11, 12, 13 stored as count_min 10 with residuals 1, 2, 3.
    blob = fields(3, 1, 1, 1, count_min=10, count_bits=2) + pack_by_hand([1, 2, 3], 2)
    assert rule_of(blob) == "blob.canonical"


def test_count_bits_wider_than_needed():
    blob = fields(3, 1, 1, 1, count_min=10, count_bits=4) + pack_by_hand([0, 2, 3], 4)
    assert rule_of(blob) == "blob.canonical"
    # And all-equal counts stored with a width at all.
    assert rule_of(fields(3, 1, 1, 1, count_min=10, count_bits=1) + bytes(1)) == "blob.canonical"


def test_single_frame_with_count_bits():
    assert rule_of(fields(5, 5, 8, 8, count_bits=8) + b"\0") == "blob.canonical"


def test_padding_bits_must_be_zero():
    good = Header.from_byte_counts(FrameGrid(3, 1, 1, 1, 1), UINT8, [12, 10, 15]).to_bytes()
    for bit in range(1, 8):
        assert rule_of(good[:-1] + bytes([good[-1] | 1 << bit])) == "blob.padding"


def test_count_beyond_a_long():
    blob = fields(2, 1, 1, 1, count_min=2**32 - 1, count_bits=1) + bytes([0b10])
    assert rule_of(blob, WIDE) == "blob.byte-counts"


@pytest.mark.parametrize("changes, rule", [
    (dict(tile_width=0), "blob.tile-size"),
    (dict(tile_length=0), "blob.tile-size"),
    (dict(bands=0), "blob.samples-per-pixel"),
    (dict(width=0), "blob.image-size"),
    (dict(length=0), "blob.image-size"),
])
def test_zero_sizes(changes, rule):
    assert rule_of(fields(**changes)) == rule


# -- claims out of proportion to the bytes given ---------------------------------------------------

def test_a_28_byte_blob_claiming_1e19_samples_is_refused_at_once():
    """As cheaply as a claim of 30,000 frames over a limit of 1,000: nothing done in proportion to the claim."""
    blob = fields(2**32 - 1, 2**32 - 1, 1, 1, bands=65535, bits=128, fmt=6)
    small, small_limits = fields(100, 100, 1, 1, bands=3, bits=128, fmt=6), Limits(max_frames=1000)
    small_steps = python_steps(lambda: rule_of(small, small_limits))
    steps, peak = steps_and_peak(lambda: rule_of(blob), budget=2 * small_steps)
    assert peak < 1 << 16
    assert steps <= small_steps + 50  # the same checks; only the numbers in the message differ


def test_one_huge_frame_is_refused():
    # One cell frame of 65535 x 65535 x 65535 complex128 samples: a single frame, 4.5 PB decoded.
    blob = fields(65535, 65535, 65535, 65535, bands=65535, bits=128, fmt=6, unit=1)
    assert rule_of(blob) == "blob.limits"
    assert rule_of(fields(4096, 4096, 4096, 4096, bits=64, fmt=3), Limits(max_frame_bytes=2**20)) == "blob.limits"


def test_frames_limit_is_configurable():
    assert rule_of(fields(600, 600, 1, 1), Limits(max_frames=1000)) == "blob.limits"
    assert Header.from_bytes(fields(600, 600, 1, 1), Limits(max_frames=360000)).frame_count == 360000


def test_equal_counts_blob_allocates_nothing_per_frame():
    n_side = 4096  # 16,777,216 frames, the default limit, all count_min
    last = n_side * n_side - 1

    def read_the_last_frame():
        header = Header.from_bytes(fields(n_side, n_side, 1, 1, count_min=77))
        assert header.byte_count(last) == 77 and header.offset(last) == header.base_frame_offset + last * 77

    assert peak_of(read_the_last_frame) < 1 << 20


def test_checking_a_blob_uses_memory_in_proportion_to_its_bytes():
    n = 1 << 22
    residuals = np.zeros(n, np.uint64)
    residuals[-1] = 1
    blob = fields(n, 1, 1, 1, count_min=9, count_bits=1) + pack_residuals(residuals, 1)  # 512 KiB of counts
    # checked in slices: never the 8 bytes per frame of a full unpack at once
    assert peak_of(lambda: Header.from_bytes(blob)) < 64 * len(blob)


# -- vectorised access ------------------------------------------------------------------------------

def naive_counts(blob: bytes, n: int) -> list[int]:
    """The spec's decoding, one residual at a time, on Python integers."""
    count_min, bits = struct.unpack_from("<IB", blob, 23)
    packed = int.from_bytes(blob[28:], "little")
    return [count_min + ((packed >> (i * bits)) & ((1 << bits) - 1)) for i in range(n)]


@pytest.mark.parametrize("bits", range(0, 33))
def test_access_agrees_with_a_naive_loop(bits):
    rng = np.random.default_rng(bits)
    for n in (1, 2, 3, 7, 8, 9, 1001):
        if n == 1 and bits:
            continue
        low = 1 if bits == 32 else int(rng.integers(1, 1000))
        widest = min((1 << bits) - 1, 2**32 - 1 - low)  # a count is a LONG: 2**32 - 2 at 32 bits
        counts = rng.integers(0, widest, n, dtype=np.uint64, endpoint=True).astype(np.int64) + low
        if bits and n > 1:
            counts[rng.integers(0, n)] = low  # the minimum is there
            counts[rng.integers(0, n)] = low + widest  # and the widest residual
            counts[counts == counts.min()] = low
        grid = FrameGrid(n, 1, 1, 1, 1)
        header = Header.from_byte_counts(grid, UINT8, counts)
        assert header.count_bits == (int(counts.max() - counts.min()).bit_length())
        blob = header.to_bytes()
        parsed = Header.from_bytes(blob, WIDE)
        expected = naive_counts(blob, n)
        assert expected == counts.tolist()
        byte_counts, offsets = parsed.byte_counts(), parsed.offsets()
        assert isinstance(byte_counts, np.ndarray) and isinstance(offsets, np.ndarray)
        assert byte_counts.tolist() == expected
        running, naive_offsets = parsed.base_frame_offset, []
        for c in expected:
            naive_offsets.append(running)
            running += c
        assert offsets.tolist() == naive_offsets
        picks = rng.integers(0, n, 20)
        assert [parsed.byte_count(k) for k in picks] == [expected[k] for k in picks]
        assert [parsed.offset(k) for k in picks] == [naive_offsets[k] for k in picks]
        starts, stops = parsed.ranges(picks)
        assert (stops - starts).tolist() == [expected[k] for k in picks]
        assert parsed.offset(n) == parsed.frames_end == running
        assert (parsed.residuals(n // 3, n // 2 + 1) + parsed.count_min).tolist() == expected[n // 3: n // 2 + 1]


def test_unpack_matches_pack_at_every_window():
    rng = np.random.default_rng(3)
    for bits in (1, 5, 13, 31, 32):
        values = rng.integers(0, 1 << bits, 200, dtype=np.uint64)
        packed = pack_residuals(values, bits)
        assert packed == pack_by_hand(values.tolist(), bits)
        for start, stop in ((0, 200), (1, 2), (17, 150), (199, 200), (50, 50)):
            assert unpack_residuals(packed, bits, start, stop).tolist() == values[start:stop].tolist()


def test_pack_matches_the_spec_for_every_width_and_length():
    rng = np.random.default_rng(11)
    for bits in range(1, 33):
        for n in range(1, 18):
            values = rng.integers(0, (1 << bits) - 1, n, dtype=np.uint64, endpoint=True)
            assert pack_residuals(values, bits) == pack_by_hand(values.tolist(), bits), (bits, n)


class CountingBytes(bytes):
    """bytes that remember how many bytes each slice took."""

    taken: list

    def __getitem__(self, item):
        result = super().__getitem__(item)
        if isinstance(item, slice):
            self.taken.append(len(result))
        return result


def test_byte_count_reads_at_most_five_bytes():
    rng = np.random.default_rng(5)
    n = 100_000
    grid = FrameGrid(n, 1, 1, 1, 1)
    header = Header.from_byte_counts(grid, UINT8, rng.integers(1, 2**31, n))
    assert header.count_bits == 31
    packed = CountingBytes(header.packed)
    packed.taken = []
    spy = Header(header.grid, header.sample_type, header.count_min, header.count_bits, packed)
    for k in (0, 1, 4567, n - 1):
        assert spy.byte_count(k) == header.byte_counts()[k]
    assert packed.taken and max(packed.taken) <= 5


def test_out_of_range_indices_raise_instead_of_wrapping():
    header = Header.from_byte_counts(FrameGrid(3, 1, 1, 1, 1), UINT8, [12, 10, 15])
    for call in (lambda: header.byte_count(3), lambda: header.byte_count(-1), lambda: header.offset(4),
                 lambda: header.offset(-1), lambda: header.offsets([0, -1]), lambda: header.ranges([3]),
                 lambda: header.offsets([4])):
        with pytest.raises(IndexError):
            call()
    assert header.offsets([3]).tolist() == [header.frames_end]


def test_pickles_without_its_cached_prefix_sum():
    import pickle
    n = 200_000
    header = Header.from_byte_counts(FrameGrid(n, 1, 1, 1, 1), UINT8, np.arange(n) % 1000 + 1)
    before = len(pickle.dumps(header))
    assert header.offset(n - 1) > 0  # builds the 1.6 MB prefix sum
    shipped = pickle.dumps(header)
    assert len(shipped) == before < len(header.packed) + 4096
    back = pickle.loads(shipped)
    assert back == header and back.offset(n - 1) == header.offset(n - 1)


def test_checking_a_large_blob_holds_a_bounded_slice_of_frames():
    # 65,536 frames at 1 bit each (8 KiB of residuals): the check unpacks them a slice at a time, within the
    # bound the blob fuzzer holds the parser to (1 MiB + 64 bytes per blob byte); one slice of 65,536 did not
    blob = (b"LOVE\x01\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x01\x00\xff\xff\x08\x01\x00\xee\x00\x00\x00\x01"
            + bytes(8192))
    assert rule_of(blob) == "blob.canonical"  # every residual 0 at count_bits 1
    assert peak_of(lambda: rule_of(blob)) < 64 * len(blob) + (1 << 20)
