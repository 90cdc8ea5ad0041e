"""Property tests of the whole open-and-read path on damaged files, blobs and frames.

For any damage the outcome is the exact written values, or RumiFormatError /
OSError: never another exception, never other values, and work bounded by
what is there: Python allocations (numpy's included) by the frames the grid
allows, reads by the frames and the size of the file.  The
blob decoder and the IFD parser alone are fuzzed in test_format_fuzz.py; this
goes through ``xr.open_dataset(..., engine="rumi")``, ``open_image(...).read()``
and the Zarr codec.
"""

from __future__ import annotations

import threading
import tracemalloc
from contextlib import contextmanager

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import Header
from xarray_rumi.io.source import ByteSource
from xarray_rumi.virtual.codec import OpenZLCodec

FUZZ = settings(max_examples=100, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
MEMORY_BOUND = 16 << 20  # bytes of Python/numpy allocation per read, beyond the output the blob claims

ARRAYS = [
    np.random.default_rng(1).integers(0, 5000, (2, 20, 24)).astype(np.uint16),
    (np.random.default_rng(2).standard_normal((3, 9, 9)) * 100).astype(np.float32),
    np.random.default_rng(3).integers(-100, 100, (1, 17, 5)).astype(np.int8),
]
WRITE_OPTIONS = [dict(tile_size=16), dict(tile_size=8, frame_unit="cell"), dict(tile_size=(8, 4), compression="portable")]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-read")
    out = []
    for i, (array, options) in enumerate(zip(ARRAYS, WRITE_OPTIONS)):
        path = root / f"{i}.rumi"
        blob = xarray_rumi.write(path, array, write_header=False, **options)
        out.append((path.read_bytes(), blob, array))
        for read in _readers(path, blob):  # first use imports and caches: not the reads' memory
            np.testing.assert_array_equal(read(), array)
    return out


@st.composite
def damaged(draw, data: bytes, frames_from: int):
    """``data`` with bit flips, overwritten bytes, a truncation or garbage appended.

    Half the damage lands in the frames (from ``frames_from``), where only the
    checksums and length checks stand between the reader and wrong values.
    """
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "flip", "byte", "zero-run", "truncate", "extend"]))
        low = draw(st.sampled_from([0, frames_from])) if len(out) > frames_from else 0
        if not out:
            break
        at = draw(st.integers(min(low, len(out) - 1), len(out) - 1))
        if kind == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            out[at] = draw(st.integers(0, 255))
        elif kind == "zero-run":
            out[at: at + draw(st.integers(1, 16))] = bytes(min(16, len(out) - at))[: len(out[at: at + 16])]
        elif kind == "truncate":
            del out[at:]
        else:
            out += draw(st.binary(min_size=1, max_size=32))
    return bytes(out)


@contextmanager
def _counting_reads():
    """Count every read of a file through :class:`ByteSource` while inside: ``[calls, bytes returned]``."""
    read, read_many, lock, totals = ByteSource.read, ByteSource.read_many, threading.Lock(), [0, 0]

    def count(data: list[bytes]) -> None:
        with lock:  # Dask's threads read too
            totals[0] += 1
            totals[1] += sum(map(len, data))

    def counted_read(self, *args, **kwargs):
        data = read(self, *args, **kwargs)
        count([data])
        return data

    def counted_read_many(self, *args, **kwargs):
        data = read_many(self, *args, **kwargs)
        count(data)
        return data

    ByteSource.read, ByteSource.read_many = counted_read, counted_read_many
    try:
        yield totals
    finally:
        ByteSource.read, ByteSource.read_many = read, read_many


