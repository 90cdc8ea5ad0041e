"""Many threads and processes reading the same file and the same blob at once.

Every reader gets the exact values: decoding keeps no shared mutable state
(``geozl.decompress`` is a pure function of the frame; compression contexts
are per thread), one ``Header`` object is safe to share, including its lazily
built offsets, and worker processes open the file themselves.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest
import xarray as xr
from xarray.core import indexing

import xarray_rumi
from xarray_rumi.dataset.engine import RumiBackendArray
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.frames.codec import decode_frame, encode_frame

THREADS = 8
ROUNDS = 6
SHAPE = (3, 150, 130)


def _values() -> np.ndarray:
    rng = np.random.default_rng(21)
    y, x = np.mgrid[0:SHAPE[1], 0:SHAPE[2]]
    smooth = (1000 + 5 * y + 3 * x)[None] * np.arange(1, SHAPE[0] + 1)[:, None, None]
    return (smooth + rng.integers(0, 50, SHAPE)).astype(np.uint16)


VALUES = _values()


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    path = tmp_path_factory.mktemp("concurrent") / "scene.rumi"
    blob = xarray_rumi.write(path, VALUES, tile_size=32, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    return path, blob


def _windows(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        b0 = int(rng.integers(0, SHAPE[0]))
        y0, x0 = int(rng.integers(0, SHAPE[1] - 1)), int(rng.integers(0, SHAPE[2] - 1))
        yield (slice(b0, int(rng.integers(b0 + 1, SHAPE[0] + 1))),
               slice(y0, int(rng.integers(y0 + 1, SHAPE[1] + 1))), slice(x0, int(rng.integers(x0 + 1, SHAPE[2] + 1))))


def _together(work, count: int = THREADS) -> list:
    """``work(i)`` on ``count`` threads released at the same instant."""
    start = threading.Barrier(count)

    def run(i):
        start.wait()
        return work(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def test_threads_reading_one_file_through_one_blob_and_one_open_image(scene):
    path, blob = scene
    shared_image = xarray_rumi.open_image(path, blob)
    shared_array = RumiBackendArray(shared_image)

    def work(i):
        for window in _windows(i, ROUNDS):
            expected = VALUES[window]
            np.testing.assert_array_equal(shared_image.read(*window), expected)  # one object, all threads
            np.testing.assert_array_equal(shared_array[indexing.BasicIndexer(window)], expected)
            np.testing.assert_array_equal(xarray_rumi.open_image(path, blob).read(*window), expected)  # own object
        return True

    assert all(_together(work))


def test_threads_sharing_a_fresh_header_build_its_offsets_once_correctly(scene):
    _, blob = scene
    reference = Header.from_bytes(blob)
    expected = [reference.offset(k) for k in range(reference.frame_count + 1)]
    for _ in range(ROUNDS):
        header = Header.from_bytes(blob)  # offsets not built yet: every thread races to build them
        results = _together(lambda i: [header.offset(k) for k in range(header.frame_count + 1)])
        assert all(r == expected for r in results)


def test_threads_decoding_different_types_at_once_share_no_decoder_state():
    rng = np.random.default_rng(4)
    cases = []
    for name, dtype in (("uint8", np.uint8), ("int16", np.int16), ("float32", np.float32), ("uint16", np.uint16)):
        values = (rng.standard_normal((2, 40, 40)) * 100).astype(dtype)
        for recipe in ("id>zstd", "delta_1d>zstd", "planar>zigzag>zstd" if name != "float32" else "id>field_lz"):
            cases.append((encode_frame(sample_type_from_name(name).encode(values), recipe),
                          sample_type_from_name(name), values))

    def work(i):
        for k in range(len(cases) * 3):
            frame, sample, values = cases[(i + k) % len(cases)]
            np.testing.assert_array_equal(decode_frame(frame, sample, values.shape), values)
        return True

    assert all(_together(work))


def test_threads_writing_at_once_write_the_same_bytes_as_one_thread(tmp_path):
    """Compression contexts are per thread: concurrent writers do not disturb one another."""
    arrays = [np.roll(VALUES, i, axis=2) for i in range(4)]
    for i, array in enumerate(arrays):
        xarray_rumi.write(tmp_path / f"alone{i}.rumi", array, tile_size=32, write_header=False)
    _together(lambda i: xarray_rumi.write(tmp_path / f"together{i}.rumi", arrays[i], tile_size=32,
                                          write_header=False), count=4)
    for i in range(4):
        assert (tmp_path / f"together{i}.rumi").read_bytes() == (tmp_path / f"alone{i}.rumi").read_bytes()


def _read_in_a_process(path: str, blob: bytes, seed: int) -> bool:
    ds = xr.open_dataset(path, engine="rumi", header=blob)
    for window in _windows(seed, ROUNDS):
        np.testing.assert_array_equal(ds.band_data[window].values, VALUES[window])
    with ThreadPoolExecutor(4) as pool:  # and threads inside each process
        images = [xarray_rumi.open_image(path, blob) for _ in range(4)]
        assert all(np.array_equal(v, VALUES) for v in pool.map(lambda image: image.read(), images))
    return True


def test_processes_reading_one_file_through_one_blob(scene):
    path, blob = scene
    context = multiprocessing.get_context("spawn")  # fresh interpreters: nothing inherited from this one
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        assert all(pool.map(_read_in_a_process, [str(path)] * 4, [blob] * 4, range(4)))
