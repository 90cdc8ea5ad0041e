"""What the engine fetches, counted on a Range HTTP server started by the test.

With a blob and caller-supplied georeferencing, opening sends nothing; with a
blob alone, the 160 bytes of georeferencing and the 252-byte IFD head the blob
is checked against, in one batch; without one, one read of the IFD.  Both
take the file's size from their answer (``Content-Range``), to refuse a file
cut short, and its version (``ETag``), which later reads send as ``If-Match``.  Loading
asks for each frame's exact byte range, and a window (or ``.rio.clip_box``)
only for the frames inside it; the ranges one read asks for together go out as
the read engine's merged requests (:mod:`xarray_rumi.io.engine`: neighbours
and small gaps share a request), so on these small files a read is a request
or two.  A blob the open did not check is checked on the first read: its
IFD head is asked for beside the frames, once per process.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi.format.blob import Header
from xarray_rumi.format.head import ifd_head_ranges
from xarray_rumi.format.placement import base_frame_offset, georeferencing_offset
from xarray_rumi.io.engine import plan_requests, request_bytes

CRS, TRANSFORM = 32618, (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0)
SHAPE, TILE = (2, 100, 120), 32  # 4 x 4 grid positions, edges of 4 and 24 px
IFD_HEAD = (0, 252)  # what a blob is checked against: the BigTIFF header and the IFD


def _values():
    y, x = np.mgrid[0:SHAPE[1], 0:SHAPE[2]]
    noise = np.random.default_rng(1).integers(0, 50, SHAPE)
    return (np.stack([y * 7 + x, y * x]) + noise).astype("uint16")


@pytest.fixture(params=["tile", "cell"])
def served(request, http_server):
    """``(server, url, header, values)`` for a georeferenced image in both frame units."""
    values = _values()
    path = f"{http_server.root}/scene.rumi"
    blob = xarray_rumi.write(path, values, tile_size=TILE, frame_unit=request.param, crs=CRS, transform=TRANSFORM)
    return http_server, f"{http_server.url}/scene.rumi", Header.from_bytes(blob), values


def _open(url, header, **kwargs):
    return xr.open_dataset(url, engine="rumi", header=header.to_bytes(), crs=CRS, transform=TRANSFORM, **kwargs)


def _frame_ranges(header, indices):
    starts, stops = header.ranges(np.asarray(indices))
    return sorted(zip(starts.tolist(), stops.tolist()))


def _assert_frames_and_head(requests, header, indices, *, per_frame: bool):
    """``requests`` asked for the frames and the IFD head: what a first read through an unchecked blob asks for.

    One read asks for them together (``per_frame=False``); Dask tasks each ask for their frame
    (``per_frame=True``), and the one that checks the blob asks for the head with it.
    """
    got, frames = sorted(r.range for r in requests), _frame_ranges(header, indices)
    if not per_frame:
        # opened with crs=/transform=: the tags they are compared with ride along
        assert got == _merged(frames + ifd_head_ranges(header.grid, georeferencing=True), frames=frames)
        return
    head_and_frame, alone = got[0], got[1:]
    (checking,) = set(frames) - set(alone)
    assert len(got) == len(frames) and [head_and_frame] == _merged([IFD_HEAD, checking])


def _merged(ranges, *, frames=None):
    """The requests the read engine sends for ``ranges`` asked for together; a lazy read of ``frames`` spread."""
    starts, stops = zip(*ranges)
    spread = {} if frames is None else {"max_request": request_bytes(sum(b - a for a, b in frames))}
    return [(r.start, r.stop) for r in plan_requests(starts, stops, **spread)]


def test_blob_and_supplied_georeferencing_open_with_zero_requests(served):
    server, url, header, _ = served
    ds = _open(url, header, chunks={})
    undefined = xr.open_dataset(url, engine="rumi", header=header.to_bytes(), georeferencing=False)
    assert server.requests == []  # not a GET, not a HEAD
    assert ds.rio.crs.to_epsg() == CRS and tuple(ds.rio.transform())[:6] == TRANSFORM
    assert undefined.rio.crs is None


def test_blob_alone_reads_the_georeferencing_block_and_the_ifd_head_together(served):
    server, url, header, values = served
    ds = xr.open_dataset(url, engine="rumi", header=header.to_bytes())
    start = georeferencing_offset(header.grid)
    assert [r.range for r in server.get_requests()] == _merged([IFD_HEAD, (start, start + 160)])  # one GET
    assert start + 160 == base_frame_offset(header.grid)
    assert ds.rio.crs.to_epsg() == CRS and tuple(ds.rio.transform())[:6] == TRANSFORM
    server.requests.clear()
    np.testing.assert_array_equal(ds.band_data[:, :32, :32].values, values[:, :32, :32])
    frames = _frame_ranges(header, _window_frames(header, slice(None), slice(0, 32), slice(0, 32)))
    assert sorted(r.range for r in server.get_requests()) == _merged(frames, frames=frames)  # checked at open


def test_blob_alone_with_verify_false_reads_only_the_georeferencing_block(served):
    server, url, header, _ = served
    ds = xr.open_dataset(url, engine="rumi", header=header.to_bytes(), verify=False)
    start = georeferencing_offset(header.grid)
    assert [(r.method, r.range) for r in server.requests] == [("GET", (start, start + 160))]   # no HEAD: trusted
    assert ds.rio.crs.to_epsg() == CRS


def test_an_open_that_reads_takes_the_size_from_its_answer_with_no_head(served):
    """The ranged GET's ``Content-Range`` states the size the truncation check needs, its ``ETag`` the version."""
    server, url, header, _ = served
    image = xarray_rumi.open_image(url, header=header.to_bytes())
    assert [r.method for r in server.requests] == ["GET"]
    assert image.file_size == header.frames_end and image.opened_size == header.frames_end
    assert image.source.identity.etag is not None   # sent as If-Match by every later read
    server.requests.clear()
    image = xarray_rumi.open_image(url)
    assert [r.method for r in server.requests] == ["GET"] and image.file_size == header.frames_end