def _bounded(read, claimed_bytes: int = 0, *, frames: int = 0, file_size: int = 0):
    """``read()``'s result, or None for an accepted error; checks memory and, for a file read, the reads.

    ``claimed_bytes`` is the size of the image a (damaged) blob claims: reading it
    whole allocates its output array, which is the caller's request, not a leak.
    ``frames`` (the most frames the file or its blob claims) and ``file_size``
    bound the reads: the IFD (or the blob check), then each frame once.  A reader
    that loops, retries or re-reads in proportion to anything else fails here
    (a count, not a time, so a loaded machine cannot make it fail).
    """
    tracemalloc.start()
    try:
        with _counting_reads() as reads:
            try:
                values = read()
                event("read")
            except (RumiFormatError, OSError) as exc:
                event(getattr(exc, "rule", type(exc).__name__))
                values = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < MEMORY_BOUND + 2 * claimed_bytes
    calls, returned = reads
    assert calls <= frames + 4, f"{calls} reads for at most {frames} frames"
    assert returned <= 2 * file_size + 512, f"{returned} bytes read from a file of {file_size}"
    return values


def _claimed_bytes(blob: bytes) -> int:
    try:
        header = Header.from_bytes(blob)
    except RumiFormatError:
        return 0
    bands, length, width = header.grid.shape
    return bands * length * width * np.dtype(header.sample_type.dtype).itemsize


def _claimed_frames(blob: bytes) -> int:
    try:
        return Header.from_bytes(blob).frame_count
    except RumiFormatError:
        return 0


def _readers(path, header):
    yield lambda: xr.open_dataset(path, engine="rumi", header=header).band_data.values
    yield lambda: xr.open_dataset(path, engine="rumi", header=header, chunks={}).band_data.values
    yield lambda: xarray_rumi.open_image(path, header).read()


@pytest.mark.parametrize("through", ["blob", "ifd"])
@FUZZ
@given(data=st.data())
def test_a_damaged_file_gives_exact_values_or_an_error(tmp_path, files, data, through):
    original, blob, expected = data.draw(st.sampled_from(files))
    path = tmp_path / "damaged.rumi"
    path.write_bytes(data.draw(damaged(original, Header.from_bytes(blob).base_frame_offset)))
    for read in _readers(path, blob if through == "blob" else None):
        values = _bounded(read, frames=_claimed_frames(blob), file_size=path.stat().st_size)
        if values is not None:
            np.testing.assert_array_equal(values, expected)


@FUZZ
@given(data=st.data())
def test_a_damaged_blob_with_a_sound_file_gives_exact_values_or_an_error(tmp_path, files, data):
    original, blob, expected = data.draw(st.sampled_from(files))
    path = tmp_path / "sound.rumi"
    path.write_bytes(original)
    bad_blob = data.draw(damaged(blob, 0))
    for read in _readers(path, bad_blob):
        values = _bounded(read, _claimed_bytes(bad_blob), file_size=len(original),
                          frames=max(_claimed_frames(blob), _claimed_frames(bad_blob)))
        if values is not None:
            np.testing.assert_array_equal(values, expected)
            assert values.dtype == expected.dtype


def _lying_about_the_sample_type(blob: bytes) -> bytes:
    lying = bytearray(blob)
    lying[21] = 3  # sample_format 3 (IEEE float): float16, two bytes like uint16
    assert Header.from_bytes(bytes(lying)).sample_type.name == "float16"
    return bytes(lying)


WINDOW = (0, slice(3, 9), slice(2, 5))  # six rows of one band, across two frames of the 16 px grid
# Every way of reading through a blob: checked at open (the georeferencing is read anyway),
# or, when the open reads nothing, on the first frame read.
LYING_READS = {
    "open": lambda path, blob: xr.open_dataset(path, engine="rumi", header=blob).band_data.values,
    "first-read": lambda path, blob: xr.open_dataset(path, engine="rumi", header=blob,
                                                     georeferencing=False).band_data.values,
    "first-read-window": lambda path, blob: xr.open_dataset(path, engine="rumi", header=blob, crs=4326,
                                                            transform=(1, 0, 0, 0, -1, 0)).band_data[WINDOW].values,
    "first-read-dask": lambda path, blob: xr.open_dataset(path, engine="rumi", header=blob, georeferencing=False,
                                                          chunks={}).band_data.values,
    "open_image": lambda path, blob: xarray_rumi.open_image(path, blob).read(),
    "open_image-first-read": lambda path, blob: xarray_rumi.open_image(path, blob, georeferencing=False).read(),
}


