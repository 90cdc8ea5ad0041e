"""The batch reader: many windows of one size across many images in one call.

Every batch is compared, window by window, with ``image.read`` of the same
window; the counts pin that each distinct frame is fetched and decoded
once, however many windows overlap it, and the requests on a Range HTTP
server pin what one remote batch asks for.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from _rumi_bytes import ramp

import xarray_rumi
import xarray_rumi.reading.image as reader
from xarray_rumi.reading.image import RumiImage
from xarray_rumi.runtime.scratch import FRAME, scratch

SHAPE = (3, 70, 90)  # with 16 px tiles: 5 x 6 positions, edge frames of 6 and 10 px
TILE = 16
CHIP = 20


def write_image(root, name, frame_unit="tile", shape=SHAPE, dtype="uint16", seed=0):
    values = (ramp(shape, dtype) + seed).astype(dtype)
    blob = xarray_rumi.write(root / name, values, tile_size=TILE, frame_unit=frame_unit)
    return xarray_rumi.open_image(root / name, blob), values


@pytest.fixture(params=["tile", "cell"])
def images(tmp_path, request):
    return [write_image(tmp_path, f"{i}.rumi", request.param, seed=i) for i in range(3)]


def random_windows(rng, count, size=CHIP, shape=SHAPE):
    rows = rng.integers(0, shape[1] - size + 1, count)
    cols = rng.integers(0, shape[2] - size + 1, count)
    return [(int(r), int(c), size, size) for r, c in zip(rows, cols)]


def expected(image, window, bands=None):
    row, col, height, width = window
    chip = image.read(rows=slice(row, row + height), cols=slice(col, col + width))
    return chip if bands is None else chip[[b - 1 for b in bands]]


def test_random_windows_of_one_image_are_what_read_gives(images):
    image, _ = images[0]
    windows = random_windows(np.random.default_rng(0), 40)  # 40 windows in 70 x 90 px: many overlap
    got = image.read_windows(windows)
    assert got.shape == (40, 3, CHIP, CHIP) and got.dtype == np.uint16
    for chip, window in zip(got, windows):
        np.testing.assert_array_equal(chip, expected(image, window))


def test_pairs_across_images_are_what_read_gives(images):
    rng = np.random.default_rng(1)
    pairs = [(images[int(i)][0], w) for i, w in zip(rng.integers(0, 3, 50), random_windows(rng, 50))]
    got = xarray_rumi.read_windows(pairs)
    for chip, (image, window) in zip(got, pairs):
        np.testing.assert_array_equal(chip, expected(image, window))


@pytest.mark.parametrize("window", [(54, 74, 16, 16), (64, 0, 6, 90), (0, 80, 70, 10), (60, 80, 10, 10),
                                    (0, 0, 70, 90), (16, 32, 16, 16), (15, 31, 18, 18)],
                         ids=["bottom-right", "bottom-row", "right-column", "corner", "whole", "one-frame",
                              "around-one-frame"])
def test_edge_frames_and_whole_frames(images, window):
    image, values = images[0]
    row, col, height, width = window
    got = image.read_windows([window, window])
    for chip in got:
        np.testing.assert_array_equal(chip, values[:, row:row + height, col:col + width])


@pytest.mark.parametrize("bands", [list(b) for n in (1, 2, 3) for b in itertools.permutations([1, 2, 3], n)])
def test_every_band_subset_in_any_order(images, bands):
    image, values = images[1]
    windows = random_windows(np.random.default_rng(2), 6)
    got = image.read_windows(windows, bands=bands)
    assert got.shape == (6, len(bands), CHIP, CHIP)
    for chip, (row, col, height, width) in zip(got, windows):
        np.testing.assert_array_equal(chip, values[[b - 1 for b in bands], row:row + height, col:col + width])


def test_a_range_of_bands(images):
    image, values = images[0]
    got = image.read_windows([(3, 4, 5, 6)], bands=range(2, 4))
    np.testing.assert_array_equal(got[0], values[1:3, 3:8, 4:10])


def test_out_receives_the_batch(images):
    image, _ = images[0]
    windows = random_windows(np.random.default_rng(3), 5)
    out = np.full((5, 2, CHIP, CHIP), 7, np.uint16)
    assert image.read_windows(windows, bands=[3, 1], out=out) is out
    for chip, window in zip(out, windows):
        np.testing.assert_array_equal(chip, expected(image, window, [3, 1]))


def test_a_strided_out_is_filled_too(images):
    image, _ = images[0]
    windows = random_windows(np.random.default_rng(4), 4)
    room = np.zeros((4, 3, CHIP, 2 * CHIP), np.uint16)
    out = room[:, :, :, ::2]
    image.read_windows(windows, out=out)
    assert not room[:, :, :, 1::2].any()
    for chip, window in zip(out, windows):
        np.testing.assert_array_equal(chip, expected(image, window))


def test_a_batch_hands_its_memory_over_through_dlpack(images):
    image, _ = images[0]
    chips = image.read_windows(random_windows(np.random.default_rng(5), 3))
    handed = np.from_dlpack(chips)
    assert np.shares_memory(handed, chips) and handed.__array_interface__["data"][0] == chips.ctypes.data
    np.testing.assert_array_equal(handed, chips)


def test_each_distinct_frame_is_fetched_once_and_decoded_once(images, monkeypatch):
    fetched, decoded, calls = Counter(), Counter(), Counter()
    fetch, decode = RumiImage.fetch, RumiImage.decode

    def counting_fetch(self, starts, stops, **options):
        calls[self.source.url] += 1
        fetched.update((self.source.url, int(a)) for a in starts)
        return fetch(self, starts, stops, **options)

    def counting_decode(self, index, payload, out=None):
        decoded[(self.source.url, index)] += 1
        return decode(self, index, payload, out=out)

    monkeypatch.setattr(RumiImage, "fetch", counting_fetch)
    monkeypatch.setattr(RumiImage, "decode", counting_decode)
    rng = np.random.default_rng(6)
    # two objects of one file and blob: one image to the plan
    again = xarray_rumi.open_image(images[0][0].source.url, images[0][0].header.to_bytes())
    choices = [images[0][0], images[1][0], again]
    pairs = [(choices[int(i)], w) for i, w in zip(rng.integers(0, 3, 60), random_windows(rng, 60))]
    pairs += pairs[:10]  # windows read twice in one batch
    got = xarray_rumi.read_windows(pairs, bands=[2, 3])
    touched = set()
    for image, (row, col, height, width) in pairs:
        bands = range(1, 3) if image.grid.frame_unit == 0 else range(3)
        for k in image.grid.frames_touching(bands, range(row, row + height), range(col, col + width)).tolist():
            touched.add((image.source.url, k))
    assert set(decoded) == touched and set(decoded.values()) == {1}
    starts = {(url, int(image.header.offset(k))) for url, k in touched for image in (images[0][0], images[1][0])
              if image.source.url == url}
    assert set(fetched) == starts and set(fetched.values()) == {1}
    assert set(calls) == {images[0][0].source.url, images[1][0].source.url}
    for chip, (image, window) in zip(got, pairs):
        np.testing.assert_array_equal(chip, expected(image, window, [2, 3]))


def test_a_local_image_is_fetched_a_few_mib_at_a_time(tmp_path, monkeypatch):
    image, values = write_image(tmp_path, "a.rumi", shape=(1, 64, 64))
    monkeypatch.setattr(reader, "DECODE_BATCH", 1)  # one frame a fetch
    sizes = []
    fetch = RumiImage.fetch
    monkeypatch.setattr(RumiImage, "fetch", lambda self, a, b, **kw: sizes.append(len(a)) or fetch(self, a, b, **kw))
    got = image.read_windows([(0, 0, 64, 64)])
    np.testing.assert_array_equal(got[0], values)
    assert sizes == [1] * 16


def test_cut_frames_are_decoded_into_the_threads_buffer_and_whole_ones_into_the_result(tmp_path, monkeypatch):
    monkeypatch.setattr("xarray_rumi.runtime.threads.computing_threads", lambda: 1)
    image, values = write_image(tmp_path, "a.rumi", shape=(1, 64, 64))
    outs = []
    decode = RumiImage.decode
    monkeypatch.setattr(RumiImage, "decode", lambda self, k, p, out=None: outs.append(out) or decode(self, k, p, out))
    # 10 distinct frames: 8 lie whole in a window (two of them whole in one and cut by the other), 2 only cut
    got = image.read_windows([(0, 0, 32, 40), (16, 24, 32, 40)])
    np.testing.assert_array_equal(got[0, 0], values[0, :32, :40])
    np.testing.assert_array_equal(got[1, 0], values[0, 16:48, 24:64])
    buffer = scratch(FRAME, (1, TILE, TILE), np.dtype("uint16"))
    assert len(outs) == 10
    assert sum(np.shares_memory(out, got) for out in outs) == 8
    assert sum(np.shares_memory(out, buffer) for out in outs) == 2


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "bool", "complex64"])
def test_sample_types(tmp_path, dtype):
    rng = np.random.default_rng(7)
    values = rng.normal(0, 100, (2, 40, 40))
    values = values > 0 if dtype == "bool" else (values + 1j * values if dtype == "complex64" else values)
    values = values.astype(dtype)
    blob = xarray_rumi.write(tmp_path / "a.rumi", values, tile_size=TILE)
    image = xarray_rumi.open_image(tmp_path / "a.rumi", blob)
    windows = random_windows(rng, 8, size=12, shape=values.shape)
    got = image.read_windows(windows)
    assert got.dtype == values.dtype
    for chip, (row, col, height, width) in zip(got, windows):
        np.testing.assert_array_equal(chip, values[:, row:row + height, col:col + width])


# -- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize(("window", "named"), [
    ((60, 0, 20, 20), "window 1 (60, 0, 20, 20)"), ((0, 71, 20, 20), "window 1 (0, 71, 20, 20)"),
    ((-1, 0, 20, 20), "window 1 (-1, 0, 20, 20)"),
])
def test_a_window_outside_the_image_is_refused_naming_it(images, window, named):
    image, _ = images[0]
    with pytest.raises(ValueError, match=r"lies outside .*0\.rumi, which is 70 rows x 90 columns") as refused:
        image.read_windows([(0, 0, 20, 20), window])
    assert named in str(refused.value)


def test_windows_of_different_sizes_are_refused_naming_one(images):
    image, _ = images[0]
    with pytest.raises(ValueError, match=r"window 2 is 20 x 21 px, window 0 is 20 x 20 px"):
        image.read_windows([(0, 0, 20, 20), (1, 1, 20, 20), (2, 2, 20, 21)])


@pytest.mark.parametrize("window", [(0, 0, 20), (0, 0, 2.5, 20), "abcd", 7])
def test_a_window_that_is_not_four_integers_is_refused(images, window):
    with pytest.raises(ValueError, match=r"window 1 is .*not four integers"):
        images[0][0].read_windows([(0, 0, 20, 20), window])


def test_an_empty_window_is_refused(images):
    with pytest.raises(ValueError, match="at least 1 x 1 px"):
        images[0][0].read_windows([(0, 0, 0, 20)])


@pytest.mark.parametrize(("bands", "message"), [
    ([0, 1], r"count from 1 to 3, .*\(\[0\] are not\)"), ([4], r"\[4\] are not"), ([], "count from 1"),
    ([1, 1], "names a band twice"), (["1"], "integers counted from 1"),
])
def test_bands_outside_the_image_or_repeated_are_refused(images, bands, message):
    with pytest.raises(ValueError, match=message):
        images[0][0].read_windows([(0, 0, 4, 4)], bands=bands)


@pytest.mark.parametrize(("out", "message"), [
    (np.empty((2, 3, 20, 20), np.uint16), r"out= is \(2, 3, 20, 20\) uint16; this batch is \(1, 3, 20, 20\)"),
    (np.empty((1, 3, 20, 20), np.int16), "this batch is .* uint16"),
    ([[0]], "not a numpy array"),
])
def test_an_out_of_another_shape_or_dtype_is_refused(images, out, message):
    with pytest.raises(ValueError, match=message):
        images[0][0].read_windows([(0, 0, 20, 20)], out=out)


def test_a_read_only_out_is_refused(images):
    out = np.empty((1, 3, 20, 20), np.uint16)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        images[0][0].read_windows([(0, 0, 20, 20)], out=out)


def test_images_of_other_sample_types_or_band_counts_are_refused(tmp_path):
    a, _ = write_image(tmp_path, "a.rumi")
    b, _ = write_image(tmp_path, "b.rumi", dtype="uint8")
    c, _ = write_image(tmp_path, "c.rumi", shape=(2, 70, 90))
    with pytest.raises(ValueError, match="share one sample type"):
        xarray_rumi.read_windows([(a, (0, 0, 4, 4)), (b, (0, 0, 4, 4))])
    with pytest.raises(ValueError, match=r"have \[2, 3\] bands: name the bands"):
        xarray_rumi.read_windows([(a, (0, 0, 4, 4)), (c, (0, 0, 4, 4))])
    got = xarray_rumi.read_windows([(a, (0, 0, 4, 4)), (c, (0, 0, 4, 4))], bands=[2])
    np.testing.assert_array_equal(got[1], expected(c, (0, 0, 4, 4), [2]))


def test_an_empty_batch_and_a_pair_that_is_no_pair_are_refused(images):
    with pytest.raises(ValueError, match="at least one"):
        xarray_rumi.read_windows([])
    with pytest.raises(ValueError, match="pair 0 is"):
        xarray_rumi.read_windows([images[0][0]])


# -- over HTTP -----------------------------------------------------------------------


@pytest.mark.parametrize("frame_unit", ["tile", "cell"])
def test_one_remote_batch_asks_for_each_touched_frame_once_one_fetch_an_image(http_server, frame_unit,
                                                                               monkeypatch):
    from pathlib import Path

    root = Path(http_server.root)
    local = [write_image(root, f"{i}.rumi", frame_unit, seed=i)[0] for i in range(3)]
    remote = [xarray_rumi.open_image(f"{http_server.url}/{i}.rumi", image.header.to_bytes())
              for i, image in enumerate(local)]
    for image in remote:
        image.check_blob()  # the blob check's own request is not the batch's
    calls = Counter()
    fetch = RumiImage.fetch
    monkeypatch.setattr(RumiImage, "fetch", lambda self, a, b, **kw: calls.update([self.source.url]) or fetch(self, a, b, **kw))
    rng = np.random.default_rng(8)
    picks = rng.integers(0, 3, 30).tolist()
    windows = random_windows(rng, 30)
    http_server.requests.clear()
    got = xarray_rumi.read_windows([(remote[i], w) for i, w in zip(picks, windows)], bands=[1, 3])
    asked = [(r.path, r.range) for r in http_server.get_requests()]
    wanted = set()
    for i, (row, col, height, width) in zip(picks, windows):
        for band in (0, 2):  # a cell frame holds both
            touched = local[i].grid.frames_touching(range(band, band + 1), range(row, row + height),
                                                    range(col, col + width))
            wanted.update((f"/{i}.rumi", local[i].frame_range(k)) for k in touched.tolist())
    # each frame in exactly one request (a read engine may merge neighbours into one), and no more requests
    for path, (start, stop) in wanted:
        assert sum(p == path and a <= start and stop <= b for p, (a, b) in asked) == 1, (path, start)
    assert len(asked) <= len(wanted)
    assert calls == Counter({image.source.url: 1 for i, image in enumerate(remote) if i in picks})
    for chip, i, window in zip(got, picks, windows):
        np.testing.assert_array_equal(chip, expected(local[i], window, [1, 3]))


@pytest.mark.parametrize("count", [4, 64])  # 64: a batch of 64 chips from as many images
def test_the_remote_images_of_a_batch_are_fetched_at_once(http_server, monkeypatch, count):
    """Each remote image's fetch waits here until every other one has started: in sequence they would time out."""
    import threading
    from pathlib import Path

    local = [write_image(Path(http_server.root), f"{i}.rumi", shape=(1, 32, 32), seed=i)[0] for i in range(count)]
    remote = [xarray_rumi.open_image(f"{http_server.url}/{i}.rumi", image.header.to_bytes())
              for i, image in enumerate(local)]
    all_started = threading.Barrier(len(remote), timeout=10)
    fetch = RumiImage.fetch
    monkeypatch.setattr(RumiImage, "fetch", lambda self, a, b, **kw: all_started.wait() * 0 or fetch(self, a, b, **kw))
    got = xarray_rumi.read_windows([(image, (5, 7, CHIP, CHIP)) for image in remote])
    monkeypatch.undo()
    for chip, image in zip(got, local):
        np.testing.assert_array_equal(chip, expected(image, (5, 7, CHIP, CHIP)))


