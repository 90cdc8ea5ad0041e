"""Large results' memory (batches, windows, Cube chunks): reused once no view of a result lives, never before."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import xarray_rumi
import xarray_rumi.reading.buffers as buffers
from xarray_rumi.reading.buffers import result_array

LARGE = (4, 1024, 1024)  # 8 MiB of uint16: pooled


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch):
    monkeypatch.setattr(buffers, "_released", buffers._Released())


def test_a_result_let_go_lends_its_memory_to_the_next():
    first = result_array(LARGE, np.uint16)
    address = first.ctypes.data
    del first
    again = result_array(LARGE, np.uint16)
    assert again.ctypes.data == address
    assert again.flags.c_contiguous and again.flags.writeable and again.shape == LARGE


def test_memory_is_not_reused_while_a_view_of_the_result_lives():
    first = result_array(LARGE, np.uint16)
    first[...] = 7
    chip = first[1, 10:20]
    del first
    second = result_array(LARGE, np.uint16)
    assert not np.shares_memory(second, chip)
    second[...] = 9
    assert (chip == 7).all()


@pytest.mark.parametrize("dtype", ["uint16", "complex64", "bool", ml_dtypes.bfloat16, ml_dtypes.int4])
def test_any_sample_type_keeps_its_type(dtype):
    result = result_array(LARGE, dtype)
    assert result.dtype == np.dtype(dtype) and result.shape == LARGE and result.flags.c_contiguous
    result[...] = np.ones((), dtype)
    address = result.ctypes.data
    del result
    assert result_array(LARGE, dtype).ctypes.data == address


def test_results_start_on_a_page():
    assert all(result_array(LARGE, dtype).ctypes.data % buffers.ALIGNMENT == 0 for dtype in ("u1", "f8", "c8"))


def test_small_results_are_plain_numpy_arrays():
    small = result_array((2, 16, 16), np.uint16)
    assert small.base is None


def test_memory_kept_is_bounded(monkeypatch):
    monkeypatch.setattr(buffers, "KEPT_BYTES", 20 * 2**20)
    results = [result_array(LARGE, np.uint16) for _ in range(4)]
    del results
    assert sum(block.size for block in buffers._released.blocks) <= 20 * 2**20
    assert len(buffers._released.blocks) == 2


def test_a_much_larger_block_is_not_lent_to_a_small_result():
    big = result_array((4, 4096, 1024), np.uint16)  # 32 MiB
    address = big.ctypes.data
    del big
    assert result_array(LARGE, np.uint16).ctypes.data != address


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_starts_with_no_memory_of_its_parent():
    del_me = result_array(LARGE, np.uint16)
    del del_me
    assert buffers._released.blocks
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os._exit(0 if not buffers._released.blocks else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_batch_reuses_the_memory_of_the_batch_before_once_it_is_gone(tmp_path):
    values = np.arange(4 * 256 * 256, dtype="uint16").reshape(4, 256, 256)
    blob = xarray_rumi.write(tmp_path / "a.rumi", values, tile_size=64)
    image = xarray_rumi.open_image(tmp_path / "a.rumi", blob)
    windows = [(r, c, 128, 128) for r in (0, 7, 100) for c in (0, 64, 128)]  # 9 x 4 x 128 x 128 uint16: 1.1 MiB
    first = image.read_windows(windows)
    address = first.ctypes.data
    del first
    assert [block.ctypes.data for block in buffers._released.blocks] == [address]
    second = image.read_windows(windows[::-1])
    assert second.ctypes.data == address and not buffers._released.blocks
    for chip, (row, col, height, width) in zip(second, windows[::-1]):
        np.testing.assert_array_equal(chip, values[:, row:row + height, col:col + width])
    handed = np.from_dlpack(second)
    assert handed.ctypes.data == address




@pytest.mark.parametrize("cube", [False, True], ids=["window", "cube chunk"])
def test_a_large_window_or_cube_chunk_reuses_the_memory_of_one_let_go(tmp_path, cube):
    from xarray_rumi.reading.image import read_windows

    values = np.arange(2 * 512 * 512, dtype="uint16").reshape(2, 512, 512)
    blob = xarray_rumi.write(tmp_path / "a.rumi", values, tile_size=128)
    image = xarray_rumi.open_image(tmp_path / "a.rumi", blob)
    if cube:
        def read():
            return read_windows([image, image], range(2), range(512), range(512))[1]
    else:
        def read():
            return image.read(rows=slice(0, 512))  # 16 frames, 1 MiB: a Dask "auto" chunk or .values

    first = read()
    del first
    (kept,) = buffers._released.blocks
    again = read()
    assert not buffers._released.blocks and np.shares_memory(again, kept)
    np.testing.assert_array_equal(again, values)


def test_of_equal_blocks_the_latest_let_go_is_lent_first():
    older, newer = result_array(LARGE, np.uint16), result_array(LARGE, np.uint16)
    address = newer.ctypes.data
    del older
    del newer
    assert result_array(LARGE, np.uint16).ctypes.data == address
