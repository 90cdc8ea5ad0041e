"""The fixed IFD and its placement, byte by byte, and as an independent reader sees it."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest
import tifffile
from _rumi_bytes import make, ramp, tile_byte_counts, tile_offsets

from xarray_rumi import RumiFormatError
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.geo import Georeferencing
from xarray_rumi.format.grid import FrameGrid, FrameUnit
from xarray_rumi.format.ifd import build_prefix, parse_prefix, prefix_size
from xarray_rumi.format.placement import base_frame_offset, external_sizes

TAGS = [(256, 4), (257, 4), (258, 3), (277, 3), (322, 3), (323, 3), (324, 16), (325, 4), (339, 3),
        (34264, 12), (34735, 3)]


def spec_external(b: int, n: int) -> int:
    """The spec's formula for the external area, as written there."""
    return ((2 * b if b >= 5 else 0) + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0)
            + (2 * b if b >= 5 else 0) + 128 + 32)


@pytest.mark.parametrize("grid, expected", [
    (FrameGrid(1, 1, 1, 1, 1), 412),                             # B=1, N=1: only the 160 georeferencing bytes
    (FrameGrid(2, 1, 1, 1, 1), 428),                             # N=2: TileOffsets goes out of line
    (FrameGrid(3, 1, 1, 1, 1), 448),                             # N=3: TileByteCounts too
    (FrameGrid(1, 1, 1, 1, 4, FrameUnit.CELL), 412),            # B=4: 8 bytes of SHORTs still fit inline
    (FrameGrid(1, 1, 1, 1, 5, FrameUnit.CELL), 432),            # B=5: BitsPerSample and SampleFormat out
    (FrameGrid(2, 1, 1, 1, 5, FrameUnit.CELL), 448),            # B=5, N=2
    (FrameGrid(1, 1, 1, 1, 5, FrameUnit.TILE), 252 + 10 + 40 + 20 + 10 + 160),  # B=5, N=5
    (FrameGrid(1000, 600, 512, 256, 3), 252 + 18 * 12 + 160),
])
def test_base_frame_offset_hand_computed(grid, expected):
    assert base_frame_offset(grid) == expected == 252 + spec_external(grid.samples_per_pixel, grid.frame_count)


def test_base_frame_offset_formula_on_many_shapes():
    for b in range(1, 12):
        for n in range(1, 12):
            assert 252 + sum(external_sizes(b, n).values()) == 252 + spec_external(b, n)


def entry(tag, type_code, count, value: bytes) -> bytes:
    return struct.pack("<HHQ", tag, type_code, count) + value.ljust(8, b"\0")


