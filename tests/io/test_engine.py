"""The remote read engine: merged requests planned exactly, sent together, split back into each range's bytes."""

from __future__ import annotations

import random

import fsspec
import pytest
from flaky_server import FlakyProxy
from servers import RangeServer

from xarray_rumi.io.engine import MAX_GAP, MAX_REQUEST, fetch_ranges, plan_requests
from xarray_rumi.io.retry import RetryPolicy
from xarray_rumi.io.source import ByteSource, FileEndedError

POLICY = RetryPolicy(attempts=3, backoff=0.001)


def spans(requests):
    return [(r.start, r.stop, r.ranges) for r in requests]


# -- planning ----------------------------------------------------------------------------


def test_adjacent_ranges_share_one_request():
    assert spans(plan_requests([0, 10, 20], [10, 20, 30])) == [(0, 30, (0, 1, 2))]


def test_a_gap_up_to_max_gap_is_read_through_and_a_wider_one_is_another_request():
    assert spans(plan_requests([0, 110], [10, 120], max_gap=100)) == [(0, 120, (0, 1))]
    assert spans(plan_requests([0, 111], [10, 120], max_gap=100)) == [(0, 10, (0,)), (111, 120, (1,))]


def test_overlapping_and_repeated_ranges_share_a_request():
    assert spans(plan_requests([0, 5, 0], [10, 8, 10], max_gap=0)) == [(0, 10, (0, 2, 1))]


def test_a_request_stays_within_max_request_and_a_larger_range_is_alone():
    starts = [0, 40, 80, 200]
    stops = [40, 80, 200, 240]
    assert spans(plan_requests(starts, stops, max_request=100)) == [(0, 80, (0, 1)), (80, 200, (2,)), (200, 240, (3,))]
    # every request within the bound unless it holds one range larger than it
    rng = random.Random(0)
    starts = sorted(rng.sample(range(10**6), 500))
    stops = [s + rng.randint(1, 5000) for s in starts]
    for request in plan_requests(starts, stops, max_gap=2000, max_request=20_000):
        assert request.stop - request.start <= 20_000 or len(request.ranges) == 1


def test_empty_ranges_need_no_request():
    assert plan_requests([5, 5], [5, 3]) == []
    assert fetch_ranges(fsspec.filesystem("memory"), "/nothing", [5], [5]) == [b""]


