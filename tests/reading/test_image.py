"""The one reader of a rumi image's frames: ``RumiImage`` (its line, windows, points) and ``decode_all``.

Windows and points are read through the reader itself here; the engine's
translation of xarray's keys into them is in ``tests/dataset/test_engine.py``,
and what the reader asks a server for in ``tests/reading/test_image_requests.py``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _rumi_bytes import make, ramp
from backend_samples import sample_values

import xarray_rumi
import xarray_rumi.reading.image as reader
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.reading.image import RumiImage, read_windows

SHAPE = (3, 37, 45)  # 3 x 3 grid positions of 16 px with cut edges (5 rows, 13 columns)
TILE = 16


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """``{(dtype, unit): (path, blob, values)}``: random values on a grid of 16 px frames with cut edges."""
    root = tmp_path_factory.mktemp("image")
    out = {}
    for seed, (dtype, unit) in enumerate([("float64", "tile"), ("uint16", "tile"), ("uint16", "cell")]):
        values = sample_values(sample_type_from_name(dtype), SHAPE, seed)
        path = root / f"{dtype}-{unit}.rumi"
        blob = xarray_rumi.write(path, values, tile_size=TILE, frame_unit=unit)
        out[dtype, unit] = (path, blob, values)
    return out


def test_an_opened_image_shows_itself_in_one_readable_line(tmp_path):
    path = str(tmp_path / "a.rumi")
    blob = xarray_rumi.write(path, np.zeros((2, 20, 30), "uint16"), tile_size=16, crs=32633,
                             transform=(10, 0, 5e5, 0, -10, 6e6))
    shown = repr(xarray_rumi.open_image(path, blob))
    assert shown == (f"<RumiImage {path}: 2 bands x 20 rows x 30 columns, uint16, 8 frames (tile, 16 x 16 px), "
                     "EPSG:32633>")
    cint = str(tmp_path / "c.rumi")
    xarray_rumi.write(cint, np.zeros((1, 4, 6), "complex64"), tile_size=(2, 3), frame_unit="cell",
                      sample_type="cint16")
    assert repr(xarray_rumi.open_image(cint)) == (
        f"<RumiImage {cint}: 1 band x 4 rows x 6 columns, cint16 (read as complex64), 4 frames (tile, 2 x 3 px), "
        "no CRS>")
    unread = repr(xarray_rumi.open_image(path, blob, georeferencing=False))
    assert unread.endswith("no CRS>") and "\n" not in unread and len(unread) < 200


@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_windows_read_only_what_they_ask(tmp_path, unit):
    values = ramp((4, 45, 38), "int32")
    path, blob, _ = make(tmp_path, values, tile_size=(16, 8), frame_unit=unit)
    image = xarray_rumi.open_image(path, blob)
    rng = np.random.default_rng(9)
    for _ in range(25):
        b0, y0, x0 = (int(rng.integers(0, n)) for n in values.shape)
        b1, y1, x1 = (int(rng.integers(lo + 1, n + 1)) for lo, n in zip((b0, y0, x0), values.shape))
        window = (slice(b0, b1), slice(y0, y1), slice(x0, x1))
        assert np.array_equal(image.read(*window), values[window])


def test_read_takes_contiguous_slices_only(written):
    path, blob, _ = written["uint16", "tile"]
    with pytest.raises(ValueError, match="contiguous slices"):
        xarray_rumi.open_image(path, blob).read(rows=slice(0, 10, 2))


@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_points_are_the_outer_selection_numpy_makes(written, unit):
    path, blob, values = written["uint16", unit]
    image = xarray_rumi.open_image(path, blob)
    bands, rows, cols = np.array([2, 0]), np.array([36, 0, 17, 17, 5]), np.array([44, 3, 20])
    np.testing.assert_array_equal(image.read_points(bands, rows, cols), values[np.ix_(bands, rows, cols)])
    assert image.read_points(bands, rows[:0], cols).shape == (2, 0, 3)


def test_the_same_window_of_several_images_is_one_array(tmp_path):
    images, stack = [], []
    for i in range(3):
        values = ramp((2, 20, 30), "uint16") + i
        blob = xarray_rumi.write(tmp_path / f"{i}.rumi", values, tile_size=8)
        images.append(xarray_rumi.open_image(tmp_path / f"{i}.rumi", blob))
        stack.append(values)
    window = (range(0, 2), range(5, 19), range(3, 30))
    np.testing.assert_array_equal(read_windows(images, *window), np.stack(stack)[:, 0:2, 5:19, 3:30])
    np.testing.assert_array_equal(read_windows(images[:1], *window), np.stack(stack)[:1, 0:2, 5:19, 3:30])


def test_multi_frame_windows_decode_in_parallel(written, monkeypatch):
    """A window over several frames decodes them on the calling thread and the idle cores."""
    path, blob, values = written["float64", "tile"]
    threads = []

    def recording(*args, **kwargs):
        threads.append(threading.get_ident())
        return decode(*args, **kwargs)

    decode = reader.decode_frame
    monkeypatch.setattr(reader, "decode_frame", recording)
    monkeypatch.setattr("xarray_rumi.runtime.threads.computing_threads", lambda: 2)
    image = xarray_rumi.open_image(path, blob)
    np.testing.assert_array_equal(image.read(rows=slice(10, 30), cols=slice(5, 40)), values[:, 10:30, 5:40])
    assert len(threads) == 3 * 2 * 3 and threading.get_ident() in threads
    threads.clear()
    np.testing.assert_array_equal(image.read(slice(0, 1), slice(0, 16), slice(0, 16)), values[:1, :16, :16])
    assert threads == [threading.get_ident()]  # one frame: no pool


def test_damaged_frame_in_a_multi_frame_window_raises(written, tmp_path):
    path, blob, values = written["uint16", "cell"]
    damaged = bytearray(path.read_bytes())
    start, stop = (int(v[0]) for v in Header.from_bytes(blob).ranges(np.array([4])))
    damaged[start + 20: stop - 4] = bytes(stop - 24 - start)
    (tmp_path / "d.rumi").write_bytes(bytes(damaged))
    image = xarray_rumi.open_image(tmp_path / "d.rumi", blob)
    with pytest.raises(RumiFormatError, match="frame"):
        image.read()
    np.testing.assert_array_equal(image.read(rows=slice(0, 16), cols=slice(0, 16)), values[:, :16, :16])


def test_batches_overlap_and_at_most_one_a_thread_is_held(written, monkeypatch):
    """A read over many batches never leaves a thread waiting at a batch's end, and holds one batch a thread at most.

    One frame per batch, two threads: the first frame's decoding waits until
    the other thread has started on the next batch, which happens only if
    that batch was fetched before the first finished; and each fetch happens
    only once every frame two batches back is decoded (the bound on
    compressed bytes held).
    """
    path, blob, values = written["uint16", "tile"]
    monkeypatch.setattr(reader, "DECODE_BATCH", 1)
    monkeypatch.setattr("xarray_rumi.runtime.threads.computing_threads", lambda: 2)
    decoded, decoded_at_fetch, started = [], [], []
    next_batch_started, first_waited, lock = threading.Event(), [], threading.Lock()

    def recording_decode(*args, **kwargs):
        with lock:
            first = not started
            started.append(1)
        if first:
            first_waited.append(next_batch_started.wait(timeout=10))
        else:
            next_batch_started.set()
        result = decode(*args, **kwargs)
        decoded.append(1)
        return result

    def recording_fetch(self, *args, **kwargs):
        decoded_at_fetch.append(len(decoded))
        return fetch(self, *args, **kwargs)

    decode, fetch = reader.decode_frame, RumiImage.fetch
    monkeypatch.setattr(reader, "decode_frame", recording_decode)
    monkeypatch.setattr(RumiImage, "fetch", recording_fetch)
    np.testing.assert_array_equal(xarray_rumi.open_image(path, blob).read(), values)
    assert first_waited == [True]
    assert len(decoded_at_fetch) == len(decoded) == 3 * 3 * 3
    assert all(done >= k - 1 for k, done in enumerate(decoded_at_fetch))


def test_a_blob_refused_at_the_first_read_names_the_file(tmp_path):
    # opened without a request, as each image of a remote Cube given blobs and georeferencing is:
    # the read that checks the blob must say which file it is not
    path = str(tmp_path / "a.rumi")
    xarray_rumi.write(path, np.arange(32 * 32, dtype="uint16").reshape(32, 32), tile_size=16)
    other = xarray_rumi.write(str(tmp_path / "b.rumi"), np.zeros((32, 32), "int16"), tile_size=16)
    image = xarray_rumi.open_image(path, header=other, georeferencing=False)
    with pytest.raises(RumiFormatError, match=r"^blob\.matches-file: blob says .*, in .*a\.rumi$"):
        image.read()