def test_a_batch_of_local_and_remote_images(http_server):
    from pathlib import Path

    local = [write_image(Path(http_server.root), f"{i}.rumi", "cell", seed=i)[0] for i in range(2)]
    remote = xarray_rumi.open_image(f"{http_server.url}/1.rumi", local[1].header.to_bytes())
    windows = random_windows(np.random.default_rng(9), 8)
    pairs = [(local[0] if n % 2 else remote, w) for n, w in enumerate(windows)]
    got = xarray_rumi.read_windows(pairs, bands=[3, 1])
    for chip, (image, window) in zip(got, pairs):
        np.testing.assert_array_equal(chip, expected(local[0] if image is local[0] else local[1], window, [3, 1]))
    assert http_server.get_requests()


def test_a_remote_batch_decodes_frames_while_later_requests_are_still_out(http_server, monkeypatch):
    """Two requests in flight at a time, each waiting 20 ms: a batch that decoded only once all had arrived
    would find every request answered at its first decode."""
    from pathlib import Path

    from xarray_rumi.io import engine, source

    local, _ = write_image(Path(http_server.root), "a.rumi")
    image = xarray_rumi.open_image(f"{http_server.url}/a.rumi", local.header.to_bytes())
    image.check_blob()  # frames of a blob not yet checked are held back until it is: not this test's concern
    # over what the caller passes: a frame a request, two requests in flight
    monkeypatch.setattr(source, "fetch_ranges", lambda *args, **kwargs: engine.fetch_ranges(
        *args, **{**kwargs, "max_gap": 0, "max_request": 1, "max_in_flight": 2}))
    http_server.latency = 0.02
    answered_at_decode = []
    decode = RumiImage.decode

    def noting_decode(self, index, payload, out=None):
        answered_at_decode.append(len(http_server.get_requests()))
        return decode(self, index, payload, out=out)

    monkeypatch.setattr(RumiImage, "decode", noting_decode)
    http_server.requests.clear()
    got = image.read_windows([(0, 0, 70, 90)], bands=[2])  # 30 frames of band 2: 30 requests, 15 round trips
    requests = len(http_server.get_requests())
    assert requests == 30
    assert min(answered_at_decode) < requests // 2  # decoding began before half the requests were answered
    np.testing.assert_array_equal(got[0], expected(local, (0, 0, 70, 90), [2]))


def test_a_first_batch_over_images_opened_from_blobs_is_one_round_trip(http_server):
    """Opened from their blobs (no request), the images' first batch pins each file and checks each blob with its
    frames: every request of the batch is in flight at once."""
    from pathlib import Path

    local = [write_image(Path(http_server.root), f"{i}.rumi", seed=i)[0] for i in range(4)]
    remote = [xarray_rumi.open_image(f"{http_server.url}/{i}.rumi", image.header.to_bytes(), georeferencing=False)
              for i, image in enumerate(local)]
    http_server.latency = 0.5  # every request arrives while the first still waits
    http_server.take_stats()
    pairs = [(image, (3 * i, 5 * i, CHIP, CHIP)) for i, image in enumerate(remote)]
    got = xarray_rumi.read_windows(pairs)
    stats = http_server.take_stats()
    assert stats["requests"] == stats["gets"] >= len(remote)
    assert stats["peak_in_flight"] == stats["requests"]
    for chip, (image, window), original in zip(got, pairs, local):
        np.testing.assert_array_equal(chip, expected(original, window))
