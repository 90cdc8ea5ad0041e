"""Windows that cut frames (training chips): each cut frame is decoded into its thread's frame buffer.

A window at a random place takes only part of most frames it touches.  The
reader decodes such a frame into one buffer its thread keeps
(``runtime.scratch.scratch(FRAME, ...)``) and copies the wanted part out, instead of
decoding every frame into fresh memory: docs/benchmarks.md ("Training
chips") has what that saves.  These tests pin that the buffer is used, that
a result never shares it, that threads never share one, and that sample
types which do not decode in place still read right.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _rumi_bytes import ramp
from backend_samples import same_values, sample_values

import xarray_rumi
import xarray_rumi.reading.image as reader
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.runtime.scratch import FRAME, scratch

SHAPE = (2, 40, 44)
TILE = 16


@pytest.fixture
def one_thread(monkeypatch):
    """Every frame decoded on the calling thread, so its frame buffer is the one to look at."""
    monkeypatch.setattr("xarray_rumi.runtime.threads.computing_threads", lambda: 1)


@pytest.fixture
def image(tmp_path):
    values = ramp(SHAPE, "uint16")
    blob = xarray_rumi.write(tmp_path / "a.rumi", values, tile_size=TILE)
    return xarray_rumi.open_image(tmp_path / "a.rumi", blob), values


def recorded_outs(monkeypatch) -> list:
    """The ``out=`` of every frame decoded from now on (``None`` where the decoder allocated)."""
    outs = []
    decode = reader.decode_frame

    def recording(payload, sample, shape, **kwargs):
        outs.append(kwargs.get("out"))
        return decode(payload, sample, shape, **kwargs)

    monkeypatch.setattr(reader, "decode_frame", recording)
    return outs


def test_frames_a_window_cuts_are_decoded_into_the_threads_buffer(image, monkeypatch, one_thread):
    image, values = image
    outs = recorded_outs(monkeypatch)
    window = (slice(0, 2), slice(5, 37), slice(3, 19))  # cuts every frame it touches: 2 bands x 3 x 2 positions
    np.testing.assert_array_equal(image.read(*window), values[window])
    buffer = scratch(FRAME, (1, TILE, TILE), values.dtype)
    assert len(outs) == 12 and all(out is not None and np.shares_memory(out, buffer) for out in outs)


def test_frames_a_window_holds_whole_are_decoded_into_the_result(image, monkeypatch, one_thread):
    image, values = image
    outs = recorded_outs(monkeypatch)
    result = image.read(slice(0, 1), slice(0, 32), slice(0, 40))  # two whole frames, two cut
    np.testing.assert_array_equal(result, values[:1, :32, :40])
    whole = [out for out in outs if np.shares_memory(out, result)]
    cut = [out for out in outs if np.shares_memory(out, scratch(FRAME, (1, TILE, TILE), values.dtype))]
    assert len(outs) == 6 and len(whole) == 4 and len(cut) == 2


def test_points_are_decoded_into_the_threads_buffer(image, monkeypatch, one_thread):
    image, values = image
    outs = recorded_outs(monkeypatch)
    bands, rows, cols = np.array([1]), np.array([0, 39]), np.array([2, 43])
    np.testing.assert_array_equal(image.read_points(bands, rows, cols), values[np.ix_(bands, rows, cols)])
    buffer = scratch(FRAME, (1, TILE, TILE), values.dtype)
    assert len(outs) == 4 and all(np.shares_memory(out, buffer) for out in outs)


def test_a_result_never_shares_the_buffer(image, one_thread):
    image, values = image
    first = image.read(slice(0, 1), slice(2, 10), slice(2, 10))  # inside one frame
    points = image.read_points(np.array([0]), np.array([3]), np.array([4]))
    second = image.read(slice(1, 2), slice(20, 30), slice(30, 40))  # another frame, through the same buffer
    buffer = scratch(FRAME, (1, TILE, TILE), values.dtype)
    assert not any(np.shares_memory(result, buffer) for result in (first, points, second))
    np.testing.assert_array_equal(first, values[:1, 2:10, 2:10])
    np.testing.assert_array_equal(points, values[:1, 3:4, 4:5])


def test_threads_reading_at_once_each_use_their_own_buffer(image, monkeypatch):
    image, values = image
    monkeypatch.setattr("xarray_rumi.runtime.threads.computing_threads", lambda: 2)
    rng = np.random.default_rng(4)
    windows = [tuple(slice(a, a + n) for a, n in zip(rng.integers(0, [2, 30, 34]), (1, 10, 10))) for _ in range(200)]
    wrong, barrier = [], threading.Barrier(4)

    def read(part):
        barrier.wait()
        wrong.extend(w for w in part if not np.array_equal(image.read(*w), values[w]))

    threads = [threading.Thread(target=read, args=(windows[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_a_frame_over_the_bound_gets_memory_of_its_own(image, monkeypatch, one_thread):
    image, values = image
    monkeypatch.setattr("xarray_rumi.runtime.scratch.KEPT_BYTES", TILE * TILE)  # half a uint16 frame
    a, b = (scratch(FRAME, (1, TILE, TILE), values.dtype) for _ in range(2))
    assert not np.shares_memory(a, b)
    small = scratch(FRAME, (1, 4, 4), values.dtype)
    assert np.shares_memory(small, scratch(FRAME, (2, 2, 2), np.dtype("uint8")))
    window = (slice(0, 2), slice(5, 37), slice(3, 19))
    np.testing.assert_array_equal(image.read(*window), values[window])


@pytest.mark.parametrize("name", ["cint16", "cfloat16", "uint4", "bool", "bfloat16", "float64", "int8"])
@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_windows_that_cut_frames_read_every_sample_type(tmp_path, name, unit):
    """Types that widen (complex integers), pack below a byte or come from ml_dtypes are copied from the buffer."""
    sample = sample_type_from_name(name)
    values = sample_values(sample, SHAPE, seed=7)
    blob = xarray_rumi.write(tmp_path / "t.rumi", values, tile_size=TILE, frame_unit=unit, sample_type=name)
    image = xarray_rumi.open_image(tmp_path / "t.rumi", blob)
    rng = np.random.default_rng(3)
    for _ in range(8):
        y, x = (int(v) for v in rng.integers(0, [SHAPE[1] - 12, SHAPE[2] - 12]))
        window = (slice(None), slice(y, y + 12), slice(x, x + 12))
        assert same_values(image.read(*window), values[window])
    bands, rows, cols = np.array([1, 0]), np.array([39, 1]), np.array([0, 17, 43])
    assert same_values(image.read_points(bands, rows, cols), values[np.ix_(bands, rows, cols)])
