"""decode_frame(..., out=): frames decoded into the caller's array, straight into it where the layout allows.

Every test of ``out=`` that does not measure allocations runs twice: with
geozl's private decoder into caller memory, and with the fallback used where
that decoder is missing or unchecked (``geozl.decompress`` and a copy).
"""

from __future__ import annotations

import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import geozl
import numpy as np
import pytest

from xarray_rumi.errors import RumiFormatError
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.frames import codec as frames
from xarray_rumi.frames.codec import decode_frame, encode_frame

UINT16 = sample_type_from_name("uint16")


def _frame(values: np.ndarray, recipe: str = "delta_1d>zstd") -> bytes:
    return encode_frame(values, recipe)


def _values(shape=(1, 64, 48), seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 4000, shape, dtype=np.uint16)


def test_the_private_decoder_entry_point_is_found():
    # Without it out= still works (through a copy), but the no-copy path would silently vanish.
    assert frames._decoder is not None


@pytest.fixture(params=["into", "fallback"])
def decoder(request, monkeypatch):
    """Which path ``out=`` takes; under ``"fallback"`` every decode must go through ``geozl.decompress``."""
    calls = []
    if request.param == "fallback":
        monkeypatch.setattr(frames, "_decoder", None)
        real = geozl.decompress

        def counted(*args, **kwargs):
            calls.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(geozl, "decompress", counted)
    yield request.param
    if request.param == "fallback":
        assert calls, "the fallback was not taken"


def test_contiguous_out_is_written_in_place_and_returned(decoder):
    values = _values()
    out = np.zeros(values.shape, np.uint16)
    result = decode_frame(_frame(values), UINT16, values.shape, out=out)
    assert result is out
    np.testing.assert_array_equal(out, values)


def test_full_width_rows_of_a_larger_array_are_written_in_place(decoder):
    # A frame as wide as the image covers one contiguous block of the result.
    values = _values((1, 16, 48))
    image = np.full((1, 64, 48), 7, np.uint16)
    decode_frame(_frame(values), UINT16, values.shape, out=image[:, 16:32])
    np.testing.assert_array_equal(image[:, 16:32], values)
    assert (image[:, :16] == 7).all() and (image[:, 32:] == 7).all()


def test_a_strided_window_is_filled_through_a_copy_and_nothing_around_it_changes(decoder):
    values = _values((2, 20, 30))
    image = np.full((3, 40, 50), 9, np.uint16)
    target = image[1:3, 5:25, 10:40]
    assert not target.flags.c_contiguous
    decode_frame(_frame(values), UINT16, values.shape, out=target)
    np.testing.assert_array_equal(image[1:3, 5:25, 10:40], values)
    image[1:3, 5:25, 10:40] = 9
    assert (image == 9).all()


@pytest.mark.parametrize("strided", [False, True])
def test_decoding_into_out_allocates_no_frame_sized_buffer(strided):
    """In place, or through the scratch buffer a first strided target made and the next one reuses."""
    values = _values((1, 256, 256))
    frame = _frame(values)
    image = np.empty((1, 256, 512 if strided else 256), np.uint16)
    first, second = (image[:, :, :256], image[:, :, 256:]) if strided else (image, image)
    decode_frame(frame, UINT16, values.shape, out=first)  # loads everything once
    tracemalloc.start()
    try:
        decode_frame(frame, UINT16, values.shape, out=second)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < values.nbytes // 8
    np.testing.assert_array_equal(second, values)


def test_threads_decode_into_disjoint_parts_of_one_array(decoder):
    tiles = [_values((1, 64, 64), seed=k) for k in range(16)]
    encoded = [_frame(t, "planar>zigzag>zstd") for t in tiles]
    image = np.zeros((1, 256, 256), np.uint16)

    def place(k: int) -> None:
        row, col = divmod(k, 4)
        decode_frame(encoded[k], UINT16, (1, 64, 64), out=image[:, row * 64:(row + 1) * 64, col * 64:(col + 1) * 64])

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(place, range(16)))
    expected = np.block([[tiles[r * 4 + c][0] for c in range(4)] for r in range(4)])[None]
    np.testing.assert_array_equal(image, expected)


@pytest.mark.parametrize("name", ["cint16", "complex64", "bfloat16", "uint4", "bool", "float32", "int8"])
def test_out_gives_the_same_values_as_a_returned_frame(name, decoder):
    sample = sample_type_from_name(name)
    rng = np.random.default_rng(3)
    if name == "bool":
        values = rng.integers(0, 2, (2, 8, 12)).astype(bool)
    elif name in ("cint16", "complex64"):
        values = (rng.integers(-50, 50, (2, 8, 12)) + 1j * rng.integers(-50, 50, (2, 8, 12))).astype(sample.dtype)
    elif name == "uint4":
        values = rng.integers(0, 16, (2, 8, 12)).astype(np.uint8).astype(sample.dtype)
    else:
        values = rng.integers(-100, 100, (2, 8, 12)).astype(sample.dtype)
    frame = encode_frame(sample.encode(values), "id>zstd")
    returned = decode_frame(frame, sample, values.shape)
    for out in (np.zeros(values.shape, sample.dtype), np.zeros((2, 8, 20), sample.dtype)[:, :, 4:16]):
        decode_frame(frame, sample, values.shape, out=out)
        np.testing.assert_array_equal(out.astype(returned.dtype), returned)


