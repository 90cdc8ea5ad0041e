"""Remote frames are decoded as their requests arrive, once the blob is known to match; the last request's are shared."""

from __future__ import annotations

import numpy as np

import xarray_rumi
import xarray_rumi.reading.image as reader
from xarray_rumi.reading.image import RumiImage

SHAPE, TILE = (2, 64, 64), 16   # 32 tile frames


def _write(root, name, seed=0):
    values = np.random.default_rng(seed).integers(0, 2**16, SHAPE, dtype=np.uint16)
    return xarray_rumi.write(f"{root}/{name}", values, tile_size=TILE), values


def _remote(http_server, name, *, checked=True):
    """An image over HTTP, its blob checked by a first read unless ``checked=False``, and its values."""
    blob, values = _write(http_server.root, name)
    image = xarray_rumi.open_image(f"{http_server.url}/{name}", blob, georeferencing=False)
    if checked:
        image.read(rows=slice(0, 1))   # checks the blob against the version of the file the image keeps to
    return image, values


def _recording_fetches(monkeypatch, record) -> None:
    """``record(starts, stops)`` at every fetch of an image."""
    fetch = RumiImage.fetch
    monkeypatch.setattr(RumiImage, "fetch", lambda self, a, b, **kw: record(a, b) or fetch(self, a, b, **kw))


def _handled_and_rest(image):
    frames = np.arange(image.grid.frame_count)
    starts, stops = image.header.ranges(frames)
    handled = {}
    rest = image.fetch_as_ready(starts, stops, lambda position, payload: handled.__setitem__(position, payload))
    return handled, dict(rest), starts, stops


def test_all_but_the_last_request_are_handled_as_they_arrive(http_server, unmerged_requests):
    image, _ = _remote(http_server, "a.rumi")
    handled, rest, starts, stops = _handled_and_rest(image)
    assert len(rest) == 1 and len(handled) == len(starts) - 1   # unmerged: one frame a request
    assert handled.keys() | rest.keys() == set(range(len(starts)))
    with open(f"{http_server.root}/a.rumi", "rb") as f:
        data = f.read()
    assert {**handled, **rest} == {i: data[a:b] for i, (a, b) in enumerate(zip(starts.tolist(), stops.tolist()))}


def test_nothing_is_handed_on_before_the_blob_is_checked(http_server, unmerged_requests):
    image, _ = _remote(http_server, "b.rumi", checked=False)
    handled, rest, starts, _ = _handled_and_rest(image)   # the first read checks the blob
    assert handled == {} and len(rest) == len(starts)
    handled, rest, _, _ = _handled_and_rest(image)   # checked now
    assert len(handled) == len(starts) - 1 and len(rest) == 1


def test_a_local_image_returns_every_frame(tmp_path):
    blob, _ = _write(tmp_path, "c.rumi")
    handled, rest, starts, _ = _handled_and_rest(xarray_rumi.open_image(str(tmp_path / "c.rumi"), blob))
    assert handled == {} and len(rest) == len(starts)


def test_a_remote_read_decoded_as_it_arrives_is_the_image(http_server, unmerged_requests):
    image, values = _remote(http_server, "d.rumi", checked=False)
    np.testing.assert_array_equal(image.read(), values)
    np.testing.assert_array_equal(image.read(rows=slice(5, 50), cols=slice(3, 61)), values[:, 5:50, 3:61])


def test_a_remote_read_holds_at_most_remote_batch_across_its_threads(http_server, monkeypatch):
    image, values = _remote(http_server, "e.rumi")
    largest = int(max(b - a for a, b in zip(*image.header.ranges(np.arange(image.grid.frame_count)))))
    monkeypatch.setattr(reader, "REMOTE_BATCH", 8 * largest)
    monkeypatch.setattr(reader, "DECODE_BATCH", 1)
    monkeypatch.setattr(reader, "idle_threads", lambda: 2)
    fetched = []
    _recording_fetches(monkeypatch, lambda a, b: fetched.append(int((b - a).sum())))
    np.testing.assert_array_equal(image.read(), values)
    assert len(fetched) > 2 and max(fetched) <= 4 * largest   # each of two threads a half


def test_a_remote_read_with_no_other_thread_free_is_one_fetch(http_server, monkeypatch):
    """A Dask task whose neighbours keep the other cores busy: its read is one round trip, not one a share."""
    image, values = _remote(http_server, "f.rumi")
    monkeypatch.setattr(reader, "DECODE_BATCH", 1)
    fetched = []
    _recording_fetches(monkeypatch, lambda a, b: fetched.append(len(a)))
    for free, fetches in ((1, 1), (2, 2)):
        monkeypatch.setattr(reader, "idle_threads", lambda: free)
        fetched.clear()
        np.testing.assert_array_equal(image.read(), values)
        assert len(fetched) == fetches and sum(fetched) == image.grid.frame_count


def test_a_thread_waiting_idle_decodes_a_request_that_arrived_while_the_fetching_thread_waits(http_server, monkeypatch,
                                                                                            unmerged_requests):
    """A window of two requests: the second is held until the first's frame is decoded, on another thread."""
    import asyncio
    import threading

    from fsspec.implementations.http import HTTPFileSystem

    image, values = _remote(http_server, "g.rumi")   # the blob checked: later reads hand frames on as they arrive
    monkeypatch.setattr(reader, "idle_threads", lambda: 2)
    held, decoded_elsewhere = image.header.offset(1), threading.Event()
    fetching = []
    cat_file, decode = HTTPFileSystem._cat_file, RumiImage.decode

    async def held_back(fs, url, start=None, end=None, **kwargs):
        if start == held:
            await asyncio.get_running_loop().run_in_executor(None, decoded_elsewhere.wait, 5)
        return await cat_file(fs, url, start=start, end=end, **kwargs)

    def watched(self, index, payload, out=None):
        if index == 0 and threading.get_ident() not in fetching:
            decoded_elsewhere.set()
        return decode(self, index, payload, out=out)

    _recording_fetches(monkeypatch, lambda a, b: fetching.append(threading.get_ident()))
    monkeypatch.setattr(HTTPFileSystem, "_cat_file", held_back)
    monkeypatch.setattr(RumiImage, "decode", watched)
    np.testing.assert_array_equal(image.read(bands=slice(0, 2), rows=slice(0, 16), cols=slice(0, 16)),
                                  values[:, :16, :16])
    assert len(fetching) == 1 and decoded_elsewhere.is_set()
