"""Read-ahead of remote whole-frame reads (:mod:`xarray_rumi.reading.readahead`), counted on a Range server.

A ``chunks={}`` compute of a remote file reads its frames in few requests;
tasks meeting a fetch in flight wait for it; the cache keeps to the file's
version, to its bytes bound, to its process; local reads never touch it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.grid import FrameGrid
from xarray_rumi.reading import image as image_module

# The module the reader uses: pytest's doctest collection (--import-mode=importlib) may import
# another copy of xarray_rumi/reading/readahead.py under the same name.
readahead = image_module.readahead
ReadAhead = readahead.ReadAhead

SHAPE, TILE = (2, 256, 256), 32  # 8 x 8 positions: 128 tile frames, 64 cell frames


def _values(shape=SHAPE, seed=0):
    y, x = np.mgrid[0:shape[1], 0:shape[2]]
    noise = np.random.default_rng(seed).integers(0, 50, shape)
    return (np.stack([y * 3 + x * (b + 1) for b in range(shape[0])]) + noise).astype("uint16")


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch):
    monkeypatch.setattr(readahead, "shared", ReadAhead())


def held(ahead) -> int:
    """Frames read ahead and not yet taken."""
    return len(ahead._cached)


def settled(ahead) -> None:
    """Wait for whole-image read-aheads in flight (on threads of their own) to end."""
    for _ in range(10_000):
        if not ahead._reserved:
            return
        threading.Event().wait(0.001)
    raise AssertionError("a whole-image read-ahead never ended")


@pytest.fixture(params=["tile", "cell", "tile-one-band"])
def served(request, http_server):
    """``(server, url, blob, values)``: 2 bands in tile or cell frames, or one band in tile frames."""
    values = _values((1, *SHAPE[1:])) if request.param == "tile-one-band" else _values()
    unit = request.param.split("-")[0]
    blob = xarray_rumi.write(f"{http_server.root}/scene.rumi", values, tile_size=TILE, frame_unit=unit)
    return http_server, f"{http_server.url}/scene.rumi", blob, values


def _gets(server):
    return [r for r in server.requests if r.method == "GET"]


def _assert_no_frame_twice(gets):
    # The request that checks the blob starts at byte 0 and may read through frames, as the engine merges.
    ranges = sorted(r.range for r in gets if r.range[0] != 0)
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))


@pytest.mark.parametrize("workers", [1, 2, 16])
def test_a_chunks_per_frame_read_of_a_remote_file_asks_for_each_frame_once_in_few_requests(served, workers):
    server, url, blob, values = served
    data = xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False, chunks={}).band_data.data
    frames, grid = data.npartitions, xarray_rumi.open_image(url, header=blob, georeferencing=False).grid
    server.requests.clear()
    np.testing.assert_array_equal(data.compute(scheduler="threads", num_workers=workers), values)
    gets = _gets(server)
    _assert_no_frame_twice(gets)
    # The image fits in the cache: read ahead whole, in the file's order, its requests merge even
    # where a band's frames lie apart (tile frames of 2 bands).  Without: a GET per frame.  Besides:
    # the lone frames before a sweep is seen (each worker's first ones may all be: with 16 workers, 12 GETs of
    # 64 frames were seen on CI), and the blob's check.
    assert len(gets) <= frames // 8 + (workers if workers > 2 else 0)
    assert held(readahead.shared) == 0  # every frame read ahead was taken by its task


def test_a_whole_image_read_ahead_sends_requests_larger_than_the_engines(http_server):
    values = np.random.default_rng(0).integers(0, 2**16, (1, 2048, 2048), dtype="uint16")  # 8 MiB, as noise
    blob = xarray_rumi.write(f"{http_server.root}/noise.rumi", values, tile_size=256)
    url = f"{http_server.url}/noise.rumi"
    data = xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False, chunks={}).band_data.data
    http_server.requests.clear()
    np.testing.assert_array_equal(data.compute(scheduler="threads", num_workers=2), values)
    sizes = sorted(r.range[1] - r.range[0] for r in _gets(http_server))
    # the engine's requests hold at most MAX_REQUEST; a whole image's runs go in requests of their own
    assert readahead.MAX_REQUEST < sizes[-1] <= readahead.WHOLE_REQUEST
    # besides the runs: the first frame and the blob's head, a lone frame, the first run cut short
    assert len(sizes) <= 3 + 1 + -(-values.nbytes // readahead.WHOLE_REQUEST)


def test_tasks_meeting_a_fetch_in_flight_wait_for_it_and_send_nothing():
    grid = FrameGrid(64, 16, 16, 16, 1)  # one band, a row of 4 frames
    ahead, sent, release = ReadAhead(), [], threading.Event()

    def fetch(frames):
        sent.append(frames)
        if 2 in frames:
            release.wait(10)
        return [b"frame %d" % k for k in frames]

    for k in (0, 1):
        ahead.take(b"key", k, grid, lambda k: 100, fetch)
    got = {}
    sweeping = threading.Thread(target=lambda: got.setdefault(2, ahead.take(b"key", 2, grid, lambda k: 100, fetch)))
    sweeping.start()
    while len(sent) < 3:  # the sweep's fetch of frames 2 and 3 is in flight
        threading.Event().wait(0.001)
    waiting = threading.Thread(target=lambda: got.setdefault(3, ahead.take(b"key", 3, grid, lambda k: 100, fetch)))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # waits for the fetch in flight
    release.set()
    sweeping.join(10)
    waiting.join(10)
    assert got == {2: b"frame 2", 3: b"frame 3"} and sent == [[0], [1], [2, 3]]
    assert held(ahead) == 0


def test_concurrent_tasks_ask_for_each_frame_once(served):
    server, url, blob, values = served
    server.latency = 0.02  # tasks pile up on fetches in flight
    data = xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False, chunks={}).band_data.data
    server.requests.clear()
    np.testing.assert_array_equal(data.compute(scheduler="threads", num_workers=16), values)
    _assert_no_frame_twice(_gets(server))


def _sweep_one_row(image, row=0):
    """Whole-frame reads of band 0's frame row ``row`` from its end: the sweep reads the row's start ahead."""
    grid, out = image.grid, {}
    for column in (grid.tiles_across - 1, grid.tiles_across - 2, grid.tiles_across - 3):
        rows, cols = range(row * TILE, (row + 1) * TILE), range(column * TILE, (column + 1) * TILE)
        out[column] = image.read_window(range(0, 1), rows, cols)
    return out


def test_the_cache_never_gives_bytes_of_a_replaced_file(http_server):
    values = _values((1, 64, 256))
    path = f"{http_server.root}/scene.rumi"
    blob = xarray_rumi.write(path, values, tile_size=TILE)  # one band, a row of 8 frames
    url = f"{http_server.url}/scene.rumi"
    _sweep_one_row(xarray_rumi.open_image(url, header=blob, georeferencing=False))
    settled(readahead.shared)
    assert held(readahead.shared) == 13  # the whole image read ahead: frame 0 among them
    # The same file, frame 0 damaged in place: the same blob, another version (ETag).
    image = xarray_rumi.open_image(url, header=blob, georeferencing=False)
    start, stop = image.frame_range(0)
    with open(path, "r+b") as f:
        f.seek(start + (stop - start) // 2)
        f.write(b"\xff" * 8)
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    replaced = xarray_rumi.open_image(url, header=blob, georeferencing=False)
    with pytest.raises(RumiFormatError):
        replaced.read(rows=slice(0, TILE), cols=slice(0, TILE))  # the new bytes, checked: never frame 0 as it was


def test_over_a_server_without_etags_a_file_replaced_at_its_size_never_gets_old_bytes(tmp_path):
    from servers import RangeServer

    values = np.random.default_rng(0).integers(0, 200, (1, 256, 256), dtype="uint8")  # noise: frames of one size
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, values, tile_size=TILE, compression="portable")
    flipped = values[:, :, ::-1].copy()
    assert xarray_rumi.write(tmp_path / "new.rumi", flipped, tile_size=TILE, compression="portable") == blob
    with RangeServer(str(tmp_path), etags=False) as server:
        url = f"{server.url}/scene.rumi"
        opened = xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False, chunks={})
        opened.band_data[:, :64].compute(scheduler="threads", num_workers=2)  # a part: frames left read ahead
        os.replace(tmp_path / "new.rumi", path)  # the same size and blob: only the pixels differ
        again = xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False, chunks={})
        np.testing.assert_array_equal(again.band_data.compute(scheduler="threads", num_workers=2), flipped)


def test_the_cache_holds_no_more_than_its_bytes_bound():
    grid = FrameGrid(160, 16, 16, 16, 1)  # one band, a row of 10 frames
    ahead = ReadAhead(max_bytes=250)
    sent = []

    def fetch(frames):
        sent.append(frames)
        return [bytes(100) for _ in frames]

    for k in (9, 8, 7):
        ahead.take(b"key", k, grid, lambda k: 100, fetch)
    assert sent[-1] == [7, 6, 5, 4, 3, 2, 1, 0]  # 700 bytes read ahead ...
    assert ahead._bytes == 200 and held(ahead) == 2  # ... the oldest dropped: 1 and 0 kept
    ahead.take(b"key", 6, grid, lambda k: 100, fetch)
    assert sent[-1][0] == 6  # a dropped frame is fetched again by its task


def test_a_read_ahead_along_a_band_stays_in_its_bytes_and_its_row():
    grid = FrameGrid(160, 32, 16, 16, 1)  # one band, 2 rows of 10 frames
    for bound, frames, read_ahead in ((350, (19, 18, 17), [17, 16, 15, 14]),  # 3 frames of 100 bytes
                                      (10**6, (14, 13, 12), [12, 11, 10])):  # entered mid-row: the row's start
        sent, ahead = [], ReadAhead(read_ahead_bytes=bound)
        for k in frames:
            ahead.take(b"key", k, grid, lambda k: 100, _fetching(sent))
        assert sent[-1] == read_ahead


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="this platform cannot fork")
def test_a_forked_child_starts_with_an_empty_cache():
    grid = FrameGrid(64, 16, 16, 16, 1)
    for k in (3, 2, 1):
        readahead.shared.take(b"fork", k, grid, lambda k: 10, lambda frames: [bytes(10) for _ in frames])
    assert held(readahead.shared) == 1
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe(duplex=False)
    process = context.Process(target=lambda: theirs.send((held(readahead.shared), readahead.shared._bytes)))
    process.start()
    assert ours.poll(60)
    assert ours.recv() == (0, 0)
    process.join(60)
    assert held(readahead.shared) == 1  # the parent's are its own


def test_local_reads_send_nothing_through_the_read_ahead(tmp_path, monkeypatch):
    values = _values()
    blob = xarray_rumi.write(tmp_path / "scene.rumi", values, tile_size=TILE)

    def refuse(*args, **kwargs):
        raise AssertionError("a local read went through the read-ahead")

    monkeypatch.setattr(readahead.shared, "take", refuse)
    ds = xr.open_dataset(tmp_path / "scene.rumi", engine="rumi", header=blob, georeferencing=False, chunks={})
    np.testing.assert_array_equal(ds.band_data.compute(scheduler="threads", num_workers=2).values, values)
    assert held(readahead.shared) == 0


def test_a_sweep_over_whole_rows_reads_on_before_its_frames_run_out():
    """Half through a read-ahead over whole rows, the task taking the marked frame fetches the next span."""
    grid = FrameGrid(64, 48, 16, 16, 1)  # one band, 3 rows of 4 frames
    ahead, sent = ReadAhead(read_ahead_bytes=400), []

    def fetch(frames):
        sent.append(frames)
        return [b"%d" % k for k in frames]

    got = [ahead.take(b"key", k, grid, lambda k: 100, fetch) for k in range(11, -1, -1)]
    assert got == [b"%d" % k for k in range(11, -1, -1)]
    # lone frames, the rest of the row, then whole rows: frame 4 (half through 6-3) fetched 2-0
    assert sent == [[11], [10], [9, 8], [7, 6, 5, 4, 3], [2, 1, 0]]
    assert held(ahead) == 0


MIB = readahead.MAX_REQUEST // 2  # a frame of half a merged request


def _fetching(sent):
    def fetch(frames):
        sent.append(frames)
        return [b"%d" % k for k in frames]
    return fetch


def _fetching_runs(sent, arrive=None):
    """A fetch as read_frame's: a whole image's runs handed on one by one (``arrive(run)`` before each)."""
    def fetch(frames, on_ready=None):
        sent.append(frames)
        if on_ready is None:
            return [b"%d" % k for k in frames]
        for run in frames:
            if arrive is not None:
                arrive(run)
            on_ready(run, [b"%d" % k for k in run])
    return fetch


def test_an_image_that_fits_in_the_cache_is_read_ahead_whole_in_runs_of_neighbours():
    grid = FrameGrid(128, 16, 16, 16, 2)  # 2 bands, a row of 8 positions: frame = 2 * position + band
    ahead, sent = ReadAhead(), []
    take = lambda k: ahead.take(b"key", k, grid, lambda k: MIB, _fetching_runs(sent), 16 * MIB)  # noqa: E731
    for k in (15, 13, 11):  # band 1 from its end: a sweep at frame 11
        take(k)
    # Every frame not asked for yet, in one fetch: the sweep's next frames first (its task waits for
    # them), then the file's neighbours in runs of WHOLE_REQUEST bytes (12 and 14 lie apart: 13 was read).
    first, whole = readahead.FIRST_REQUEST // MIB, readahead.WHOLE_REQUEST // MIB
    assert (first, whole) == (2, 4)
    assert sent == [[15], [13], [[10, 11], [0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [12], [14]]]
    rest = (9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0)
    assert [take(k) for k in rest] == [b"%d" % k for k in rest]
    assert len(sent) == 3 and held(ahead) == 0 and ahead._reserved == 0


def test_a_frame_of_a_whole_image_read_ahead_is_taken_as_its_request_arrives():
    grid = FrameGrid(128, 16, 16, 16, 2)
    ahead, sent, later = ReadAhead(), [], threading.Event()
    # every run after the first waits: the first's frames must reach their tasks meanwhile
    fetch = _fetching_runs(sent, arrive=lambda run: run[0] == 10 or later.wait(10))
    take = lambda k: ahead.take(b"key", k, grid, lambda k: MIB, fetch, 16 * MIB)  # noqa: E731
    got = {k: take(k) for k in (15, 13)}
    tasks = {k: threading.Thread(target=lambda k=k: got.setdefault(k, take(k))) for k in (11, 10, 9)}
    tasks[11].start()  # sees the sweep: fetches the whole image, its first run (frames 10 and 11) first
    while len(sent) < 3:
        threading.Event().wait(0.001)
    tasks[10].start()
    tasks[10].join(5)
    assert got[10] == b"10"  # taken while the fetch still waits for its other requests
    tasks[9].start()
    tasks[9].join(0.2)
    assert tasks[9].is_alive() and 9 not in got  # frame 9 is in a run not yet arrived
    later.set()
    for task in tasks.values():
        task.join(10)
    assert got == {15: b"15", 13: b"13", 11: b"11", 10: b"10", 9: b"9"} and len(sent) == 3


def test_whole_image_read_aheads_in_flight_together_stay_within_the_cache():
    grid = FrameGrid(128, 16, 16, 16, 2)  # 16 frames of 1 MiB an image
    ahead, sent, release = ReadAhead(max_bytes=24 * MIB), [], threading.Event()
    fetch = _fetching_runs(sent, arrive=lambda run: release.wait(10))
    take = lambda image, k: ahead.take(image, k, grid, lambda k: MIB, fetch, 16 * MIB)  # noqa: E731
    for k in (15, 13):
        take(b"a", k)
    first = threading.Thread(target=take, args=(b"a", 11))  # starts image a's whole read-ahead
    first.start()
    while ahead._reserved == 0:
        threading.Event().wait(0.001)
    assert ahead._reserved == 14 * MIB  # a's frames in flight
    for k in (15, 13, 11):  # image b: no room beside a's 14 MiB, so along its band
        take(b"b", k)
    assert sent[-1] == [11, 9, 7, 5, 3, 1]  # the rest of band 1's row (of b)
    release.set()
    first.join(10)
    assert ahead._reserved == 0 and ahead._bytes <= 24 * MIB


def test_a_whole_image_read_ahead_that_fails_leaves_each_task_its_own_fetch():
    grid = FrameGrid(128, 16, 16, 16, 2)
    ahead, sent = ReadAhead(), []

    def fetch(frames, on_ready=None):
        sent.append(frames)
        if on_ready is not None:
            raise OSError("the read-ahead's request failed")
        return [b"%d" % k for k in frames]

    got = [ahead.take(b"key", k, grid, lambda k: MIB, fetch, 16 * MIB) for k in (15, 13, 11, 9, 7)]
    assert got == [b"15", b"13", b"11", b"9", b"7"]
    # the whole fetch, frame 11 alone, then along the band: an image is read ahead whole once, failing or not
    assert sent[2:] == [sent[2], [11], [9, 7, 5, 3, 1]] and isinstance(sent[2][0], list)
    assert ahead._reserved == 0 and not ahead._pending


def test_an_image_larger_than_the_cache_is_read_ahead_along_the_band():
    grid = FrameGrid(64, 16, 16, 16, 2)
    ahead, sent = ReadAhead(max_bytes=4 * MIB), []
    for k in (7, 5, 3):
        ahead.take(b"key", k, grid, lambda k: MIB, _fetching(sent), 8 * MIB)
    assert sent == [[7], [5], [3, 1]]  # the rest of band 1's row, no other band


def test_a_sweep_in_the_files_order_is_read_ahead():
    grid = FrameGrid(64, 16, 16, 16, 2)
    ahead, sent = ReadAhead(), []
    for k in (0, 1, 2):  # every band of a position, then the next: as a reduction over bands asks
        ahead.take(b"key", k, grid, lambda k: 10, _fetching_runs(sent), 80)
    assert sent == [[0], [1], [[2, 3, 4, 5, 6, 7]]]
