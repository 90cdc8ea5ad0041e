"""Every block the writer encodes is the frame it stands for: a Dask block that is not, or a mask, stops the write."""

from __future__ import annotations

import logging
import os

import dask
import dask.array as da
import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.reading.open import open_image


def _one_block_off(rows: int, *, dtype="uint16", returned_dtype=None):
    """300 x 64 px declared as three 100-row blocks, the middle one returning ``rows`` rows (and ``returned_dtype``)."""
    def make(block, block_info=None):
        values = (np.arange(block.size) % 1000).astype(dtype).reshape(block.shape)
        if block_info[None]["chunk-location"][1] == 1:
            return np.resize(values, (1, rows, 64)).astype(returned_dtype or dtype)
        return values

    return da.zeros((1, 300, 64), dtype=dtype, chunks=(1, 100, 64)).map_blocks(make, dtype=dtype)


def _nothing_written(directory) -> bool:
    return os.listdir(directory) == []


@pytest.mark.parametrize("rows", [99, 101], ids=["smaller", "larger"])
@pytest.mark.parametrize("tile_size", [64, 100], ids=["rechunked", "blocks-are-frames"])
def test_a_block_other_than_its_declared_chunk_is_refused_and_nothing_written(tmp_path, rows, tile_size):
    # smaller: a file that failed validate and every read; larger and rechunked: a valid file, the row cut silently
    with pytest.raises(ValueError, match=rf"came (with|as a block of) shape \(1, {rows}, 64\) and dtype uint16.*"
                                         r"a Dask block must hold exactly what its chunks declare"):
        xarray_rumi.write(tmp_path / "x.rumi", _one_block_off(rows), tile_size=tile_size, compression="portable")
    assert _nothing_written(tmp_path)


def test_the_refusal_names_the_block_and_the_frame(tmp_path):
    with pytest.raises(ValueError, match=r"^block \(0, 1, 0\) of the Dask array came with shape \(1, 99, 64\) .* "
                                         r"where its chunks declare \(1, 100, 64\) of uint16"):
        xarray_rumi.write(tmp_path / "x.rumi", _one_block_off(99), tile_size=64)
    with pytest.raises(ValueError, match=r"^frame 1 \(grid row 1, column 0\) came with shape \(1, 99, 64\) "
                                         r"and dtype uint16, where the frame is \(1, 100, 64\) of uint16"):
        xarray_rumi.write(tmp_path / "x.rumi", _one_block_off(99), tile_size=100)


@pytest.mark.parametrize("tile_size", [64, 100], ids=["rechunked", "blocks-are-frames"])
def test_a_block_of_another_dtype_is_refused(tmp_path, tile_size):
    # whole numbers in float64 where uint16 is declared: they would fit, but the block is not what was declared
    with pytest.raises(ValueError, match=r"dtype float64, where .* of uint16"):
        xarray_rumi.write(tmp_path / "x.rumi", _one_block_off(100, returned_dtype="float64"), tile_size=tile_size)
    assert _nothing_written(tmp_path)


def test_a_refused_write_leaves_the_file_it_would_replace_untouched(tmp_path):
    good = np.arange(300 * 64, dtype="uint16").reshape(1, 300, 64) % 1000
    blob = xarray_rumi.write(tmp_path / "x.rumi", good, tile_size=64)
    before = (tmp_path / "x.rumi").read_bytes()
    with pytest.raises(ValueError, match="a Dask block must hold"):
        xarray_rumi.write(tmp_path / "x.rumi", _one_block_off(101), tile_size=64)
    assert (tmp_path / "x.rumi").read_bytes() == before
    assert (tmp_path / "x.rumi.header").read_bytes() == blob
    assert sorted(os.listdir(tmp_path)) == ["x.rumi", "x.rumi.header"]


def test_blocks_that_are_what_they_declare_write_as_before(tmp_path):
    values = np.arange(300 * 64, dtype="uint16").reshape(1, 300, 64) % 1000
    lazy = da.from_array(values, chunks=(1, 100, 64)).map_blocks(lambda block: block + 0, dtype="uint16")
    blob = xarray_rumi.write(tmp_path / "lazy.rumi", lazy, tile_size=64)
    assert np.array_equal(open_image(tmp_path / "lazy.rumi", blob).read(), values)
    xarray_rumi.write(tmp_path / "numpy.rumi", values, tile_size=64, write_header=False)
    assert (tmp_path / "lazy.rumi").read_bytes() == (tmp_path / "numpy.rumi").read_bytes()


@pytest.mark.parametrize("rows", [99, 101], ids=["short", "long"])
@pytest.mark.parametrize("tile_size", [64, 100], ids=["cut-to-frames", "blocks-are-frames"])
def test_a_block_off_its_chunks_is_refused_on_a_distributed_cluster_too(tmp_path, tile_size, rows):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster):
        with pytest.raises(ValueError, match=rf"shape \(1, {rows}, 64\)"):
            xarray_rumi.write(tmp_path / "x.rumi", _one_block_off(rows), tile_size=tile_size)
    assert _nothing_written(tmp_path)


# --- masked arrays: rumi has no place for a mask ---------------------------------------------------------------


def test_a_masked_array_with_masked_values_is_refused_naming_how_many(tmp_path):
    values = np.arange(2 * 30 * 40, dtype="int16").reshape(2, 30, 40)
    masked = np.ma.masked_less(values, 100)
    with pytest.raises(ValueError, match=r"^the data is a masked array with 100 masked values of 2400; rumi has no "
                                         r"place for a mask, and the values under it would be stored as they are"):
        xarray_rumi.write(tmp_path / "m.rumi", masked, tile_size=16)
    assert _nothing_written(tmp_path)


def test_a_filled_or_unmasked_masked_array_is_written_as_its_values(tmp_path):
    values = np.arange(30 * 40, dtype="int16").reshape(30, 40)
    xarray_rumi.write(tmp_path / "filled.rumi", np.ma.masked_less(values, 100).filled(-1), tile_size=16)
    assert (open_image(tmp_path / "filled.rumi").read()[0, :2, :40] == -1).all()
    xarray_rumi.write(tmp_path / "unmasked.rumi", np.ma.masked_array(values, mask=False), tile_size=16)
    assert np.array_equal(open_image(tmp_path / "unmasked.rumi").read()[0], values)


@pytest.mark.parametrize("tile_size", [16, 10], ids=["blocks-are-frames", "rechunked"])
def test_a_dask_array_of_masked_blocks_is_refused_when_a_block_is_masked(tmp_path, tile_size):
    values = np.arange(32 * 32, dtype="uint8").reshape(1, 32, 32)
    masked = da.ma.masked_greater(da.from_array(values, chunks=(1, 16, 16)), 250)
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match=r"is a masked array with \d+ masked "
                                                                            r"values of \d+; rumi has no place"):
        xarray_rumi.write(tmp_path / "m.rumi", masked, tile_size=tile_size)
    assert _nothing_written(tmp_path)
    xarray_rumi.write(tmp_path / "f.rumi", da.ma.filled(masked, 0), tile_size=tile_size)
    assert (open_image(tmp_path / "f.rumi").read()[0, 31, 27:] == 0).all()