def test_the_defaults_merge_a_full_read_into_requests_of_a_few_mib():
    frame = 200_000
    starts = [i * frame for i in range(256)]
    requests = plan_requests(starts, [s + frame for s in starts])
    assert len(requests) == -(-256 // (MAX_REQUEST // frame))
    assert len(requests) <= 256 // 8   # issue 28: a full read's GETs at most 1/8 of its frames
    assert MAX_GAP < MAX_REQUEST


class Answering:
    """A file system answering each merged request ``[start, stop)`` with ``answer(start, stop)``."""

    def __init__(self, answer):
        self.answer = answer

    def cat_ranges(self, paths, starts, stops, *, on_error, **options):
        return [self.answer(a, b) for a, b in zip(starts, stops)]


def test_each_range_gets_its_exact_bytes_cut_from_its_request_in_the_callers_order():
    rng = random.Random(1)
    data = bytes(rng.getrandbits(8) for _ in range(100_000))
    fs = Answering(lambda a, b: data[a:b])
    for _ in range(50):
        starts = [rng.randrange(0, 99_000) for _ in range(rng.randint(1, 30))]
        stops = [s + rng.randint(0, 1000) for s in starts]
        got = fetch_ranges(fs, "x", starts, stops, max_gap=rng.choice([0, 500, 5000]),
                           max_request=rng.choice([800, 10**6]))
        assert got == [data[a:b] for a, b in zip(starts, stops)]


def test_a_range_that_is_its_whole_request_gets_the_answer_itself_not_a_copy():
    answers = {}
    fs = Answering(lambda a, b: answers.setdefault((a, b), bytes(b - a)))
    (single,) = fetch_ranges(fs, "x", [0], [1 << 20])
    assert single is answers[(0, 1 << 20)]
    first, second = fetch_ranges(fs, "x", [0, 10], [10, 20])
    assert first == second == bytes(10) and first is not answers[(0, 20)]


def test_a_failed_request_gives_its_exception_to_its_ranges_only():
    failure = ConnectionResetError("dropped")
    fs = Answering(lambda a, b: failure if a >= 1000 else b"a" * (b - a))
    assert fetch_ranges(fs, "x", [0, 10, 1000], [10, 20, 1010], max_gap=0) == [b"a" * 10, b"a" * 10, failure]


def test_a_short_answer_shortens_the_ranges_past_its_end_and_a_long_one_is_handed_on_whole():
    assert fetch_ranges(Answering(lambda a, b: b"x" * 15), "x", [0, 10], [10, 20]) == [b"x" * 10, b"x" * 5]
    assert fetch_ranges(Answering(lambda a, b: b"y" * 50), "x", [0, 10], [10, 20]) == [b"y" * 50, b"y" * 50]


# -- over a loopback server --------------------------------------------------------------

DATA = bytes(range(256)) * 4096   # 1 MiB


@pytest.fixture
def origin(tmp_path):
    (tmp_path / "x.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as server:
        yield server


def test_sixty_four_adjacent_frames_are_one_get(origin):
    starts = [i * 1000 for i in range(64)]
    stops = [s + 1000 for s in starts]
    got = ByteSource(f"{origin.url}/x.bin", retry=POLICY).read_many(starts, stops)
    assert got == [DATA[a:b] for a, b in zip(starts, stops)]
    assert [r.range for r in origin.get_requests()] == [(0, 64_000)]


def test_far_apart_ranges_are_separate_gets_and_a_large_read_several(origin):
    fs, path = fsspec.core.url_to_fs(f"{origin.url}/x.bin")
    got = fetch_ranges(fs, path, [900_000, 0], [900_010, 10], max_gap=1000)
    assert got == [DATA[900_000:900_010], DATA[:10]]
    assert sorted(r.range for r in origin.get_requests()) == [(0, 10), (900_000, 900_010)]
    origin.take_stats()
    starts = list(range(0, 2**20, 2**14))
    fetch_ranges(fs, path, starts, [s + 2**14 for s in starts], max_request=2**18)
    assert sorted(r.range for r in origin.get_requests()) == [(s, s + 2**18) for s in range(0, 2**20, 2**18)]


def test_requests_in_flight_stay_within_the_cap(tmp_path):
    (tmp_path / "x.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path), latency=0.05) as server:
        fs, path = fsspec.core.url_to_fs(f"{server.url}/x.bin")
        starts = list(range(0, 16 * 10_000, 10_000))
        got = fetch_ranges(fs, path, starts, [s + 10 for s in starts], max_gap=0, max_in_flight=4)
        assert got == [DATA[s:s + 10] for s in starts]
        stats = server.take_stats()
    assert stats["gets"] == 16 and stats["peak_in_flight"] == 4


def test_only_the_request_that_failed_is_asked_again(origin):
    far = 2 * MAX_GAP + len(DATA) // 4   # beyond any gap read through
    with FlakyProxy(origin.url, ["503"]) as proxy:
        source = ByteSource(f"{proxy.url}/x.bin", retry=POLICY)
        assert source.read_many([0, 10, far], [10, 20, far + 10]) == [DATA[:10], DATA[10:20], DATA[far:far + 10]]
        gets = [(r.range, r.fault) for r in proxy.requests if r.method == "GET"]
    assert len(gets) == 3
    (failed,) = [r for r, fault in gets if fault]
    assert [r for r, fault in gets if not fault].count(failed) == 1


def test_a_merged_request_running_past_the_end_names_the_first_range_the_file_does_not_hold(origin):
    source = ByteSource(f"{origin.url}/x.bin", retry=POLICY)
    end = len(DATA)
    with pytest.raises(FileEndedError) as info:
        source.read_many([end - 100, end - 50, end - 10], [end - 50, end - 10, end + 90])
    assert (info.value.start, info.value.stop, info.value.size) == (end - 10, end + 90, end)
    ranges = [r.range for r in origin.get_requests()]
    assert ranges == [(end - 100, end)]   # one GET, never retried; the size from its Content-Range
    assert [r.method for r in origin.requests].count("HEAD") == 0


def test_a_server_that_ignores_the_range_is_refused(tmp_path):
    from http.server import BaseHTTPRequestHandler

    from servers import LoopbackServer

    class WholeFile(LoopbackServer):
        def __enter__(self):
            class Handler(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"

                def log_message(self, *args):
                    pass

                def do_GET(self):
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(DATA)))
                    self.end_headers()
                    self.wfile.write(DATA)

            self._serve(Handler)
            return self

    with WholeFile() as server:
        with pytest.raises(OSError, match="server ignored the byte range"):
            ByteSource(f"{server.url}/x.bin", retry=POLICY).read_many([0, 10], [10, 20])


def test_a_remote_read_is_spread_over_the_threads_in_one_round_trip(tmp_path):
    """8 MiB of frames: each thread's share merged into requests of MAX_REQUEST, every request in flight at once."""
    import numpy as np

    import xarray_rumi
    from xarray_rumi.io.engine import REMOTE_BATCH
    from xarray_rumi.reading.image import DECODE_BATCH
    from xarray_rumi.runtime.threads import computing_threads

    values = np.random.default_rng(0).integers(0, 2**16, (1, 2048, 2048), dtype=np.uint16)  # incompressible
    blob = xarray_rumi.write(tmp_path / "noise.rumi", values, tile_size=256, compression="portable")
    with RangeServer(str(tmp_path), latency=0.05) as server:
        image = xarray_rumi.open_image(f"{server.url}/noise.rumi", header=blob, georeferencing=False)
        header = image.header
        assert DECODE_BATCH < header.frames_end - header.base_frame_offset < REMOTE_BATCH
        np.testing.assert_array_equal(image.read(), values)
        stats = server.take_stats()
        starts, stops = header.ranges(np.arange(header.frame_count))
        planned = plan_requests([0, *starts.tolist()], [252, *stops.tolist()])   # the IFD head rides along
        assert len(planned) == -(-header.frames_end // MAX_REQUEST)
        # a thread's share ends a request early: at most one more request a thread
        assert len(planned) <= stats["gets"] <= len(planned) + computing_threads() - 1
        assert stats["peak_in_flight"] == stats["gets"]


def test_a_small_read_is_spread_over_spread_requests_and_a_large_one_merged():
    from xarray_rumi.io.engine import SPREAD, request_bytes

    assert request_bytes(64 * MAX_REQUEST) == MAX_REQUEST
    assert request_bytes(SPREAD * 300_000) == 300_000   # a window of 1.2 MB: requests of 300 KB
    assert request_bytes(100_000) == MAX_GAP   # a request less must save more than a gap read through


def test_a_window_goes_out_in_spread_requests_at_once(tmp_path):
    """Four incompressible 512 KiB frames: four requests in flight together, where one request of 2 MiB would do."""
    import numpy as np

    import xarray_rumi
    from xarray_rumi.io.engine import SPREAD

    values = np.random.default_rng(1).integers(0, 2**16, (4, 512, 512), dtype=np.uint16)
    blob = xarray_rumi.write(tmp_path / "noise.rumi", values, tile_size=512, compression="portable")
    with RangeServer(str(tmp_path), latency=0.2) as server:
        image = xarray_rumi.open_image(f"{server.url}/noise.rumi", header=blob, georeferencing=False)
        image.read(bands=slice(0, 1), rows=slice(0, 1))   # checks the blob
        server.take_stats()
        np.testing.assert_array_equal(image.read(rows=slice(100, 400), cols=slice(50, 300)),
                                      values[:, 100:400, 50:300])
        stats = server.take_stats()
    assert stats["gets"] == SPREAD == stats["peak_in_flight"]
