"""What a blob's claims cost the reader when they are wrong: nothing per frame, and blob files read with a bound.

A 28-byte blob whose counts are all equal may claim 16 million frames: a read
through it that fails names the frame by arithmetic, never by building every
frame's offset.  A blob file (``header=`` a path) is read up to the largest
blob the limits admit, and a larger file is refused naming it.
"""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import _FIELDS, MAGIC
from xarray_rumi.reading.open import load_header

SIDE = 4096  # 16,777,216 one-pixel frames: the default Limits.max_frames


def _equal_counts_blob(count_min=77) -> bytes:
    return _FIELDS.pack(MAGIC, 1, SIDE, SIDE, 1, 1, 1, 8, 1, 0, count_min, 0)


def test_a_one_pixel_read_through_a_28_byte_equal_counts_blob_allocates_nothing_per_frame(tmp_path):
    small = tmp_path / "small.rumi"
    blob = xarray_rumi.write(small, np.zeros((4, 4), "uint8"), tile_size=2)
    xr.open_dataset(small, engine="rumi", header=blob, crs=4326, transform=(1, 0, 0, 0, -1, 0)).band_data.values
    empty = tmp_path / "empty.rumi"
    empty.write_bytes(b"")
    ds = xr.open_dataset(empty, engine="rumi", header=_equal_counts_blob(), crs=4326, transform=(1, 0, 0, 0, -1, 0))
    tracemalloc.start()
    try:
        with pytest.raises(RumiFormatError, match=r"frames.truncated: frame 0 \(bytes"):
            ds.band_data[0, 0, 0].values
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20   # an offset per frame would be 128 MiB


def test_the_frame_named_in_a_refusal_is_the_one_read(tmp_path):
    path = tmp_path / "cut.rumi"
    blob = xarray_rumi.write(path, np.arange(64, dtype="uint8").reshape(8, 8), tile_size=2, compression="portable")
    image = xarray_rumi.open_image(path, header=blob, georeferencing=False)
    os.truncate(path, image.frame_range(9)[0] + 1)
    with pytest.raises(RumiFormatError, match=r"frames.truncated: frame 9 \(bytes"):
        image.read(rows=slice(4, 6), cols=slice(2, 4))


def test_a_blob_file_larger_than_any_blob_is_refused_naming_it_without_reading_it_whole(tmp_path):
    big = tmp_path / "big.header"
    limits = xarray_rumi.Limits(max_frames=1000)
    blob = xarray_rumi.write(tmp_path / "a.rumi", np.zeros((4, 4), "uint8"), tile_size=2)
    big.write_bytes(blob + bytes(28 + 4 * 1000))  # past the largest blob of 1000 frames
    with pytest.raises(RumiFormatError, match=rf"blob.size: {big} is larger than"):
        load_header(big, limits=limits)
    with pytest.raises(RumiFormatError, match=rf"blob.size: {big} is larger than"):
        xarray_rumi.open_image(tmp_path / "a.rumi", header=str(big), limits=limits)


def test_a_blob_file_of_dev_zero_is_refused_with_bounded_memory():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    tracemalloc.start()
    try:
        with pytest.raises(RumiFormatError, match="blob"):
            load_header("/dev/zero", limits=xarray_rumi.Limits(max_frames=1 << 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
