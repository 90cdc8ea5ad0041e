"""Read-ahead for remote whole-frame reads: Dask tasks of neighbouring frames share round trips.

With ``chunks={}`` each Dask task reads one frame: remotely a round trip each.
Here a task whose frame misses while the two frames before it in a sweep's
order were asked for lately (what a compute of many frames does) fetches
frames that come next as well, and keeps them in a per-process cache until
their own tasks **take** them; a task whose frame is in flight waits for
that fetch.  ``docs/backend.md`` ("Over HTTP") says what it reads ahead, and
what it keeps to: the file's version, :data:`CACHE_BYTES`, a fork.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict, deque

from ..io.engine import MAX_GAP, MAX_REQUEST

#: Compressed bytes one read-ahead along a band fetches at most (its own frame aside).
READ_AHEAD_BYTES = 16 * 1024 * 1024
#: Compressed bytes the process keeps of frames read ahead and not yet taken.
CACHE_BYTES = 64 * 1024 * 1024
#: Frames asked for lately that a process remembers: a sweep is told from frames read alone by
#: them (Dask's order goes back and forth within a few dozen tasks).
RECENT_FRAMES = 64
#: Images with fetches queued for their tasks: fewer than a process reads at once.
QUEUED_IMAGES = 64
#: Fetches of a whole-image read-ahead in flight at once: more would share the link and all
#: arrive late together, fewer would leave it idle between round trips.
SPANS_IN_FLIGHT = 2


class _Span:
    """Frames one fetch brings; its waiters wait for ``done``; unclaimed, no thread fetches it yet."""

    __slots__ = ("frames", "done", "claimed", "along")

    def __init__(self, frames: list[int], claimed: bool = True, along: bool = False) -> None:
        self.frames, self.done, self.claimed, self.along = frames, threading.Event(), claimed, along


class ReadAhead:
    """Frames read ahead and not yet taken, the fetches in flight and queued, the frames asked for lately.

    ``take(key, frame, grid, byte_count, fetch, image_bytes=None)`` gives
    frame ``frame``'s bytes: from the cache, from a fetch in flight, or by
    ``fetch(frames)`` (their bytes, in order), called with the frame first.
    An image whose frames' ``image_bytes`` fit in the cache is read ahead
    whole, in the file's order; a larger one along the sweep's band.
    Thread-safe; starts no thread.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> grid = FrameGrid(64, 16, 16, 16, 1)          # one band, a row of 4 frames
    >>> ahead, sent = ReadAhead(), []
    >>> def fetch(frames):
    ...     sent.append(frames)
    ...     return [b"frame %d" % k for k in frames]
    >>> [ahead.take(b"key", k, grid, lambda k: 100, fetch) for k in (0, 1, 2, 3)]
    [b'frame 0', b'frame 1', b'frame 2', b'frame 3']
    >>> sent                                         # a sweep from frame 2 on: frame 3 came with it
    [[0], [1], [2, 3]]
    """

    def __init__(self, *, max_bytes: int = CACHE_BYTES, read_ahead_bytes: int = READ_AHEAD_BYTES,
                 recent_frames: int = RECENT_FRAMES, spans_in_flight: int = SPANS_IN_FLIGHT) -> None:
        self.max_bytes, self.read_ahead_bytes, self.recent_frames = max_bytes, read_ahead_bytes, recent_frames
        self.spans_in_flight = spans_in_flight
        self._after_fork()

    def _after_fork(self) -> None:
        # A forked child starts empty: the parent's frames and fetches are not its own, and a
        # lock another thread held at fork time would never be released there.
        self._lock = threading.Lock()
        self._cached: OrderedDict = OrderedDict()   # (key, frame) -> bytes, oldest first
        self._bytes = 0
        self._pending: dict = {}                    # (key, frame) -> its _Span, until the fetch ends
        self._queued: dict = {}                     # key -> deque of unclaimed spans, in the sweep's order
        self._flying: dict = {}                     # key -> its whole-image spans being fetched
        self._recent: OrderedDict = OrderedDict()   # (key, frame) asked for lately
        self._refills: dict = {}                    # (key, frame) -> (last frame read ahead, direction)

    @property
    def cached_bytes(self) -> int:
        """Bytes of frames held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._cached)

    def clear(self) -> None:
        """Drop every frame held and every fetch queued (fetches in flight keep going)."""
        with self._lock:
            self._cached.clear()
            self._bytes = 0
            for key, spans in self._queued.items():
                for span in spans:
                    self._release(key, span)
            self._queued.clear()

    def take(self, key: bytes, frame: int, grid, byte_count, fetch, image_bytes: int | None = None) -> bytes:
        own = refill = extra = None
        with self._lock:
            self._note(key, frame)
            found = self._pop(key, frame)
            span = self._pending.get((key, frame))
            if found is not None:
                refill = self._plan_refill(key, frame, grid, byte_count)
            elif span is None:
                own = span = self._plan(key, frame, grid, byte_count, image_bytes)
            elif not span.claimed:
                own = self._claim(key, span)
            if own is None:
                extra = self._next_queued(key)
        if extra is not None:  # this task would wait anyway, or holds its frame: it keeps the link busy
            self._run(key, extra, fetch)
        if found is not None:
            if refill is not None:
                self._refill(key, grid, *refill, fetch)
            return found
        if own is not None:
            return self._fetch_own(key, frame, grid, own, fetch)
        span.done.wait()
        with self._lock:
            found = self._pop(key, frame)
        # Its fetch failed (or the frame was dropped since): this task reads its own frame.
        return found if found is not None else fetch([frame])[0]

    # -- fetching -----------------------------------------------------------

    def _fetch_own(self, key, frame: int, grid, span: _Span, fetch) -> bytes:
        """Fetch ``span``, which holds ``frame``: its bytes, the others kept; alone again if that fails."""
        frames = [frame, *(k for k in span.frames if k != frame)]
        try:
            payloads = fetch(frames)
        except BaseException as exc:
            self._settle(key, span, [])  # never leave a waiter waiting
            if len(frames) == 1 or not isinstance(exc, Exception):
                raise
            # The read-ahead failed, perhaps for another frame's sake: this frame alone, as
            # without read-ahead, so the task sees its own bytes or its own error.
            return fetch([frame])[0]
        self._settle(key, span, list(zip(frames[1:], payloads[1:])))
        if span.along:
            self._mark_refill(key, grid, frame, frames[1:])
        return payloads[0]

    def _run(self, key, span: _Span, fetch) -> bool:
        """Fetch a span for other tasks, whether it came; a failure leaves each to fetch its own frame."""
        try:
            payloads = fetch(span.frames)
        except Exception:  # noqa: BLE001 - each task then fetches its own frame and sees its own error
            payloads = []
        except BaseException:
            self._settle(key, span, [])
            raise
        self._settle(key, span, list(zip(span.frames, payloads)))
        return bool(payloads)

    def _settle(self, key, span: _Span, kept) -> None:
        """Keep the ``(frame, bytes)`` of ``kept``, end ``span``'s pending state, wake its waiters."""
        with self._lock:
            for k, payload in kept:
                self._keep(key, k, payload)
            self._release(key, span)

    def _release(self, key, span: _Span) -> None:
        """End ``span``'s pending state and wake its waiters (the lock is held)."""
        for k in span.frames:
            if self._pending.get((key, k)) is span:
                del self._pending[(key, k)]
        if span.claimed and not span.along:
            self._flying[key] -= 1
            if not self._flying[key]:
                del self._flying[key]
        span.done.set()

    # -- planning (the lock is held) ------------------------------------------

    def _hold(self, key, span: _Span) -> _Span:
        for k in span.frames:
            self._pending[(key, k)] = span
        return span

    def _claim(self, key, span: _Span) -> _Span:
        span.claimed = True
        self._queued[key].remove(span)
        if not self._queued[key]:
            del self._queued[key]
        self._flying[key] = self._flying.get(key, 0) + 1
        return span

    def _next_queued(self, key) -> _Span | None:
        """The next span of ``key`` to fetch now, while fewer than :attr:`spans_in_flight` are."""
        if key in self._queued and self._flying.get(key, 0) < self.spans_in_flight:
            return self._claim(key, self._queued[key][0])
        return None

    def _plan(self, key, frame: int, grid, byte_count, image_bytes) -> _Span:
        """The span this task fetches (its frame and those read ahead); any further ones queued."""
        seen = lambda k: self._seen(key, k)  # noqa: E731
        direction = swept(grid, frame, seen, whole=True) if image_bytes is not None and \
            image_bytes <= self.max_bytes else 0
        if not direction:
            ahead = sweep_ahead(grid, frame, seen, seen, byte_count, self.read_ahead_bytes)
            return self._hold(key, _Span([frame, *ahead], along=True))
        unseen = in_file_order(grid, frame, lambda k: k != frame and self._seen(key, k), direction)
        # Spans of 1, 2, 4, ... merged requests: the first frames come after one round trip and a
        # short transfer, and the whole image is in flight after a few, even on 2 workers.
        spans = [_Span(run, claimed=frame in run) for run in split(unseen, byte_count, MAX_REQUEST)]
        for span in spans:
            self._hold(key, span)
        own = next(span for span in spans if span.claimed)
        self._flying[key] = self._flying.get(key, 0) + 1
        if len(spans) > 1:
            self._queued.setdefault(key, deque()).extend(span for span in spans if span is not own)
            while len(self._queued) > QUEUED_IMAGES:  # images whose tasks never came for them
                oldest = next(iter(self._queued))
                for span in self._queued.pop(oldest):
                    self._release(oldest, span)
        return own

    def _mark_refill(self, key, grid, frame: int, ahead: list[int]) -> None:
        """A read-ahead along a band over whole rows is read on when its sweep is half through it."""
        step, across = grid.frames_per_position, grid.tiles_across
        if not ahead or (frame // step) // across == (ahead[-1] // step) // across:
            return  # within one row: whether the sweep goes on is not known
        direction = 1 if ahead[-1] > frame else -1
        with self._lock:
            if len(self._refills) > 4096:  # marks of frames dropped unread
                self._refills.clear()
            self._refills[(key, ahead[len(ahead) // 2])] = (ahead[-1], direction)

    def _plan_refill(self, key, frame, grid, byte_count):
        """``(frames, span)`` to read on from a marked frame just taken, or ``None``."""
        mark = self._refills.pop((key, frame), None)
        if mark is None:
            return None
        last, direction = mark
        more = along_band(grid, last, direction, lambda k: self._seen(key, k), byte_count, self.read_ahead_bytes,
                          across_rows=True)
        return (last, self._hold(key, _Span(more, along=True))) if more else None

    def _refill(self, key, grid, last, span: _Span, fetch) -> None:
        if self._run(key, span, fetch):
            self._mark_refill(key, grid, last, span.frames)

    def _note(self, key, frame) -> None:
        self._recent[(key, frame)] = None
        self._recent.move_to_end((key, frame))
        while len(self._recent) > self.recent_frames:
            self._recent.popitem(last=False)

    def _pop(self, key, frame):
        found = self._cached.pop((key, frame), None)
        if found is not None:
            self._bytes -= len(found)
        return found

    def _keep(self, key, frame, payload: bytes) -> None:
        self._cached[(key, frame)] = payload
        self._bytes += len(payload)
        while self._bytes > self.max_bytes and self._cached:
            _, dropped = self._cached.popitem(last=False)
            self._bytes -= len(dropped)

    def _seen(self, key, frame: int) -> bool:
        """Asked for lately, held, or in flight: part of what is being read now."""
        k = (key, frame)
        return k in self._recent or k in self._cached or k in self._pending


def swept(grid, frame: int, seen, *, whole: bool = False) -> int:
    """The direction (+1/-1 position) of a sweep reaching ``frame``, or 0 when there is none.

    A sweep is two frames just before ``frame`` in a sweep's order, either
    way, both ``seen``: the order is the band's positions in raster order,
    bands one after the other (Dask's order for a band-major array), and with
    ``whole`` also the file's frame order.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> grid = FrameGrid(64, 64, 16, 16, 2)           # 2 bands, 4 x 4 positions: frame = 2 * position + band
    >>> swept(grid, 27, {31, 29}.__contains__), swept(grid, 27, {28, 29}.__contains__, whole=True)
    (-1, -1)
    """
    for direction in (-1, 1):
        if all(_seen_before(grid, frame, -direction * back, seen) for back in (1, 2)):
            return direction
        if whole and all(0 <= frame - direction * back < grid.frame_count
                         and seen(frame - direction * back) for back in (1, 2)):
            return direction
    return 0


def sweep_ahead(grid, frame: int, seen, held, byte_count, max_bytes: int) -> list[int]:
    """The frames of ``frame``'s band a sweep reaching ``frame`` reads next, in order; none without a sweep.

    They follow ``frame`` in the sweep's direction, stopping at one ``held``,
    after ``max_bytes`` (``byte_count(k)`` each) and at the end of ``frame``'s
    frame row, unless the sweep came into the row across its edge: whole rows
    are then being read, and it goes on across rows.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> grid = FrameGrid(64, 64, 16, 16, 2)           # 2 bands, 4 x 4 positions: frame = 2 * position + band
    >>> sweep_ahead(grid, 27, {31, 29}.__contains__, lambda k: False, lambda k: 10, 1000)  # the rest of the row
    [25]
    >>> sweep_ahead(grid, 23, {27, 25}.__contains__, lambda k: False, lambda k: 10, 45)  # came in at the edge
    [21, 19, 17, 15]
    """
    direction = swept(grid, frame, seen)
    if not direction:
        return []
    column = frame // grid.frames_per_position % grid.tiles_across
    came_in_at_edge = column == (grid.tiles_across - 1 if direction < 0 else 0)
    return along_band(grid, frame, direction, held, byte_count, max_bytes, across_rows=came_in_at_edge)


def along_band(grid, frame: int, direction: int, held, byte_count, max_bytes: int, *, across_rows: bool) -> list[int]:
    """The frames after ``frame`` along its band in ``direction``, up to one ``held``, at most ``max_bytes`` of them.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> grid = FrameGrid(64, 64, 16, 16, 2)
    >>> along_band(grid, 4, 1, lambda k: k == 14, lambda k: 10, 1000, across_rows=True)
    [6, 8, 10, 12]
    """
    step, positions, across = grid.frames_per_position, grid.positions, grid.tiles_across
    position = frame // step
    ahead, total, p = [], 0, position + direction
    while 0 <= p < positions and (across_rows or p // across == position // across):
        k = frame + (p - position) * step
        if held(k):
            break
        total += byte_count(k)
        if total > max_bytes and ahead:
            break
        ahead.append(k)
        p += direction
    return ahead


def in_file_order(grid, frame: int, seen, direction: int) -> list[int]:
    """The frames not ``seen`` from ``frame``'s position on in ``direction``, then those behind it, each run in file order.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> in_file_order(FrameGrid(48, 16, 16, 16, 2), 3, {5}.__contains__, 1)   # 3 positions of 2 bands
    [2, 3, 4, 1, 0]
    """
    step, end = grid.frames_per_position, grid.frame_count
    first, last = frame // step * step, (frame // step + 1) * step
    runs = (range(first, end), range(first - 1, -1, -1)) if direction > 0 else \
        (range(last - 1, -1, -1), range(last, end))
    return [k for run in runs for k in run if not seen(k)]


def split(frames: list[int], byte_count, request_bytes: int, first: int = 1) -> list[list[int]]:
    """``frames`` in spans of merged requests of at most ``request_bytes``: ``first`` requests, then twice as many each.

    A request holds neighbouring frames, as the read engine merges them.

    >>> split([4, 5, 3, 2, 9, 1, 0, 7], lambda k: 10, 25)   # 4-5; 3-2 and 9; then 1-0 and 7
    [[4, 5], [3, 2, 9], [1, 0, 7]]
    """
    spans, lo, hi, total, held, room = [[]], None, None, 0, 0, first
    for k in frames:
        size = byte_count(k)
        if lo is not None and k in (lo - 1, hi + 1) and total + size <= request_bytes:
            lo, hi, total = min(lo, k), max(hi, k), total + size
        else:
            if held == room:
                spans.append([])
                held, room = 0, 2 * room
            lo, hi, total, held = k, k, size, held + 1
        spans[-1].append(k)
    return spans


def _seen_before(grid, frame: int, back: int, seen) -> bool:
    """Whether the frame ``back`` places before ``frame`` in a band-major sweep's order was ``seen``."""
    step, positions = grid.frames_per_position, grid.positions
    band, position = frame % step, frame // step
    place = band * positions + position + back
    if not 0 <= place < step * positions:
        return False
    return seen((place % positions) * step + place // positions)


#: This process's frames read ahead.
shared = ReadAhead()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=shared._after_fork)


def read_frame(image, frame: int) -> bytes:
    """Frame ``frame``'s compressed bytes, through :data:`shared` for a remote image keeping to a version.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> image = xarray_rumi.open_image(path, header=xarray_rumi.write(path, np.zeros((8, 8), "uint8"), tile_size=4))
    >>> len(read_frame(image, 0)) == image.header.byte_count(0)   # local: read as it is, no read-ahead
    True
    """
    key = _key(image)
    if key is None:
        return image.fetch(*([v] for v in image.frame_range(frame)))[0]
    header = image.header

    def fetch(frames: list[int]) -> list[bytes]:
        starts, stops = header.ranges(frames)
        if len(frames) == 1:
            return image.fetch(starts, stops)  # as without read-ahead
        # A gap between frames read ahead is a frame no read asked for (another band's, or one
        # fetched already): read through only when smaller than any frame (the blob's head and
        # tags beside a first frame), never across a whole frame.
        return image.fetch(starts, stops, max_gap=min(MAX_GAP, max(0, header.count_min - 1)))

    image_bytes = header.file_size - header.base_frame_offset
    return shared.take(key, frame, image.grid, header.byte_count, fetch, image_bytes)


def _key(image) -> bytes | None:
    """The cache's name for ``image``'s frames, or ``None`` where it reads nothing ahead."""
    source = image.source
    if getattr(source, "is_local", True):
        return None
    if image.verify:
        image._pin_file()  # the version its reads keep to, as its fetch fixes it anyway
    if getattr(source, "identity", None) is None:
        return None  # nothing would tell a replaced file's frames from the old ones
    return image.blob_key


__all__ = ["CACHE_BYTES", "QUEUED_IMAGES", "READ_AHEAD_BYTES", "RECENT_FRAMES", "SPANS_IN_FLIGHT", "ReadAhead",
           "along_band", "in_file_order", "read_frame", "shared", "split", "swept", "sweep_ahead"]
