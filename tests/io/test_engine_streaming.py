"""The read engine hands each merged request's ranges on as that request completes, not after the whole call."""

from __future__ import annotations

import asyncio
import threading

import fsspec
import pytest
from fsspec.asyn import AsyncFileSystem, get_loop
from servers import RangeServer

from xarray_rumi.io.engine import HandedOn, fetch_ranges
from xarray_rumi.io.retry import RetryPolicy
from xarray_rumi.io.source import ByteSource

DATA = bytes(range(256)) * 64   # 16 KiB


class GatedFS(AsyncFileSystem):
    """An async file system over ``DATA`` whose answer for a range starting at ``gated`` waits for ``gate``."""

    cachable = False

    def __init__(self, gated: int, answers: dict | None = None):
        super().__init__(asynchronous=False, loop=get_loop())
        self.gated, self.gate, self.answers = gated, asyncio.Event(), answers or {}
        self.cancelled, self.timed_out = threading.Event(), False

    async def _cat_file(self, path, start=None, end=None, **kwargs):
        if start == self.gated:
            try:
                await asyncio.wait_for(self.gate.wait(), 5)
            except asyncio.TimeoutError:   # nobody opened the gate: answered late, and the test says so
                self.timed_out = True
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        answer = self.answers.get(start, DATA[start:end])
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def open_gate(self):
        self.loop.call_soon_threadsafe(self.gate.set)


def test_a_request_is_handed_on_while_a_later_one_is_still_on_its_way():
    fs = GatedFS(gated=8000)
    seen = []

    def ready(positions, pieces):
        seen.append((positions, pieces))
        if len(seen) == 1:   # the gated request is held back until the first one is handed on
            fs.open_gate()

    got = fetch_ranges(fs, "x", [8000, 0, 10], [8010, 10, 20], max_gap=0, on_ready=ready)
    assert seen == [([1, 2], [DATA[:10], DATA[10:20]]), ([0], [DATA[8000:8010]])]
    # the call keeps no bytes it handed on, only their lengths
    assert all(isinstance(piece, HandedOn) and len(piece) == 10 for piece in got)
    assert not fs.timed_out


def test_failed_short_and_overlong_answers_are_not_handed_on_but_returned():
    failure = ConnectionResetError("dropped")
    fs = GatedFS(gated=-1, answers={0: failure, 4000: b"short", 8000: DATA})
    seen = []
    got = fetch_ranges(fs, "x", [0, 4000, 8000, 12000], [10, 4010, 8010, 12010], max_gap=0,
                       on_ready=lambda positions, pieces: seen.append(positions))
    assert got[:3] == [failure, b"short", DATA] and isinstance(got[3], HandedOn)
    assert seen == [[3]]


def test_a_failing_handler_stops_the_call_and_cancels_what_is_still_on_its_way():
    fs = GatedFS(gated=8000)

    def ready(positions, pieces):
        raise ValueError("frame 1 does not decode")

    with pytest.raises(ValueError, match="does not decode"):
        fetch_ranges(fs, "x", [0, 8000], [10, 8010], max_gap=0, on_ready=ready)
    assert fs.cancelled.wait(5)


def test_a_synchronous_file_system_hands_on_every_request_after_its_one_call():
    fs = fsspec.filesystem("memory")
    fs.pipe("/streamed.bin", DATA)
    seen = []
    got = fetch_ranges(fs, "/streamed.bin", [8000, 0], [8010, 10], max_gap=0,
                       on_ready=lambda positions, pieces: seen.append((positions, pieces)))
    assert [len(piece) for piece in got] == [10, 10]
    assert sorted(seen, key=str) == [([0], [DATA[8000:8010]]), ([1], [DATA[:10]])]


def test_read_many_hands_on_each_range_once_in_the_callers_positions_across_a_retry(tmp_path):
    from flaky_server import FlakyProxy

    (tmp_path / "x.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url, ["503"]) as proxy:
        source = ByteSource(f"{proxy.url}/x.bin", retry=RetryPolicy(attempts=3, backoff=0.001))
        source.pin()  # a HEAD: until pinned, reads hand nothing on early (their answers' versions are compared first)
        seen = {}

        def ready(positions, pieces):
            for position, piece in zip(positions, pieces):
                assert position not in seen
                seen[position] = piece

        starts = [12000, 0, 6000]
        got = source.read_many(starts, [s + 100 for s in starts], max_gap=0, on_ready=ready)
        assert any(r.fault for r in proxy.requests)   # one request failed and was asked again
    assert seen == {i: DATA[s:s + 100] for i, s in enumerate(starts)}
    assert [len(piece) for piece in got] == [100] * 3


def test_a_first_read_that_pins_its_source_hands_nothing_on_before_its_answers_are_compared(tmp_path):
    """Its answers state the version; two of them stating different ones would be a changed file, so none goes early."""
    (tmp_path / "x.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as origin:
        source = ByteSource(f"{origin.url}/x.bin")
        seen = []
        starts = [12000, 0, 6000]
        got = source.read_many(starts, [s + 100 for s in starts], max_gap=0, on_ready=lambda p, pieces: seen.extend(p))
        assert seen == [] and source.identity is not None   # pinned by this read's answers
        assert got == [DATA[s:s + 100] for s in starts]
        got = source.read_many(starts, [s + 100 for s in starts], max_gap=0, on_ready=lambda p, pieces: seen.extend(p))
    assert sorted(seen) == [0, 1, 2]   # pinned: each range handed on as its request completes


def test_a_first_read_past_the_end_is_the_end_of_the_file_even_where_the_416_states_no_etag(tmp_path):
    from xarray_rumi.io.source import FileEndedError

    (tmp_path / "x.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as origin:   # its 416 states the size (Content-Range: bytes */N), no ETag
        with pytest.raises(FileEndedError, match="16384"):
            ByteSource(f"{origin.url}/x.bin").read_many([12000, 0, 600_000], [12100, 100, 600_100], max_gap=0)
