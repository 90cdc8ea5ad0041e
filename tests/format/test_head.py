"""A blob is checked against its file's IFD head before pixels read through it are returned.

Every field both the 252-byte head and the blob state must agree, else
``RumiFormatError("blob.matches-file", ...)`` naming the field.  The check
costs one small range in a batch the read makes anyway, once per process per
(file, blob): threads that meet an unchecked blob together make one head
request between them.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameUnit
from xarray_rumi.format.head import check_blob_against_ifd_head, ifd_head_ranges

VALUES = np.random.default_rng(3).integers(0, 3000, (2, 40, 48), dtype=np.uint16)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    path = tmp_path_factory.mktemp("check") / "scene.rumi"
    blob = xarray_rumi.write(path, VALUES, tile_size=16, write_header=False)
    return path, blob


def _lying(blob: bytes, sample: str | None = None, **grid_changes) -> Header:
    """The blob with other grid fields or another sample type (its counts made up: the head does not hold them)."""
    header = Header.from_bytes(blob)
    grid = dataclasses.replace(header.grid, **grid_changes)
    sample_type = sample_type_from_name(sample) if sample else header.sample_type
    return Header.from_byte_counts(grid, sample_type, [100] * grid.frame_count)


def _head(path) -> list[bytes]:
    data = path.read_bytes()
    return [data[a:b] for a, b in ifd_head_ranges(Header.from_bytes(xarray_rumi.header_from_file(path)).grid)]


@pytest.mark.parametrize("lie, says", [
    (dict(image_width=40), r"blob says image_width 40, the file's IFD says 48 \(ImageWidth\)"),
    (dict(image_length=48), r"blob says image_length 48, the file's IFD says 40 \(ImageLength\)"),
    (dict(tile_width=8, tile_length=8), r"blob says tile_width 8, the file's IFD says 16 \(TileWidth\)"),
    (dict(tile_length=32), r"blob says tile_length 32, the file's IFD says 16 \(TileLength\)"),
    (dict(samples_per_pixel=3), r"blob says samples_per_pixel 3, the file's IFD says 2 \(SamplesPerPixel\)"),
    (dict(sample="int16"), r"blob says int16 \(sample format 2, 16 bits\), the file's IFD says uint16"),
    (dict(sample="bfloat16"), r"blob says bfloat16 \(sample format 102, 16 bits\)"),
    (dict(sample="uint8"), r"blob says uint8 \(sample format 1, 8 bits\), the file's IFD says uint16 \(sample format 1, 16"),
    (dict(frame_unit=FrameUnit.CELL), r"blob frame_unit is cell, the file's TileOffsets say tile"),
])
def test_every_field_the_head_states_must_agree(scene, lie, says):
    path, blob = scene
    with pytest.raises(RumiFormatError, match=f"blob.matches-file: {says}"):
        check_blob_against_ifd_head(_lying(blob, **lie), *_head(path))
    check_blob_against_ifd_head(Header.from_bytes(blob), *_head(path))


def test_byte_counts_are_checked_where_the_head_holds_them(tmp_path):
    """With one or two frames TileByteCounts fits its entry, so the head states the counts."""
    path = tmp_path / "two.rumi"
    blob = xarray_rumi.write(path, VALUES[:, :16, :16], tile_size=16, compression="portable", write_header=False)
    header = Header.from_bytes(blob)
    assert header.frame_count == 2
    wrong = Header.from_byte_counts(header.grid, header.sample_type, header.byte_counts()[::-1] + [1, 0])
    with pytest.raises(RumiFormatError, match=r"blob.matches-file: blob says frame byte counts .* \(TileByteCounts\)"):
        check_blob_against_ifd_head(wrong, *_head(path))


def test_a_file_that_is_no_rumi_file_is_named_by_its_own_rule(scene, tmp_path):
    _, blob = scene
    other = tmp_path / "other.rumi"
    other.write_bytes(b"MM" + bytes(len(scene[0].read_bytes())))  # as long as the file the blob is for
    with pytest.raises(RumiFormatError, match="file-profile.little-endian"):
        xr.open_dataset(other, engine="rumi", header=blob, georeferencing=False).band_data.values


def test_threads_meeting_an_unchecked_blob_together_make_one_head_request(http_server, no_read_ahead):
    blob = xarray_rumi.write(f"{http_server.root}/scene.rumi", VALUES, tile_size=16, write_header=False)
    da = xr.open_dataset(f"{http_server.url}/scene.rumi", engine="rumi", header=blob,
                         georeferencing=False).band_data
    header = Header.from_bytes(blob)
    barrier, results = threading.Barrier(8), {}

    def read_frame(k: int) -> None:
        bands, rows, cols = header.grid.frame_window(k)
        barrier.wait()
        results[k] = da[bands, rows, cols].values

    threads = [threading.Thread(target=read_frame, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == list(range(8))  # a thread that raised would leave its frame out, silently
    for k, values in results.items():
        np.testing.assert_array_equal(values, VALUES[header.grid.frame_window(k)])
    ranges = [r.range for r in http_server.get_requests()]
    # one frame each; the IFD head once, in one thread's request with its frame (xarray_rumi.io.engine)
    assert [r[0] for r in ranges].count(0) == 1 and len(ranges) == 8


def test_a_lying_blob_met_by_many_threads_is_refused_by_each(scene):
    path, blob = scene
    lying = Header.from_bytes(blob[:21] + bytes([3]) + blob[22:])  # float16
    da = xr.open_dataset(path, engine="rumi", header=lying.to_bytes(), georeferencing=False).band_data
    header = lying
    barrier, errors = threading.Barrier(4), []

    def read_frame(k: int) -> None:
        barrier.wait()
        try:
            da[header.grid.frame_window(k)].values
        except RumiFormatError as exc:
            errors.append(exc.rule)

    threads = [threading.Thread(target=read_frame, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == ["blob.matches-file"] * 4
