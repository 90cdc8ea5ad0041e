"""The remote read engine: byte ranges in few merged requests that keep the link full (docs/backend.md, "Over HTTP").

It checks and retries nothing (``ByteSource.read_many`` does): a failed request's exception goes to its ranges only.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import as_completed
from dataclasses import dataclass

#: Gap bytes read through rather than sent as another request: a few ms at tens of MB/s, less than a round trip.
MAX_GAP = 256 * 1024
#: Bytes of one merged request at most (larger ones were slower through fsspec's HTTP client).
MAX_REQUEST = 2 * 1024 * 1024
#: Compressed bytes a remote read has in flight or waiting to be decoded, across its threads.
REMOTE_BATCH = 32 * 1024 * 1024
#: Requests one call keeps in flight at most: 64 MiB, a few Gbit/s at 50 ms.
MAX_IN_FLIGHT = 32
#: Requests a small read (a window) is spread over where its ranges allow: a link that caps each connection (as
#: object stores and proxies may) then brings its bytes over as many connections at once (docs/backend.md).
SPREAD = 4


def request_bytes(read: int) -> int:
    """The bytes a request of a read of ``read`` bytes holds at most: MAX_REQUEST, or 1/SPREAD of a small read.

    Never below MAX_GAP: bytes a request less cost less than another request.
    """
    return max(MAX_GAP, min(MAX_REQUEST, -(-read // SPREAD)))


class HandedOn:
    """What :func:`fetch_ranges` returns for a range it gave to ``on_ready``: its length, not its bytes."""

    __slots__ = ("length",)

    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class Request:
    """One merged request ``[start, stop)`` and the positions (in the caller's list) of the ranges it holds."""

    start: int
    stop: int
    ranges: tuple[int, ...]


def plan_requests(starts, stops, *, max_gap: int = MAX_GAP, max_request: int = MAX_REQUEST) -> list[Request]:
    """Merged requests, in file order: non-empty ranges at most ``max_gap`` apart within ``max_request`` bytes."""
    order = sorted((i for i in range(len(starts)) if stops[i] > starts[i]), key=lambda i: (starts[i], stops[i]))
    requests: list[Request] = []
    start = stop = 0
    held: list[int] = []
    for i in order:
        a, b = int(starts[i]), int(stops[i])
        if held and a - stop <= max_gap and max(stop, b) - start <= max_request:
            stop = max(stop, b)
            held.append(i)
            continue
        if held:
            requests.append(Request(start, stop, tuple(held)))
        start, stop, held = a, b, [i]
    if held:
        requests.append(Request(start, stop, tuple(held)))
    return requests


def _split(starts, stops, request: Request, answer, *, copy: bool) -> list:
    """Each range's bytes cut from its request's answer (an answer longer than its request: whole), or its error."""
    if isinstance(answer, BaseException) or len(answer) > request.stop - request.start:
        return [answer] * len(request.ranges)
    view = memoryview(answer)
    pieces = [view[starts[i] - request.start:stops[i] - request.start] for i in request.ranges]
    if not copy:
        return pieces
    # a range that is its whole answer (a single read) is that answer: no copy
    return [answer if len(piece) == len(answer) else bytes(piece) for piece in pieces]


def fetch_ranges(fs, path: str, starts, stops, *, max_gap: int = MAX_GAP, max_request: int = MAX_REQUEST,
                 max_in_flight: int = MAX_IN_FLIGHT, request_options: dict | None = None,
                 on_ready=None) -> list:
    """The unchecked bytes of each range of ``path`` on ``fs``, or the exception its request raised.

    ``on_ready(positions, pieces)`` gets each request's exact ranges as it completes; they return as :class:`HandedOn`.
    """
    starts, stops = [int(s) for s in starts], [int(s) for s in stops]
    requests = plan_requests(starts, stops, max_gap=max_gap, max_request=max_request)
    out: list = [b""] * len(starts)
    for request, answer in _answers_as_they_come(fs, path, requests, max_in_flight, request_options or {}):
        # views for a decoder: copies would double the memory a call holds
        pieces = _split(starts, stops, request, answer, copy=on_ready is None)
        for i, piece in zip(request.ranges, pieces):
            out[i] = piece
        if on_ready is not None:
            exact = [i for i, piece in zip(request.ranges, pieces)
                     if not isinstance(piece, BaseException) and len(piece) == stops[i] - starts[i]]
            if exact:
                on_ready(exact, [out[i] for i in exact])
                for i in exact:
                    out[i] = HandedOn(stops[i] - starts[i])
    return out


def _answers_as_they_come(fs, path: str, requests: list[Request], max_in_flight: int, options: dict):
    if not getattr(fs, "async_impl", False):
        answers = fs.cat_ranges([path] * len(requests), [r.start for r in requests], [r.stop for r in requests],
                                on_error="return", **options)
        yield from zip(requests, answers)
        return
    slots = asyncio.Semaphore(max_in_flight)

    async def answer(request: Request):
        async with slots:
            try:
                return await fs._cat_file(path, start=request.start, end=request.stop, **options)
            except Exception as exc:  # noqa: BLE001 - handed to the caller as this request's answer
                return exc

    futures = {asyncio.run_coroutine_threadsafe(answer(r), fs.loop): r for r in requests}
    try:
        for future in as_completed(futures):
            # popped: an answer is let go once split
            yield futures.pop(future), future.result()
    finally:  # the caller stopped early: fetch nothing more for it
        for future in list(futures):
            future.cancel()


__all__ = ["HandedOn", "MAX_GAP", "MAX_IN_FLIGHT", "MAX_REQUEST", "REMOTE_BATCH", "Request", "SPREAD", "fetch_ranges",
           "plan_requests", "request_bytes"]