def test_with_the_blobs_url_the_blob_and_the_files_head_are_asked_together(served):
    """One round trip: the blob and the file's first bytes (IFD head, tags, size, version) at once, no HEAD."""
    server, url, header, _ = served
    server.latency = 0.2   # long enough that a second request sent after the first answer would not overlap it
    image = xarray_rumi.open_image(url, header=f"{url}.header")
    assert [r.method for r in server.requests] == ["GET", "GET"]
    stats = server.take_stats()
    assert stats["requests"] == 2 and stats["peak_in_flight"] == 2
    assert image.georeferencing.epsg == CRS and image.opened_size == header.frames_end


def test_opens_from_several_threads_at_once_overlap_in_one_round_trip(served):
    """Each open's blob and head: every request of eight opens in flight together, none queued behind another open."""
    from concurrent.futures import ThreadPoolExecutor

    server, url, header, _ = served
    server.latency = 0.5   # far longer than it takes to send all sixteen
    with ThreadPoolExecutor(8) as pool:
        images = list(pool.map(lambda i: xarray_rumi.open_image(f"{url}?{i}", header=f"{url}.header?{i}"), range(8)))
    stats = server.take_stats()
    assert stats["requests"] == 16 and stats["peak_in_flight"] == 16
    assert all(image.georeferencing.epsg == CRS and image.opened_size == header.frames_end for image in images)


def test_an_open_that_read_nothing_takes_the_files_version_from_its_first_read(served):
    """The version its reads keep to (the ETag, sent as If-Match after): stated by the first read's answer, no HEAD."""
    import pickle

    server, url, header, values = served
    image = xarray_rumi.open_image(url, header=header.to_bytes(), crs=CRS, transform=TRANSFORM)
    image.read(rows=slice(0, 32), cols=slice(0, 32))
    assert image.source.identity is not None and image.source.identity.size == header.frames_end
    image.read()
    assert "HEAD" not in [r.method for r in server.requests]
    shipped = pickle.loads(pickle.dumps(image))   # as Dask ships it: the version travels with it
    server.requests.clear()
    np.testing.assert_array_equal(shipped.read(), values)
    assert "HEAD" not in [r.method for r in server.requests]
    server.requests.clear()
    assert image.file_size == header.frames_end and server.requests == []   # stated by the first read's answer