@pytest.mark.parametrize("how", LYING_READS)
def test_a_blob_naming_another_sample_type_of_the_same_width_is_refused(files, tmp_path, how):
    original, blob, expected = files[0]  # uint16
    path = tmp_path / "sound.rumi"
    path.write_bytes(original)
    with pytest.raises(RumiFormatError, match=r"blob.matches-file: blob says float16 \(sample format 3, 16 bits\), "
                       r"the file's IFD says uint16 \(sample format 1, 16 bits\)"):
        LYING_READS[how](path, _lying_about_the_sample_type(blob))
    read = LYING_READS[how](path, blob)  # the true blob still reads
    np.testing.assert_array_equal(read, expected[WINDOW] if how.endswith("window") else expected)


@pytest.mark.parametrize("how", ["open", "first-read"])
def test_the_sample_type_is_checked_for_five_bands_and_more_whose_sample_formats_lie_after_the_ifd(tmp_path, how):
    values = np.random.default_rng(4).integers(0, 5000, (13, 20, 24)).astype(np.uint16)
    path = tmp_path / "thirteen.rumi"
    blob = xarray_rumi.write(path, values, tile_size=16, write_header=False)
    with pytest.raises(RumiFormatError, match="blob.matches-file: blob says float16"):
        LYING_READS[how](path, _lying_about_the_sample_type(blob))
    np.testing.assert_array_equal(LYING_READS[how](path, blob), values)


def test_verify_false_trusts_the_blob(files, tmp_path):
    """The documented cost of verify=False: a lying blob is believed."""
    original, blob, expected = files[0]
    path = tmp_path / "sound.rumi"
    path.write_bytes(original)
    believed = xr.open_dataset(path, engine="rumi", header=_lying_about_the_sample_type(blob), georeferencing=False,
                               verify=False).band_data.values
    assert believed.dtype == np.float16 and believed.tobytes() == expected.tobytes()


def test_a_blob_claiming_a_huge_image_of_allowed_frames_is_refused_at_open(tmp_path):
    import struct

    # 4096 x 4096 positions of 512 x 512 uint16: 2**24 frames (= max_frames) of 512 KiB each, 8 TiB in all.
    claim = struct.pack("<IHIIHHHBBBIB", 0x45564F4C, 1, 4096 * 512, 4096 * 512, 512, 512, 1, 16, 1, 0, 100, 0)
    path = tmp_path / "claim.rumi"
    path.write_bytes(b"")
    with pytest.raises(RumiFormatError, match="blob.limits"):
        xr.open_dataset(path, engine="rumi", header=claim, georeferencing=False).band_data.values


@FUZZ
@given(data=st.data())
def test_the_codec_on_damaged_frames_gives_exact_chunks_or_an_error(files, data):
    original, blob, expected = data.draw(st.sampled_from(files[:1]))  # uint16, 16 x 16 tile frames
    header = Header.from_bytes(blob)
    k = data.draw(st.integers(0, header.frame_count - 1))
    frame = original[header.offset(k): header.offset(k + 1)]
    grid = header.grid
    bands, rows, cols = grid.frame_window(k)
    codec = OpenZLCodec(sample_type="uint16", chunk_shape=[1, 16, 16], image_shape=[grid.image_length, grid.image_width])
    chunk = _bounded(lambda: np.frombuffer(codec.decode(data.draw(damaged(frame, 0))), np.uint16).reshape(1, 16, 16))
    if chunk is not None:
        h, w = rows.stop - rows.start, cols.stop - cols.start
        np.testing.assert_array_equal(chunk[:, :h, :w], expected[bands, rows, cols])
