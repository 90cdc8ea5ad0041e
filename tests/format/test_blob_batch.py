"""Many blobs at once (headers_from_bytes): the same verdict as Header.from_bytes on each, for less work."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest
from steps import python_steps

from xarray_rumi import Limits, RumiFormatError
from xarray_rumi.format.blob import Header, headers_from_bytes, pack_residuals, unpack_rows
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameGrid

UINT16 = sample_type_from_name("uint16")
GRID = FrameGrid(10980, 10980, 512, 512, 1)  # a Sentinel-2 tile at 10 m: 484 frames


def blobs_of_one_grid(count: int, grid: FrameGrid = GRID, seed: int = 0, high: int = 5000) -> list[bytes]:
    """``count`` distinct blobs of ``grid``: random counts, so count_min and count_bits differ too."""
    rng = np.random.default_rng(seed)
    return [Header.from_byte_counts(grid, UINT16, rng.integers(100, high, grid.frame_count)).to_bytes()
            for _ in range(count)]


def same_count_bits(count: int, bits: int, grid: FrameGrid = GRID, seed: int = 0) -> list[bytes]:
    """``count`` distinct blobs of ``grid`` at exactly ``bits`` bits a residual, count_min 100 to 119."""
    rng = np.random.default_rng(seed)
    largest = min((1 << bits) - 1, 2**32 - 200)  # every count must fit 32 bits
    blobs = []
    for i in range(count):
        residuals = rng.integers(0, largest + 1, grid.frame_count, dtype=np.uint64)
        residuals[rng.integers(grid.frame_count)] = 0
        residuals[rng.integers(grid.frame_count)] = largest
        counts = residuals.astype(np.int64) + 100 + i % 20
        blobs.append(Header.from_byte_counts(grid, UINT16, counts).to_bytes())
    return blobs


def verdict(blob: bytes, limits: Limits = Limits()):
    """What Header.from_bytes says of ``blob``: its header, or the rule it breaks."""
    try:
        return Header.from_bytes(blob, limits)
    except RumiFormatError as error:
        return error.rule


def rule_of_batch(blobs, limits: Limits = Limits(), names=None) -> tuple[str, str]:
    with pytest.raises(RumiFormatError) as info:
        headers_from_bytes(blobs, limits, names=names)
    return info.value.rule, info.value.detail


# -- what comes out ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [1, 3, 6, 8, 13, 16, 18, 25, 26, 31, 32])
def test_distinct_blobs_of_one_grid_parse_as_one_by_one(bits):
    limits = Limits(max_frame_byte_count=2**32 - 1)
    blobs = same_count_bits(40, bits, FrameGrid(999, 37, 16, 16, 1), seed=bits)  # 63 x 3 frames: a cut last group
    headers = headers_from_bytes(blobs, limits)
    for blob, header in zip(blobs, headers):
        alone = Header.from_bytes(blob, limits)
        assert header == alone and header.to_bytes() is blob
        assert header.byte_counts().tolist() == alone.byte_counts().tolist()


def test_a_mixed_list_parses_as_one_by_one():
    equal_counts = Header.from_byte_counts(FrameGrid(64, 64, 16, 16, 2), UINT16, [77] * 32).to_bytes()
    blobs = [*blobs_of_one_grid(30), *blobs_of_one_grid(5, FrameGrid(300, 200, 64, 64, 3), seed=1),
             equal_counts, equal_counts[:23] + struct.pack("<I", 78) + equal_counts[27:]]
    order = np.random.default_rng(2).permutation(len(blobs))
    blobs = [blobs[i] for i in order]
    assert headers_from_bytes(blobs) == [Header.from_bytes(b) for b in blobs]


def test_identical_blobs_share_one_header_and_are_not_copied():
    blob = blobs_of_one_grid(1)[0]
    copies = [bytes(bytearray(blob)) for _ in range(3)]  # equal bytes, distinct objects
    headers = headers_from_bytes([blob, *copies, bytearray(blob)])
    assert all(h is headers[0] for h in headers) and headers[0].to_bytes() is blob
    assert headers[0].packed.obj is blob  # a view of the blob, not a copy of its residuals


def test_a_parsed_header_pickles_as_bytes_and_back():
    blob = blobs_of_one_grid(2)[1]
    header = headers_from_bytes([blob, blobs_of_one_grid(1)[0]])[0]
    back = pickle.loads(pickle.dumps(header))
    assert back == header and back.to_bytes() == blob and back.offset(483) == header.offset(483)
    assert isinstance(back.__getstate__()["packed"], bytes)


def test_unpack_rows_is_the_inverse_of_pack_for_every_width():
    rng = np.random.default_rng(7)
    for bits in range(1, 33):
        for count in (1, 7, 8, 9, 63):
            values = rng.integers(0, 1 << bits, (3, count), dtype=np.uint64)
            rows = np.stack([np.frombuffer(pack_residuals(v, bits), np.uint8) for v in values])
            assert unpack_rows(rows, bits, count).tolist() == values.tolist(), (bits, count)


# -- every refusal ----------------------------------------------------------------------------------

def mutants(blob: bytes, rng) -> list[bytes]:
    """Edits of ``blob`` that keep every field but count_min, so they are checked with their good siblings."""
    out = []
    for _ in range(60):
        data = bytearray(blob)
        kind = rng.integers(4)
        if kind == 0:  # a bit of the residuals, often the last byte, where the padding is
            at = len(data) - 1 if rng.integers(3) == 0 else int(rng.integers(28, len(data)))
            data[at] ^= 1 << int(rng.integers(8))
        elif kind == 1:  # count_min near its value, or extreme
            count_min = struct.unpack_from("<I", data, 23)[0]
            value = int(rng.choice([0, 1, count_min - 1, count_min + 1, Limits().max_frame_byte_count, 2**32 - 1]))
            data[23:27] = struct.pack("<I", value % 2**32)
        elif kind == 2:  # every residual raised by one: no longer the true minimum
            header = Header.from_bytes(blob)
            residuals = header.residuals() + np.uint64(1)
            if int(residuals.max()).bit_length() == header.count_bits:
                data[28:] = pack_residuals(residuals, header.count_bits)
        else:  # the largest residuals lowered: count_bits wider than needed
            header = Header.from_bytes(blob)
            residuals = header.residuals() >> np.uint64(1)
            data[28:] = pack_residuals(residuals, header.count_bits)
        out.append(bytes(data))
    return out


def test_every_mutant_among_good_siblings_gets_the_verdict_it_gets_alone():
    rng = np.random.default_rng(3)
    good = same_count_bits(12, 11, FrameGrid(100, 90, 16, 16, 1))  # 42 frames, 462 bits: 6 padding bits
    rules, accepted = set(), 0
    for mutant in mutants(good[0], rng) + mutants(good[5], rng):
        alone = verdict(mutant)
        batch = [*good[1:4], mutant, *good[4:]]
        if isinstance(alone, str):
            rule, detail = rule_of_batch(batch)
            assert rule == alone and detail.startswith("blob 3: ")
            rules.add(rule)
        else:
            assert headers_from_bytes(batch)[3] == alone
            accepted += 1
    # both ways were exercised, and every rule on what differs between blobs of one grid
    assert rules == {"blob.padding", "blob.canonical", "blob.byte-counts", "blob.limits"} and accepted > 10


def test_a_damaged_blob_of_the_same_size_as_a_good_one_is_refused():
    good = same_count_bits(3, 9)
    for damaged in (good[0][:-1] + bytes([good[0][-1] ^ 0x80]),            # a padding bit
                    good[0][:28] + pack_residuals(Header.from_bytes(good[0]).residuals() | np.uint64(1), 9)):
        assert len(damaged) == len(good[0])
        rule, detail = rule_of_batch([*good, *good, damaged, *good], names=[f"s{i}.rumi" for i in range(10)])
        assert rule == verdict(damaged) and detail.startswith("s6.rumi: ")


def test_the_first_refused_blob_in_the_order_given_is_named():
    good = blobs_of_one_grid(3)
    other_grid = blobs_of_one_grid(1, FrameGrid(64, 64, 16, 16, 1))[0]
    bad_fields = b"EVOL" + other_grid[4:]                       # in a group of its own
    bad_sibling = good[0][:23] + struct.pack("<I", 0) + good[0][27:]  # checked with its siblings
    assert rule_of_batch([good[0], bad_sibling, good[1], bad_fields]) == (
        "blob.byte-counts", "blob 1: count_min is 0, but every frame byte count must be greater than zero")
    assert rule_of_batch([good[0], bad_fields, good[1], bad_sibling])[0] == "blob.magic"
    assert rule_of_batch([good[0], *good, b"LOVE"])[1].startswith("blob 4: ")  # too short for the fields


def test_fields_every_blob_of_a_group_breaks_refuse_them_all():
    good = blobs_of_one_grid(4)
    huge = [b[:6] + struct.pack("<I", 2**20) + b[10:] for b in good]  # the same absurd width in each
    rule, detail = rule_of_batch([*huge], Limits(max_frames=1000))
    assert rule == verdict(huge[0], Limits(max_frames=1000)) == "blob.limits" and detail.startswith("blob 0: ")


def test_limits_hold_for_each_blob_of_a_group():
    blobs = same_count_bits(5, 12)  # counts up to 100 + 19 + 4095
    biggest = max(int(Header.from_bytes(b).byte_counts().max()) for b in blobs)
    assert len(headers_from_bytes(blobs, Limits(max_frame_byte_count=biggest))) == 5
    rule, detail = rule_of_batch(blobs, Limits(max_frame_byte_count=biggest - 1))
    assert rule == "blob.limits" and "Limits.max_frame_byte_count" in detail


# -- what it costs ------------------------------------------------------------------------------------

def test_python_steps_do_not_grow_with_frames():
    """The residuals are checked in numpy: ten times the frames take no more Python steps, and few a blob."""
    small = same_count_bits(200, 10, FrameGrid(1024, 256, 64, 64, 1))   # 64 frames each
    large = same_count_bits(200, 10, FrameGrid(1024, 2560, 64, 64, 1))  # 640 frames each
    steps_small = python_steps(lambda: headers_from_bytes(small))
    steps_large = python_steps(lambda: headers_from_bytes(large))
    assert steps_large < 1.2 * steps_small and steps_small < 40 * len(small)
    one_by_one = python_steps(lambda: [Header.from_bytes(b) for b in small])
    assert steps_small < one_by_one / 3