def test_sub_byte_padding_bits_are_refused_when_decoding_in_place(decoder):
    uint4 = sample_type_from_name("uint4")
    frame = encode_frame(np.full((1, 4, 4), 0x1F, np.uint8), "id>zstd")
    with pytest.raises(RumiFormatError, match="frame.sub-byte"):
        decode_frame(frame, uint4, (1, 4, 4), out=np.zeros((1, 4, 4), uint4.dtype))


def test_a_frame_larger_than_its_place_is_refused_before_it_is_expanded(decoder):
    frame = _frame(_values((1, 64, 64)))
    out = np.full((1, 32, 64), 5, np.uint16)
    with pytest.raises(RumiFormatError, match="frame.decode.*above the 4096 allowed"):
        decode_frame(frame, UINT16, (1, 32, 64), out=out)
    assert (out == 5).all()


def test_a_frame_smaller_than_its_place_is_refused(decoder):
    frame = _frame(_values((1, 16, 64)))
    with pytest.raises(RumiFormatError, match="frame.length"):
        decode_frame(frame, UINT16, (1, 32, 64), out=np.empty((1, 32, 64), np.uint16))


def test_a_damaged_frame_raises_frame_decode_without_a_stack_trace(decoder):
    frame = bytearray(_frame(_values((1, 64, 64))))
    frame[len(frame) // 2] ^= 0xFF
    with pytest.raises(RumiFormatError, match="frame.decode") as info:
        decode_frame(bytes(frame), UINT16, (1, 64, 64), out=np.empty((1, 64, 64), np.uint16))
    assert "Stack Trace" not in str(info.value)


def test_a_damaged_frame_header_is_refused_with_out():
    with pytest.raises(RumiFormatError, match="frame.openzl"):
        decode_frame(b"\0" * 32, UINT16, (1, 4, 4), out=np.empty((1, 4, 4), np.uint16))


@pytest.mark.parametrize("out", [np.empty((1, 8, 9), np.uint16), np.empty((1, 8, 8), np.int16), [[0]]])
def test_an_out_of_the_wrong_shape_or_type_is_refused(out):
    frame = _frame(_values((1, 8, 8)))
    with pytest.raises(ValueError, match="out must be"):
        decode_frame(frame, UINT16, (1, 8, 8), out=out)


def test_a_read_only_out_is_refused():
    out = np.empty((1, 8, 8), np.uint16)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        decode_frame(_frame(_values((1, 8, 8))), UINT16, (1, 8, 8), out=out)


def test_an_unaligned_contiguous_out_goes_through_the_scratch_buffer(decoder):
    values = _values((1, 8, 8))
    backing = np.zeros(65, np.uint16)
    out = backing[1:].reshape(values.shape)  # 2 bytes past an 8-byte boundary
    assert out.flags.c_contiguous and out.ctypes.data % 8
    decode_frame(_frame(values), UINT16, values.shape, out=out)
    np.testing.assert_array_equal(out, values)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_decode_elements_reports_the_width_the_frame_records(dtype):
    values = np.arange(24, dtype=dtype).reshape(1, 4, 6)
    for recipe in ("id>zstd", "planar>zigzag>zstd"):
        raw, width = frames.decode_elements(encode_frame(values, recipe), values.nbytes)
        assert width == np.dtype(dtype).itemsize
        np.testing.assert_array_equal(raw.view(dtype).reshape(values.shape), values)


def test_decode_elements_is_bounded_and_refuses_damage():
    frame = encode_frame(_values(), "delta_1d>zstd")
    with pytest.raises(RumiFormatError, match="above the 100 allowed"):
        frames.decode_elements(frame, 100)
    damaged = bytearray(frame)
    damaged[len(damaged) // 2] ^= 0xFF
    with pytest.raises(RumiFormatError, match="frame.decode"):
        frames.decode_elements(bytes(damaged), 10**6)


def test_a_width_other_than_the_sample_types_is_refused_naming_both():
    with pytest.raises(RumiFormatError, match="2-byte elements, but sample type uint32 is stored as 4-byte"):
        frames.check_element_width(2, sample_type_from_name("uint32"))
    frames.check_element_width(4, sample_type_from_name("complex64"))   # stored as float32 pairs
    frames.check_element_width(2, sample_type_from_name("cint16"))


def test_a_thread_cache_keeps_entries_per_thread_and_drops_the_least_recently_used():
    cache = frames.ThreadCache(size=2)
    mine = cache.get("graph", lambda: ["this thread"])
    with ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(cache.get, "graph", lambda: ["another thread"]).result()
    assert theirs == ["another thread"] and cache.get("graph", None) is mine
    cache.get("second", lambda: 2)
    cache.get("graph", None)  # used again: "second" is now the least recently used
    cache.get("third", lambda: 3)
    assert cache.get("second", lambda: "built again") == "built again"