def test_file_size_after_an_open_that_read_nothing_is_one_head_on_first_use(served):
    server, url, header, _ = served
    image = xarray_rumi.open_image(url, header=header.to_bytes(), crs=CRS, transform=TRANSFORM)
    assert server.requests == []
    assert image.file_size == header.frames_end and image.file_size == header.frames_end
    assert [(r.method, r.range) for r in server.requests] == [("HEAD", None)]


def test_no_blob_reads_the_ifd_in_one_request(served):
    server, url, header, _ = served
    ds = xr.open_dataset(url, engine="rumi")
    (request,) = server.get_requests()
    # reader.read_ifd asks for the first 64 KiB at once: one request covers the prefix.
    assert request.range[0] == 0 and request.sent >= header.base_frame_offset
    assert ds.band_data.encoding["header"] == header.to_bytes()
    assert ds.rio.crs.to_epsg() == CRS


def test_full_chunked_load_asks_for_each_frame_and_the_head_once(served):
    """Tasks of neighbouring frames share read-ahead fetches (:mod:`xarray_rumi.reading.readahead`)."""
    server, url, header, values = served
    data = _open(url, header, chunks={}).band_data.data
    assert data.npartitions == header.frame_count
    np.testing.assert_array_equal(data.compute(scheduler="threads", num_workers=2), values)
    # However many threads meet the unchecked blob at once, one fetches the head with its frames
    # (one request from byte 0, which may read through others' frames, as the engine merges); the
    # others wait.  Every other request holds frames no other request asked for.
    _assert_each_frame_once(server.get_requests(), header, checked=True)
    server.requests.clear()
    np.testing.assert_array_equal(_open(url, header, chunks={}).band_data.values, values)
    _assert_each_frame_once(server.get_requests(), header, checked=False)  # checked once per process


def _assert_each_frame_once(requests, header, *, checked: bool):
    """Each frame asked for by one request: the head's (from byte 0) may read through others' frames."""
    ranges = sorted(r.range for r in requests)
    head = [r for r in ranges if r[0] == 0]
    assert len(head) == (1 if checked else 0)
    others = [r for r in ranges if r[0] != 0]
    assert all(a[1] <= b[0] for a, b in zip(others, others[1:]))  # no frame twice
    frames = _frame_ranges(header, range(header.frame_count))
    inside = lambda frame, rs: any(r[0] <= frame[0] and frame[1] <= r[1] for r in rs)  # noqa: E731
    assert all(inside(f, others + head) for f in frames)
    assert sum(b - a for a, b in others) == sum(b - a for a, b in frames if inside((a, b), others))  # frames only


def test_verify_false_trusts_the_blob_and_the_check_is_made_once_per_process(served):
    server, url, header, values = served
    blob = header.to_bytes()
    unverified = xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False, verify=False)
    np.testing.assert_array_equal(unverified.band_data.values, values)
    assert all(r.range[0] >= header.base_frame_offset for r in server.get_requests())   # frames only
    for _ in range(3):
        xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False).band_data[0, 0, 0].values
    # the IFD head, asked for once (with the frame of the read that checked the blob)
    assert [r.range[0] for r in server.get_requests()].count(IFD_HEAD[0]) == 1


def test_a_blob_checked_at_open_travels_checked_with_the_pickled_image(served):
    """A Dask graph ships the image to workers: they need not check the blob again."""
    import pickle

    from xarray_rumi.reading.checked import checked_blobs

    server, url, header, values = served
    checked = xarray_rumi.open_image(url, header=header.to_bytes())  # the open checks it
    shipped = pickle.dumps(checked)
    unverified = pickle.dumps(xarray_rumi.open_image(f"{url}?other", header=header.to_bytes(), verify=False,
                                                     georeferencing=False))
    checked_blobs.clear()  # as in a worker process, which has checked nothing
    requests = len(server.get_requests())
    np.testing.assert_array_equal(pickle.loads(shipped).read(), values)
    assert all(r.range[0] >= header.base_frame_offset for r in server.get_requests()[requests:])
    assert checked.blob_key in checked_blobs  # recorded where the image was loaded
    assert pickle.loads(unverified).blob_key not in checked_blobs  # never checked: nothing to carry


