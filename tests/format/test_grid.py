"""The frame grid: counts, frame indices and the cut shape of every edge frame."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xarray_rumi import Limits, RumiFormatError
from xarray_rumi.format.grid import FrameGrid, FrameUnit, axis_sizes


def test_spec_formulas_tile_frames():
    g = FrameGrid(image_width=1000, image_length=600, tile_width=512, tile_length=256, samples_per_pixel=3)
    assert (g.tiles_across, g.tiles_down, g.positions, g.frame_count) == (2, 3, 6, 18)
    # frame_index(row, col, band) = (row * tiles_across + col) * B + band
    for row, col, band in itertools.product(range(3), range(2), range(3)):
        k = g.frame_index(row, col, band)
        assert k == (row * 2 + col) * 3 + band
        assert g.frame_location(k) == (row, col, band)


def test_spec_formulas_cell_frames():
    g = FrameGrid(1000, 600, 512, 256, 3, FrameUnit.CELL)
    assert g.frame_count == 6
    for row, col in itertools.product(range(3), range(2)):
        assert g.frame_index(row, col) == row * 2 + col
        assert g.frame_location(row * 2 + col) == (row, col, 0)


def test_every_edge_frame_is_cut_never_padded():
    # 1000 x 600 with 512 x 256 tiles: last column 488 wide, last row 88 high.
    tile = FrameGrid(1000, 600, 512, 256, 2)
    cell = FrameGrid(1000, 600, 512, 256, 2, FrameUnit.CELL)
    heights, widths = [256, 256, 88], [512, 488]
    for row, col in itertools.product(range(3), range(2)):
        for band in range(2):
            assert tile.frame_shape(tile.frame_index(row, col, band)) == (1, heights[row], widths[col])
        assert cell.frame_shape(cell.frame_index(row, col)) == (2, heights[row], widths[col])
    assert tile.edge_sizes() == (88, 488)
    assert tile.frame_window(tile.frame_index(2, 1, 1)) == (slice(1, 2), slice(512, 600), slice(512, 1000))


def test_square_image_with_square_tiles_has_alike_edges_told_apart():
    g = FrameGrid(20, 20, 16, 16, 1)
    right, bottom = g.frame_index(0, 1), g.frame_index(1, 0)
    assert g.frame_shape(right) == (1, 16, 4) and g.frame_shape(bottom) == (1, 4, 16)   # 64 samples each


@pytest.mark.parametrize("width, length, tw, tl", [
    (1, 1, 1, 1), (1, 1, 512, 512), (7, 5, 16, 16), (48, 32, 16, 16), (49, 33, 16, 16), (23, 19, 3, 5),
    (300, 1, 64, 64), (1, 300, 64, 64), (65535 * 2 + 1, 3, 65535, 65535),
])
def test_windows_tile_the_image_exactly(width, length, tw, tl):
    for bands, unit in ((1, FrameUnit.TILE), (3, FrameUnit.TILE), (3, FrameUnit.CELL)):
        g = FrameGrid(width, length, tw, tl, bands, unit)
        if g.frame_count > 10_000:
            continue
        covered = np.zeros((bands, length, width), np.int32)
        for k in range(g.frame_count):
            covered[g.frame_window(k)] += 1
        assert (covered == 1).all()
        assert g.tiles_across == -(-width // tw) and g.tiles_down == -(-length // tl)


def test_frames_touching_a_window():
    g = FrameGrid(50, 40, 16, 16, 3)
    touched = g.frames_touching(range(1, 3), range(15, 17), range(0, 1))
    # rows 0 and 1 of the grid, column 0, bands 1 and 2, in frame-index order
    assert touched.tolist() == [1, 2, 13, 14]
    cell = FrameGrid(50, 40, 16, 16, 3, FrameUnit.CELL)
    assert cell.frames_touching(range(0, 1), range(0, 40), range(48, 50)).tolist() == [3, 7, 11]
    assert g.frames_touching(range(0), range(0, 1), range(0, 1)).size == 0


def test_out_of_range_frames_raise():
    g = FrameGrid(50, 40, 16, 16, 3)
    for k in (-1, g.frame_count):
        with pytest.raises(IndexError):
            g.frame_shape(k)


def test_frame_unit_parsing():
    assert FrameUnit.parse("tile") is FrameUnit.TILE and FrameUnit.parse("CELL") is FrameUnit.CELL
    assert FrameUnit.parse(0) is FrameUnit.TILE and FrameUnit.parse(1) is FrameUnit.CELL
    for bad in ("band", 2, -1, True, None, 0.5):
        with pytest.raises(ValueError):
            FrameUnit.parse(bad)


@pytest.mark.parametrize("grid, rule", [
    (FrameGrid(10, 10, 0, 16, 1), "grid.tile-size"),
    (FrameGrid(10, 10, 16, 0, 1), "grid.tile-size"),
    (FrameGrid(10, 10, 16, 16, 0), "grid.samples-per-pixel"),
    (FrameGrid(0, 10, 16, 16, 1), "grid.image-size"),
    (FrameGrid(10, 0, 16, 16, 1), "grid.image-size"),
    (FrameGrid(2**32 - 1, 2**32 - 1, 1, 1, 1), "grid.limits"),
])
def test_check(grid, rule):
    with pytest.raises(RumiFormatError) as info:
        grid.check()
    assert info.value.rule == rule


def test_check_frame_bytes():
    g = FrameGrid(4096, 4096, 4096, 4096, 5, FrameUnit.CELL)  # one frame of 5 x 4096 x 4096
    assert g.largest_frame_samples == 5 * 4096 * 4096
    g.check(bytes_per_sample=8)  # 640 MiB: within the default 1 GiB
    with pytest.raises(RumiFormatError) as info:
        g.check(bytes_per_sample=16)
    assert info.value.rule == "grid.limits"
    with pytest.raises(RumiFormatError):
        g.check(Limits(max_frames=1, max_frame_bytes=1000), bytes_per_sample=1)
    tile = FrameGrid(4096, 4096, 4096, 4096, 4, FrameUnit.TILE)
    assert tile.largest_frame_samples == 4096 * 4096  # a tile frame holds one band


# -- every frame at once: the vectorised answers agree with the one-frame ones ------------------------------------

GRIDS = [
    FrameGrid(1000, 600, 512, 256, 3), FrameGrid(1000, 600, 512, 256, 3, FrameUnit.CELL),
    FrameGrid(20, 20, 16, 16, 1), FrameGrid(7, 5, 16, 16, 2), FrameGrid(300, 1, 64, 64, 1),
    FrameGrid(1, 300, 64, 64, 4), FrameGrid(48, 32, 16, 16, 2, FrameUnit.CELL), FrameGrid(23, 19, 3, 5, 2),
]


@pytest.mark.parametrize("g", GRIDS, ids=repr)
def test_frame_locations_of_every_frame_are_frame_location(g):
    expected = np.array([g.frame_location(k) for k in range(g.frame_count)]).T
    np.testing.assert_array_equal(np.stack(g.frame_locations()), expected)


@pytest.mark.parametrize("g", GRIDS, ids=repr)
def test_on_frame_grid_puts_each_frame_at_its_band_row_col(g):
    laid = g.on_frame_grid(np.arange(g.frame_count))
    assert laid.shape == g.frame_grid_shape
    for k in range(g.frame_count):
        row, col, band = g.frame_location(k)
        assert laid[band // g.bands_per_frame, row, col] == k


@pytest.mark.parametrize("g", GRIDS, ids=repr)
def test_edge_masks_and_frame_sizes_agree_with_frame_shape(g):
    right, bottom = g.edge_masks()
    for k in range(g.frame_count):
        row, col, _ = g.frame_location(k)
        last_row, last_col = row == g.tiles_down - 1, col == g.tiles_across - 1
        assert (right[k], bottom[k]) == (last_col and not last_row, last_row and not last_col)
    assert g.frame_sizes == {g.frame_shape(k)[1:] for k in range(g.frame_count)}


@pytest.mark.parametrize("g", GRIDS, ids=repr)
def test_frame_chunks_are_the_frame_windows(g):
    bands, heights, widths = g.frame_chunks
    assert (sum(bands), sum(heights), sum(widths)) == g.shape
    for k in range(g.frame_count):
        row, col, band = g.frame_location(k)
        assert g.frame_shape(k) == (bands[band // g.bands_per_frame], heights[row], widths[col])


@pytest.mark.parametrize("extent, tile, sizes", [(1, 1, (1,)), (5, 16, (5,)), (32, 16, (16, 16)), (33, 16, (16, 16, 1))])
def test_axis_sizes(extent, tile, sizes):
    assert axis_sizes(extent, tile) == sizes


@pytest.mark.parametrize("g", GRIDS, ids=repr)
def test_frames_at_points_place_every_point_once(g):
    rng = np.random.default_rng(7)
    axes = [rng.integers(0, n, size) for n, size in zip(g.shape, (2, 9, 11))]   # unsorted, with repeats
    image = np.arange(np.prod(g.shape)).reshape(g.shape)
    points = g.frames_at_points(*axes)
    expected = sorted({int(g.frame_index(r // g.tile_length, c // g.tile_width, b))
                       for b in axes[0] for r in axes[1] for c in axes[2]})
    assert points.frames.tolist() == expected
    out = np.full([a.size for a in axes], -1)
    for k in points.frames.tolist():
        frame = image[g.frame_window(k)]
        where, inside = zip(*points.in_frame(k))
        out[np.ix_(*where)] = frame[np.ix_(*inside)]
    np.testing.assert_array_equal(out, image[np.ix_(*axes)])   # every point placed (none left at -1), rightly