def test_one_pixel_file_byte_by_byte(tmp_path):
    path, blob, data = make(tmp_path, np.array([[[7]]], np.uint8))
    frame_bytes = len(data) - 412
    matrix = struct.pack("<16d", 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
    keys = struct.pack("<16H", 1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 1, 2048, 0, 1, 0)
    expected = (
        b"II" + struct.pack("<HHHQ", 43, 8, 0, 16)
        + struct.pack("<Q", 11)
        + entry(256, 4, 1, struct.pack("<I", 1))
        + entry(257, 4, 1, struct.pack("<I", 1))
        + entry(258, 3, 1, struct.pack("<H", 8))
        + entry(277, 3, 1, struct.pack("<H", 1))
        + entry(322, 3, 1, struct.pack("<H", 512))
        + entry(323, 3, 1, struct.pack("<H", 512))
        + entry(324, 16, 1, struct.pack("<Q", 412))
        + entry(325, 4, 1, struct.pack("<I", frame_bytes))
        + entry(339, 3, 1, struct.pack("<H", 1))
        + entry(34264, 12, 16, struct.pack("<Q", 252))
        + entry(34735, 3, 16, struct.pack("<Q", 380))
        + struct.pack("<Q", 0)
        + matrix + keys
    )
    assert len(expected) == 412
    assert data[:412] == expected
    assert data[412:412 + 4] == bytes.fromhex("d8a5b1d7")  # an OpenZL frame at format version 24
    assert blob == struct.pack("<IHIIHHHBBBIB", 0x45564F4C, 1, 1, 1, 512, 512, 1, 8, 1, 0, frame_bytes, 0)


def test_five_bands_two_cells_byte_by_byte(tmp_path):
    path, blob, data = make(tmp_path, ramp((5, 1, 2), "int16"), tile_size=1, frame_unit="cell",
                            crs=4326, transform=(0.5, 0, -180, 0, -0.5, 90), raster_type="point")
    counts = tile_byte_counts(data)
    # 258 @252 (10 bytes), 324 @262 (16), 339 @278 (10), 34264 @288 (128), 34735 @416 (32), frames @448.
    fields = {tag: struct.unpack_from("<HHQQ", data, 24 + 20 * i) for i, (tag, _) in enumerate(TAGS)}
    assert fields[258][1:] == (3, 5, 252)
    assert fields[324][1:] == (16, 2, 262)
    assert fields[325][1:3] == (4, 2) and data[24 + 20 * 7 + 12: 24 + 20 * 8] == struct.pack("<II", *counts)
    assert fields[339][1:] == (3, 5, 278)
    assert fields[34264][1:] == (12, 16, 288)
    assert fields[34735][1:] == (3, 16, 416)
    assert data[252:262] == struct.pack("<5H", *[16] * 5)
    assert data[262:278] == struct.pack("<2Q", 448, 448 + counts[0])
    assert data[278:288] == struct.pack("<5H", *[2] * 5)
    assert data[288:416] == struct.pack("<16d", 0.5, 0, 0, -180, 0, -0.5, 0, 90, 0, 0, 0, 0, 0, 0, 0, 1)
    assert data[416:448] == struct.pack("<16H", 1, 1, 0, 3, 1024, 0, 1, 2, 1025, 0, 1, 2, 2048, 0, 1, 4326)
    assert len(data) == 448 + counts.sum()
    assert blob[23:28] == struct.pack("<IB", counts.min(), int(counts.max() - counts.min()).bit_length())


def test_three_frames_byte_by_byte(tmp_path):
    path, blob, data = make(tmp_path, ramp((1, 1, 3), "uint8"), tile_size=1, crs="EPSG:32618",
                            transform=(30, 0, 500000, 0, -30, 4000000))
    counts = tile_byte_counts(data)
    assert struct.unpack_from("<QQ", data, 24 + 20 * 6 + 4) == (3, 252)  # TileOffsets count, offset
    assert struct.unpack_from("<QQ", data, 24 + 20 * 7 + 4) == (3, 276)  # TileByteCounts right after
    assert data[252:276] == struct.pack("<3Q", 448, 448 + counts[0], 448 + counts[0] + counts[1])
    assert data[276:288] == struct.pack("<3I", *counts)
    assert data[416:448] == struct.pack("<16H", 1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32618)


@pytest.mark.parametrize("shape, tile, unit, dtype", [
    ((1, 1, 1), 16, "tile", "uint8"),
    ((3, 40, 50), 16, "tile", "uint16"),
    ((3, 40, 50), (32, 16), "cell", "float32"),
    ((7, 33, 17), 16, "tile", "int8"),
    ((2, 64, 64), 32, "cell", "complex64"),
])
def test_tifffile_sees_exactly_the_fixed_ifd(tmp_path, shape, tile, unit, dtype):
    path, blob, data = make(tmp_path, ramp(shape, dtype), tile_size=tile, frame_unit=unit)
    bands = shape[0]
    grid = FrameGrid(shape[2], shape[1], *((tile, tile) if isinstance(tile, int) else tile[::-1]), bands,
                     FrameUnit.parse(unit))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tifffile must find nothing odd in the structure
        with tifffile.TiffFile(path) as tif:
            assert tif.is_bigtiff and tif.byteorder == "<"
            assert len(tif.pages) == 1
            page = tif.pages[0]
            assert [(t.code, int(t.dtype)) for t in page.tags] == TAGS
            counts = {t.code: t.count for t in page.tags}
            n = grid.frame_count
            assert counts == {256: 1, 257: 1, 258: bands, 277: 1, 322: 1, 323: 1, 324: n, 325: n, 339: bands,
                              34264: 16, 34735: 16}
            assert page.is_tiled
            assert (page.imagewidth, page.imagelength) == (shape[2], shape[1])
            assert (page.tilelength, page.tilewidth) == (grid.tile_length, grid.tile_width)
            assert page.samplesperpixel == bands
            assert list(page.dataoffsets) == tile_offsets(data).tolist()
            assert list(page.databytecounts) == tile_byte_counts(data).tolist()
            assert page.dataoffsets[0] == base_frame_offset(grid)
            assert tif.geotiff_metadata["GTModelTypeGeoKey"] == 0


def test_build_and_parse_prefix_round_trip():
    grid = FrameGrid(100, 70, 32, 16, 6, FrameUnit.TILE)
    sample = sample_type_from_name("bfloat16")
    georef = Georeferencing(32618, 1, 2, (10, 0.5, 100, -0.25, -10, 200))
    counts = np.arange(1, grid.frame_count + 1) * 3
    prefix = build_prefix(grid, sample, georef, counts)
    assert len(prefix) == base_frame_offset(grid) == prefix_size(prefix[:252])
    parsed = parse_prefix(prefix)
    assert parsed.grid == grid and parsed.sample_type == sample and parsed.georeferencing == georef
    assert parsed.tile_byte_counts.tolist() == counts.tolist()
    assert parsed.tile_offsets[0] == len(prefix)
    assert np.array_equal(np.diff(parsed.tile_offsets), counts[:-1])


def test_prefix_size_is_derived_from_b_and_n_only():
    grid = FrameGrid(9, 9, 3, 3, 2)
    prefix = build_prefix(grid, sample_type_from_name("uint8"), Georeferencing(), np.ones(18, int))
    assert prefix_size(prefix[:252]) == len(prefix)
    # A huge count on a tag whose count is fixed asks for no more bytes: parse_prefix refuses it.
    huge = bytearray(prefix)
    struct.pack_into("<Q", huge, 24 + 20 * 9 + 4, 2**40)
    assert prefix_size(bytes(huge[:252])) == len(prefix)
    with pytest.raises(RumiFormatError) as info:
        parse_prefix(bytes(huge))
    assert info.value.rule == "fixed-ifd.counts"
    # A TileOffsets count beyond the frame limit is refused before anything is fetched.
    struct.pack_into("<Q", huge, 24 + 20 * 6 + 4, 2**40)
    with pytest.raises(RumiFormatError) as info:
        prefix_size(bytes(huge[:252]))
    assert info.value.rule == "fixed-ifd.limits"


def test_cell_files_with_many_bands_are_not_judged_by_the_tile_frame_count():
    # 1,000 bands in one cell frame: as tiles this would be 16,000,000 frames, above a 1,000,000 limit.
    from xarray_rumi import Limits
    grid = FrameGrid(4, 4, 1, 1, 1000, FrameUnit.CELL)
    prefix = build_prefix(grid, sample_type_from_name("uint8"), Georeferencing(), np.ones(16, int))
    assert parse_prefix(prefix, Limits(max_frames=1000)).grid == grid


def test_same_shape_same_frame_data_start(tmp_path):
    # "Files with the same image shape, band count, and frame_unit start their frame data at the same byte."
    starts = set()
    for i, (values, crs) in enumerate(((ramp((6, 30, 20)), None), (np.zeros((6, 30, 20), np.uint16), 4326),
                                       (ramp((6, 30, 20), "float64"), 32618))):
        transform = (1, 0, 0, 0, -1, 0) if crs else None
        _, _, data = make(tmp_path, values, name=f"{i}.rumi", tile_size=(16, 8), crs=crs, transform=transform)
        starts.add(int(tile_offsets(data)[0]))
    assert starts == {base_frame_offset(FrameGrid(20, 30, 8, 16, 6))}