def _window_frames(header, bands, rows, cols):
    return header.grid.frames_touching(range(*bands.indices(SHAPE[0])), range(rows.start, rows.stop),
                                       range(cols.start, cols.stop))


@pytest.mark.parametrize("chunks", [None, {}], ids=["lazy", "dask"])
@pytest.mark.parametrize("bands", [slice(None), slice(1, 2)], ids=["all-bands", "band-2"])
def test_window_fetches_only_its_frames(served, chunks, bands):
    server, url, header, values = served
    rows, cols = slice(40, 70), slice(10, 50)  # tile rows 1-2, tile columns 0-1
    ds = _open(url, header, chunks=chunks)
    window = ds.band_data[bands, rows, cols].values
    np.testing.assert_array_equal(window, values[bands, rows, cols])
    touched = _window_frames(header, bands, rows, cols)
    requests = server.get_requests()
    assert len(touched) in (4, 8) and len(requests) <= len(touched) + 1
    _assert_frames_and_head(requests, header, touched, per_frame=chunks == {})


def test_scattered_rows_fetch_only_the_frames_holding_them(served):
    server, url, header, values = served
    ds = _open(url, header)
    picked = ds.band_data.isel(y=[1, 99], x=[0, 119]).values
    np.testing.assert_array_equal(picked, values[:, [1, 99]][:, :, [0, 119]])
    grid = header.grid
    corners = {grid.frame_index(r, c, b) for r in (0, 3) for c in (0, 3) for b in range(SHAPE[0])}
    _assert_frames_and_head(server.get_requests(), header, sorted(corners), per_frame=False)


def test_rio_clip_box_reads_only_frames_inside(served):
    server, url, header, values = served
    ds = _open(url, header, chunks={})
    # x 500000 + 30 * [40, 70), y 4000000 - 30 * [35, 60): pixel columns 40..69, rows 35..59.
    clipped = ds.rio.clip_box(minx=500000 + 30 * 40 + 1, maxx=500000 + 30 * 70 - 1,
                              miny=4000000 - 30 * 60 + 1, maxy=4000000 - 30 * 35 - 1)
    assert server.requests == []  # clipping is lazy
    rows = slice(int((4000000 - clipped.y.values[0]) // 30), int((4000000 - clipped.y.values[-1]) // 30) + 1)
    cols = slice(int((clipped.x.values[0] - 500000) // 30), int((clipped.x.values[-1] - 500000) // 30) + 1)
    np.testing.assert_array_equal(clipped.band_data.values, values[:, rows, cols])
    touched = _window_frames(header, slice(None), rows, cols)
    assert len(touched) < header.frame_count
    _assert_frames_and_head(server.get_requests(), header, touched, per_frame=True)


def test_a_server_that_ignores_range_is_an_error_not_wrong_pixels(served):
    """http.server's handler answers every GET with the whole file (status 200)."""
    server, _, header, _ = served

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=server.root))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/scene.rumi"
        ds = _open(url, header, chunks={})
        with pytest.raises(OSError, match="ignored the byte range"):
            ds.band_data[:, :32, :32].values
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_limits_are_passed_to_the_reader(served):
    from xarray_rumi import Limits, RumiFormatError

    _, url, header, _ = served
    with pytest.raises(RumiFormatError, match="limits"):
        xr.open_dataset(url, engine="rumi", header=header.to_bytes(), limits=Limits(max_frames=4),
                        georeferencing=False)


def test_sources_reuse_one_file_system_across_pickling(served):
    """Tasks unpickled in a worker look their file system up again and share it."""
    import pickle

    _, url, header, _ = served
    image = xarray_rumi.open_image(url, header=header.to_bytes(), georeferencing=False)
    image.source.read(0, 16)  # looks the file system up
    copy = pickle.loads(pickle.dumps(image.source))
    assert "_fs_path" not in pickle.loads(pickle.dumps(image)).source.__dict__  # no live objects pickled
    assert copy._fs_path[0] is image.source._fs_path[0]
