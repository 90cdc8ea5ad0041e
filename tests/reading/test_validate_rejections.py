"""One broken file per rule of the spec's file profile, fixed IFD and georeferencing.

Each case starts from a valid file, breaks exactly one rule by patching bytes,
and checks that ``validate`` (and, for what the IFD alone shows,
``open_image`` and ``header_from_file``) names that rule.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tifffile
from _rumi_bytes import (
    entries,
    entry_index,
    make,
    patch_entry,
    put,
    ramp,
    save,
    tile_byte_counts,
    tile_offsets,
    value_offset,
    with_entries,
)

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.geo import Georeferencing
from xarray_rumi.format.grid import FrameGrid, FrameUnit
from xarray_rumi.format.ifd import build_prefix
from xarray_rumi.frames.codec import encode_frame

# 3 bands, 40 x 50 pixels, 16 x 16 tiles: a 4 x 3 grid, 36 tile frames (B <= 4: bit depths inline).
SHAPE, TILE, N = (3, 40, 50), 16, 36


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> bytes:
    tmp = tmp_path_factory.mktemp("valid")
    return make(tmp, ramp(SHAPE), tile_size=TILE, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))[2]


@pytest.fixture(scope="module")
def six_bands(tmp_path_factory) -> bytes:
    """B = 6: BitsPerSample and SampleFormat stored out of line."""
    return make(tmp_path_factory.mktemp("six"), ramp((6, 20, 20), "int16"), tile_size=16)[2]


def validate_rule(tmp_path, data: bytes, header=None) -> str:
    path = save(tmp_path, data)
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.validate(path, header)
    return info.value.rule


def ifd_rule(tmp_path, data: bytes) -> str:
    """The rule named by validate, checked to be the one open_image and header_from_file name too."""
    rule = validate_rule(tmp_path, data)
    path = save(tmp_path, data)
    for reader in (xarray_rumi.open_image, xarray_rumi.header_from_file):
        with pytest.raises(RumiFormatError) as info:
            reader(path)
        assert info.value.rule == rule, reader.__name__
    return rule


def frames_of(data: bytes) -> list[bytes]:
    return [data[o:o + c] for o, c in zip(tile_offsets(data), tile_byte_counts(data))]


def base_of(data: bytes) -> int:
    return int(tile_offsets(data)[0])


def with_values(data: bytes, values, tag=324, dtype="<u8") -> bytes:
    """``data`` with the external values of ``tag`` (by default TileOffsets) written over."""
    out = bytearray(data)
    at = value_offset(data, tag)
    out[at: at + np.dtype(dtype).itemsize * len(values)] = np.asarray(values, dtype).tobytes()
    return bytes(out)


def assemble(grid: FrameGrid, sample, frames: list[bytes], georef=Georeferencing()) -> bytes:
    """A file from hand-made frames, laid out exactly as the spec says."""
    return build_prefix(grid, sample, georef, [len(f) for f in frames]) + b"".join(frames)


def geo_area(data: bytes) -> int:
    return base_of(data) - 160


def test_the_valid_files_are_valid(tmp_path, valid, six_bands):
    xarray_rumi.validate(save(tmp_path, valid))
    xarray_rumi.validate(save(tmp_path, six_bands, "six.rumi"))
    assert len(tile_offsets(valid)) == N


# -- file profile ---------------------------------------------------------------------------------

def test_classic_tiff(tmp_path, valid):
    assert ifd_rule(tmp_path, put(valid, 2, "<H", 42)) == "file-profile.bigtiff"
    path = tmp_path / "classic.tif"
    tifffile.imwrite(path, np.zeros((32, 32), np.uint8), tile=(16, 16))
    assert ifd_rule(tmp_path, path.read_bytes()) == "file-profile.bigtiff"


def test_big_endian(tmp_path, valid):
    assert ifd_rule(tmp_path, b"MM" + valid[2:]) == "file-profile.little-endian"
    path = tmp_path / "mm.tif"
    tifffile.imwrite(path, np.zeros((32, 32), np.uint8), tile=(16, 16), bigtiff=True, byteorder=">")
    assert ifd_rule(tmp_path, path.read_bytes()) == "file-profile.little-endian"


@pytest.mark.parametrize("at, fmt, value", [(2, "<H", 44), (4, "<H", 4), (6, "<H", 1)])
def test_not_a_bigtiff_header(tmp_path, valid, at, fmt, value):
    assert ifd_rule(tmp_path, put(valid, at, fmt, value)) == "file-profile.bigtiff"


def test_a_general_bigtiff_is_refused(tmp_path):
    path = tmp_path / "general.tif"
    tifffile.imwrite(path, np.zeros((3, 32, 32), np.uint8), tile=(16, 16), bigtiff=True, photometric="rgb")
    assert ifd_rule(tmp_path, path.read_bytes()).startswith(("fixed-ifd", "file-profile", "placement"))


def test_ifd_not_at_16(tmp_path, valid):
    # A copy of the IFD 8 bytes later, pointed to by the header: still one IFD, just not at 16.
    moved = valid[:16] + b"\0" * 8 + valid[16:]
    assert ifd_rule(tmp_path, put(moved, 8, "<Q", 24)) == "placement.ifd"


def test_second_ifd(tmp_path, valid):
    assert ifd_rule(tmp_path, put(valid, 16 + 8 + 220, "<Q", 16)) == "file-profile.single-ifd"


@pytest.mark.parametrize("count", [10, 12, 0])
def test_entry_count_not_11(tmp_path, valid, count):
    assert ifd_rule(tmp_path, put(valid, 16, "<Q", count)) == "fixed-ifd.tags"


@pytest.mark.parametrize("replaced, tag, rule", [
    (322, 273, "file-profile.tiled"),              # StripOffsets instead of TileWidth
    (323, 278, "file-profile.tiled"),              # RowsPerStrip
    (325, 279, "file-profile.tiled"),              # StripByteCounts
    (256, 254, "file-profile.single-image"),       # NewSubfileType: overviews and masks
    (339, 330, "file-profile.single-image"),       # SubIFDs
    (339, 338, "file-profile.single-image"),       # ExtraSamples: alpha and masks
    (34264, 33550, "georeferencing.tags"),         # ModelPixelScaleTag
    (34264, 33922, "georeferencing.tags"),         # ModelTiepointTag
    (34735, 34736, "georeferencing.tags"),         # GeoDoubleParamsTag
    (34735, 34737, "georeferencing.tags"),         # GeoAsciiParamsTag
    (339, 259, "fixed-ifd.tags"),                  # Compression: not in the fixed IFD
    (339, 340, "fixed-ifd.tags"),
])
def test_extra_tag(tmp_path, valid, replaced, tag, rule):
    assert ifd_rule(tmp_path, patch_entry(valid, replaced, tag=tag)) == rule


def test_wrong_order(tmp_path, valid):
    table = entries(valid)
    table[0], table[1] = table[1], table[0]
    assert ifd_rule(tmp_path, with_entries(valid, table)) == "fixed-ifd.order"


def test_missing_tag_replaced_by_a_duplicate(tmp_path, valid):
    table = entries(valid)
    table[4] = list(table[3])  # TileWidth gone, SamplesPerPixel twice
    assert ifd_rule(tmp_path, with_entries(valid, table)) == "fixed-ifd.order"


@pytest.mark.parametrize("tag, type_code", [
    (256, 3), (257, 16), (258, 4), (277, 4), (322, 4), (323, 4), (324, 4), (325, 16), (339, 4),
    (34264, 11), (34735, 4),
])
def test_wrong_type(tmp_path, valid, tag, type_code):
    assert ifd_rule(tmp_path, patch_entry(valid, tag, type=type_code)) == "fixed-ifd.types"


@pytest.mark.parametrize("tag, count", [
    (256, 2), (257, 0), (258, 4), (258, 2), (277, 2), (322, 2), (323, 0), (325, N - 1), (325, N + 1),
    (339, 1), (34264, 15), (34735, 17), (34735, 20),
])
def test_wrong_count(tmp_path, valid, tag, count):
    assert ifd_rule(tmp_path, patch_entry(valid, tag, count=count)) == "fixed-ifd.counts"


@pytest.mark.parametrize("count", [N - 1, N + 1, 12 * 2, 1])
def test_tile_offsets_count_matches_neither_unit(tmp_path, valid, count):
    # 12 grid positions, 3 bands: only 12 (cell) or 36 (tile) are allowed.
    assert ifd_rule(tmp_path, patch_entry(valid, 324, count=count)) == "frame-unit.count"


def test_samples_per_pixel_zero_and_zero_sizes(tmp_path, valid):
    assert ifd_rule(tmp_path, patch_entry(valid, 277, field=struct.pack("<H6x", 0))) == "fixed-ifd.samples-per-pixel"
    assert ifd_rule(tmp_path, patch_entry(valid, 322, field=bytes(8))) == "fixed-ifd.tile-size"
    assert ifd_rule(tmp_path, patch_entry(valid, 256, field=bytes(8))) == "fixed-ifd.image-size"


@pytest.mark.parametrize("tag, shift", [(324, 8), (324, -4), (325, 4), (34264, 8), (34735, -2), (34735, 2)])
def test_external_value_misplaced(tmp_path, valid, tag, shift):
    table = entries(valid)
    row = table[entry_index(valid, tag)]
    row[3] = struct.pack("<Q", struct.unpack("<Q", row[3])[0] + shift)
    assert ifd_rule(tmp_path, with_entries(valid, table)) == "placement.external"


def test_gap_before_the_first_external_value(tmp_path, valid):
    # Every value 8 bytes later, the frames too: all self-consistent but for the gap after the IFD.
    base = base_of(valid)
    table = entries(valid)
    for row in table:
        if row[0] in (324, 325, 34264, 34735):
            row[3] = struct.pack("<Q", struct.unpack("<Q", row[3])[0] + 8)
    shifted = with_entries(valid, table)
    shifted = shifted[:252] + b"\0" * 8 + shifted[252:]
    shifted = with_values(shifted, tile_offsets(valid) + 8)
    assert base_of(shifted) == base + 8
    assert ifd_rule(tmp_path, shifted) == "placement.external"


def test_inline_value_with_garbage_after_it(tmp_path, valid):
    assert ifd_rule(tmp_path, patch_entry(valid, 277, field=struct.pack("<HHI", 3, 1, 0))) == "placement.inline"


def test_frame_data_not_immediately_after(tmp_path, valid):
    base = base_of(valid)
    padded = valid[:base] + b"\0" * 16 + valid[base:]
    assert ifd_rule(tmp_path, with_values(padded, tile_offsets(valid) + 16)) == "placement.frame-data"


def test_sparse_frame(tmp_path, valid):
    counts = tile_byte_counts(valid).copy()
    counts[5] = 0
    assert ifd_rule(tmp_path, with_values(valid, counts, 325, "<u4")) == "frames.sparse"


def test_non_contiguous_frames(tmp_path, valid):
    offsets, frames = tile_offsets(valid), frames_of(valid)
    gapped = valid[:offsets[3]] + b"\0" * 4 + valid[offsets[3]:]
    moved = offsets.copy()
    moved[3:] += 4
    assert ifd_rule(tmp_path, with_values(gapped, moved)) == "frames.contiguous"
    # Overlapping frames: frame 4 starts inside frame 3.
    overlap = offsets.copy()
    overlap[4] -= 1
    assert ifd_rule(tmp_path, with_values(valid, overlap)) == "frames.contiguous"
    assert len(frames) == N


def test_band_interleaved_frames_are_rejected_even_though_contiguous_once_sorted(tmp_path, valid):
    _offsets, counts, frames = tile_offsets(valid), tile_byte_counts(valid), frames_of(valid)
    bands, positions = SHAPE[0], N // SHAPE[0]
    physical = [position * bands + band for band in range(bands) for position in range(positions)]
    new_offsets = np.empty(N, np.int64)
    cursor = base_of(valid)
    for k in physical:  # all tiles of band 0, then band 1, ...
        new_offsets[k] = cursor
        cursor += counts[k]
    interleaved = with_values(valid[:base_of(valid)], new_offsets) + b"".join(frames[k] for k in physical)
    assert len(interleaved) == len(valid)
    order = np.argsort(new_offsets)
    assert np.array_equal(new_offsets[order][1:], (new_offsets + counts)[order][:-1])  # the trap: sorted, contiguous
    assert ifd_rule(tmp_path, interleaved) == "frames.order"


def test_reversed_frames_are_out_of_order_not_misplaced(tmp_path, valid):
    # Frame 0 last: TileOffsets[0] is not the base, but the run is whole; the order is what is wrong.
    counts, frames = tile_byte_counts(valid), frames_of(valid)
    new_offsets = np.empty(N, np.int64)
    cursor = base_of(valid)
    for k in reversed(range(N)):
        new_offsets[k] = cursor
        cursor += counts[k]
    reversed_file = with_values(valid[:base_of(valid)], new_offsets) + b"".join(reversed(frames))
    assert ifd_rule(tmp_path, reversed_file) == "frames.order"


def test_short_files_named_by_their_first_bytes(tmp_path, valid):
    assert ifd_rule(tmp_path, bytes.fromhex("89504e470d0a1a0a")) == "file-profile.little-endian"  # a PNG
    assert ifd_rule(tmp_path, b"II*\0\x08\0\0\0") == "file-profile.bigtiff"  # a classic TIFF header
    assert ifd_rule(tmp_path, valid[:20]) == "file-profile.truncated"
    assert ifd_rule(tmp_path, b"") == "file-profile.truncated"


def ifd_message(tmp_path, data: bytes) -> str:
    """What validate says of ``data``, checked to be what open_image and header_from_file say too."""
    path = save(tmp_path, data)
    messages = set()
    for reader in (xarray_rumi.validate, xarray_rumi.open_image, xarray_rumi.header_from_file):
        with pytest.raises(RumiFormatError) as info:
            reader(path)
        messages.add(str(info.value))
    (message,) = messages
    return message


def test_what_is_not_a_rumi_file_is_named_first(tmp_path):
    classic, big_endian = tmp_path / "classic.tif", tmp_path / "mm.tif"
    tifffile.imwrite(classic, np.zeros((32, 32), np.uint8), tile=(16, 16))
    tifffile.imwrite(big_endian, np.zeros((32, 32), np.uint8), tile=(16, 16), bigtiff=True, byteorder=">")
    convert = "rumi convert makes one from it"
    assert ifd_message(tmp_path, b"\x3f\xa0" + bytes(1000)) == (
        "file-profile.little-endian: not a rumi file: it does not begin with a TIFF header (II, got b'?\\xa0')")
    assert ifd_message(tmp_path, b"") == "file-profile.truncated: not a rumi file: the file is empty"
    assert ifd_message(tmp_path, b"II+") == (
        "file-profile.truncated: not a rumi file: 3 bytes, shorter than the 16-byte BigTIFF header every rumi "
        "file begins with")
    assert ifd_message(tmp_path, b"I").startswith("file-profile.truncated: not a rumi file: 1 byte, shorter")
    assert ifd_message(tmp_path, big_endian.read_bytes()) == (
        "file-profile.little-endian: not a rumi file: a big-endian BigTIFF (it begins with MM); rumi files are "
        f"little-endian BigTIFF (II, version 43): {convert}")
    assert ifd_message(tmp_path, b"MM\0*" + bytes(300)).startswith(
        "file-profile.little-endian: not a rumi file: a big-endian classic TIFF (it begins with MM)")
    assert ifd_message(tmp_path, classic.read_bytes()) == (
        "file-profile.bigtiff: not a rumi file: a classic TIFF (version 42, 32-bit offsets); rumi files are "
        f"BigTIFF (version 43): {convert}")


def test_truncated_file(tmp_path, valid):
    assert validate_rule(tmp_path, valid[:-1]) == "frames.truncated"
    assert validate_rule(tmp_path, valid[:base_of(valid) + 1]) == "frames.truncated"
    for cut in (0, 8, 100, 251, 252, 300):
        assert ifd_rule(tmp_path, valid[:cut]) == "file-profile.truncated", cut


def test_trailing_bytes(tmp_path, valid):
    assert validate_rule(tmp_path, valid + b"\0") == "frames.trailing-bytes"
    assert validate_rule(tmp_path, valid + valid[-100:]) == "frames.trailing-bytes"


# -- sample encodings ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bits, fmt", [(16, 4), (12, 1), (8, 3), (16, 100), (0, 1)])
def test_invalid_sample_pair(tmp_path, valid, bits, fmt):
    broken = patch_entry(valid, 258, field=struct.pack("<3H2x", bits, bits, bits))
    broken = patch_entry(broken, 339, field=struct.pack("<3H2x", fmt, fmt, fmt))
    assert ifd_rule(tmp_path, broken) == "sample-encoding"


def test_bands_with_different_pairs(tmp_path, valid, six_bands):
    assert ifd_rule(tmp_path, patch_entry(valid, 258, field=struct.pack("<3H2x", 16, 16, 8))) == "sample-encoding.bands"
    assert ifd_rule(tmp_path, patch_entry(valid, 339, field=struct.pack("<3H2x", 1, 2, 1))) == "sample-encoding.bands"
    at = value_offset(six_bands, 339)
    assert ifd_rule(tmp_path, put(six_bands, at + 2 * 5, "<H", 1)) == "sample-encoding.bands"
    at = value_offset(six_bands, 258)
    assert ifd_rule(tmp_path, put(six_bands, at, "<H", 32)) == "sample-encoding.bands"


# -- georeferencing -------------------------------------------------------------------------------------

def keys(model=1, raster=1, crs_key=3072, code=32618, header=(1, 1, 0, 3)):
    return struct.pack("<16H", *header, 1024, 0, 1, model, 1025, 0, 1, raster, crs_key, 0, 1, code)


def with_geo(data: bytes, matrix=None, geokeys=None) -> bytes:
    at = geo_area(data)
    out = bytearray(data)
    if matrix is not None:
        out[at: at + 128] = struct.pack("<16d", *matrix)
    if geokeys is not None:
        out[at + 128: at + 160] = geokeys
    return bytes(out)


UTM = (30, 0, 0, 500000, 0, -30, 0, 4000000, 0, 0, 0, 0, 0, 0, 0, 1)
IDENTITY = (1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)


@pytest.mark.parametrize("matrix, geokeys, rule", [
    ((30, 0, 0, 5e5, 0, -30, 0, 4e6, 0, 0, 1, 0, 0, 0, 0, 1), None, "georeferencing.matrix"),
    ((30, 0, 0, 5e5, 0, -30, 0, 4e6, 0, 0, 0, 0, 0, 0, 0, 0), None, "georeferencing.matrix"),
    ((30, 0, 2, 5e5, 0, -30, 0, 4e6, 0, 0, 0, 0, 0, 0, 0, 1), None, "georeferencing.matrix"),
    (None, keys(model=2), "georeferencing.model-key"),
    (None, keys(code=1000), "georeferencing.epsg-range"),
    (None, keys(code=40000), "georeferencing.epsg-range"),
    (None, keys(code=5000), "georeferencing.epsg-registry"),
    (None, keys(model=2, crs_key=2048, code=4087), "georeferencing.epsg-type"),
    (None, keys(code=7405), "georeferencing.epsg-kind"),
    (None, keys(model=0, crs_key=2048, code=0), "georeferencing.undefined"),
    (IDENTITY, keys(model=0, crs_key=2048, code=32618), "georeferencing.undefined"),
    (None, keys(header=(1, 1, 0, 4)), "georeferencing.geokey-header"),
    (None, keys(raster=5), "georeferencing.raster-type"),
])
def test_georeferencing_rules(tmp_path, valid, matrix, geokeys, rule):
    assert ifd_rule(tmp_path, with_geo(valid, matrix, geokeys)) == rule


def test_undefined_georeferencing_with_a_real_transform(tmp_path):
    data = make(tmp_path, ramp((1, 8, 8)), tile_size=8)[2]
    assert ifd_rule(tmp_path, with_geo(data, UTM)) == "georeferencing.undefined"


def test_georeferencing_is_checked_when_opening_with_a_blob(tmp_path, valid):
    path = save(tmp_path, with_geo(valid, None, keys(model=2, crs_key=2048, code=4087)))
    blob = xarray_rumi.header_from_file(save(tmp_path, valid, "good.rumi"))
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.open_image(path, blob)
    assert info.value.rule == "georeferencing.epsg-type"


# -- frames ---------------------------------------------------------------------------------------------

UINT16 = sample_type_from_name("uint16")


def encoded(array, recipe="id>zstd") -> bytes:
    return encode_frame(np.asarray(array)[None] if np.ndim(array) == 2 else np.asarray(array), recipe)


def test_frame_not_openzl(tmp_path, valid):
    base = base_of(valid)
    assert validate_rule(tmp_path, put(valid, base, "<B", 0x28)) == "frame.openzl"
    k = 7
    at = int(tile_offsets(valid)[k])
    assert validate_rule(tmp_path, put(valid, at + 1, "<B", 0)) == "frame.openzl"


def test_frames_at_two_openzl_versions(tmp_path, valid):
    at = int(tile_offsets(valid)[1])
    assert valid[at] == 0xC0 + 24
    assert validate_rule(tmp_path, put(valid, at, "<B", 0xC0 + 23)) == "frames.format-version"


def test_frame_decoding_to_the_wrong_length(tmp_path):
    grid = FrameGrid(16, 16, 16, 16, 1)
    short = assemble(grid, UINT16, [encoded(np.zeros((16, 15), np.uint16))])
    assert validate_rule(tmp_path, short) == "frame.length"
    long = assemble(grid, UINT16, [encoded(np.zeros((16, 17), np.uint16))])
    assert validate_rule(tmp_path, long) == "frame.decode"  # refused before it expands past its size
    # An edge frame decoded at the nominal size: the decoded length must not be trusted.
    grid = FrameGrid(20, 16, 16, 16, 1)
    frames = [encoded(np.zeros((16, 16), np.uint16)), encoded(np.zeros((16, 16), np.uint16))]
    assert validate_rule(tmp_path, assemble(grid, UINT16, frames)) == "frame.decode"


def test_frame_with_a_different_element_type_but_the_right_length(tmp_path):
    # 16 x 16 uint8 frame stored where 16 x 8 uint16 belong: same bytes, wrong grid cell shape is not
    # visible, but sub-byte high bits are: a uint8 frame of 0..255 read as uint4 is refused.
    grid = FrameGrid(16, 16, 16, 16, 1)
    frame = encoded(np.arange(256, dtype=np.uint8).reshape(16, 16))
    assert validate_rule(tmp_path, assemble(grid, sample_type_from_name("uint4"), [frame])) == "frame.sub-byte"
    path = save(tmp_path, assemble(grid, sample_type_from_name("bool"), [frame]))
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.open_image(path).read()
    assert info.value.rule == "frame.sub-byte"


def test_corrupt_frame_payload(tmp_path, valid):
    at = int(tile_offsets(valid)[10])
    count = int(tile_byte_counts(valid)[10])
    damaged = bytearray(valid)
    for i in range(8, count):
        damaged[at + i] ^= 0x5A
    assert validate_rule(tmp_path, bytes(damaged)) in ("frame.decode", "frame.length")


def test_bytes_after_the_openzl_frame_inside_its_byte_count(tmp_path):
    # Each frame is one self-contained OpenZL frame: no framing or padding after it.
    grid = FrameGrid(16, 16, 16, 16, 1)
    frame = encoded(ramp((16, 16)))
    for extra in (b"\0", frame):
        with pytest.raises(RumiFormatError) as info:
            xarray_rumi.validate(save(tmp_path, assemble(grid, UINT16, [frame + extra])))
        assert info.value.rule == "frame.decode" and "Stack Trace" not in str(info.value)


@pytest.mark.parametrize("recipe", ["id>zstd", "planar>zigzag>zstd", "med>zigzag>zstd"])
def test_a_hand_assembled_file_is_valid(tmp_path, recipe):
    # The reference for the cases above: the same assembly with correct frames passes, GeoZL frames included.
    grid = FrameGrid(20, 16, 16, 16, 2, FrameUnit.CELL)
    values = ramp((2, 16, 20))
    frames = [encoded(values[:, :, :16], recipe), encoded(values[:, :, 16:], recipe)]
    path = save(tmp_path, assemble(grid, UINT16, frames))
    xarray_rumi.validate(path)
    assert np.array_equal(xarray_rumi.open_image(path).read(), values)
