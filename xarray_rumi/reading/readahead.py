"""Read-ahead for remote ``chunks={}`` tasks: a frame continuing a sweep brings the next along (docs/backend.md)."""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict, deque

from ..io.engine import MAX_GAP, MAX_REQUEST
from ..io.source import pinned_by_next_read
from ..runtime.fork import in_forked_child

#: Compressed bytes one read-ahead along a band fetches at most.
READ_AHEAD_BYTES = 16 * 1024 * 1024
#: Compressed bytes the process keeps of frames read ahead and not yet taken.
CACHE_BYTES = 64 * 1024 * 1024
#: Frames asked for lately that tell a sweep (Dask's order goes back and forth within a few dozen tasks).
RECENT_FRAMES = 64
#: Images with spans queued for their tasks, at most.
QUEUED_IMAGES = 64
#: Spans of a whole-image read-ahead in flight at once: more share the link and all arrive late together.
SPANS_IN_FLIGHT = 2


class _Span:
    """Frames one fetch brings, and the event their waiters wait for; unclaimed: queued, no thread fetches it."""

    __slots__ = ("frames", "done", "claimed", "along")

    def __init__(self, frames: list[int], claimed: bool = True, along: bool = False) -> None:
        self.frames, self.done, self.claimed, self.along = frames, threading.Event(), claimed, along


class ReadAhead:
    """The cache of frames read ahead; ``take`` gives a frame's bytes, else ``fetch(frames)``'s; thread-safe.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> ahead, sent, row = ReadAhead(), [], FrameGrid(64, 16, 16, 16, 1)  # one band, a row of 4 frames
    >>> fetch = lambda frames: sent.append(frames) or [b"%d" % k for k in frames]
    >>> [ahead.take(b"key", k, row, lambda k: 100, fetch) for k in range(4)], sent  # a sweep at frame 2
    ([b'0', b'1', b'2', b'3'], [[0], [1], [2, 3]])
    """

    def __init__(self, *, max_bytes: int = CACHE_BYTES, read_ahead_bytes: int = READ_AHEAD_BYTES,
                 recent_frames: int = RECENT_FRAMES, spans_in_flight: int = SPANS_IN_FLIGHT) -> None:
        self.max_bytes, self.read_ahead_bytes, self.recent_frames = max_bytes, read_ahead_bytes, recent_frames
        self.spans_in_flight = spans_in_flight
        self._after_fork()

    def _after_fork(self) -> None:
        # A forked child starts empty: a lock held at fork time would never be released there.
        self._lock = threading.Lock()
        self._cached: OrderedDict[tuple[bytes, int], bytes] = OrderedDict()
        self._bytes = 0
        self._pending: dict[tuple[bytes, int], _Span] = {}
        self._queued: dict[bytes, deque[_Span]] = {}
        self._flying: dict[bytes, int] = {}  # claimed whole-image spans
        self._recent: OrderedDict[tuple[bytes, int], None] = OrderedDict()
        self._refills: dict[tuple[bytes, int], tuple[int, int]] = {}

    def note(self, key: bytes, frame: int) -> None:
        """Record that ``frame`` was read without the cache, as a sweep's first frame may be."""
        with self._lock:
            self._note(key, frame)

    def take(self, key: bytes, frame: int, grid, byte_count, fetch, image_bytes: int | None = None) -> bytes:
        """Frame ``frame`` of the image ``key`` (``image_bytes`` of frames: read ahead whole if they fit)."""
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
        if extra is not None:  # keeps the link busy while the others decode
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

    def _fetch_own(self, key, frame: int, grid, span: _Span, fetch) -> bytes:
        frames = [frame, *(k for k in span.frames if k != frame)]
        try:
            payloads = fetch(frames)
        except BaseException as exc:
            self._settle(key, span, [])  # never leave a waiter waiting
            if len(frames) == 1 or not isinstance(exc, Exception):
                raise
            # Perhaps for another frame's sake: this frame alone, so the task sees its own error.
            return fetch([frame])[0]
        self._settle(key, span, list(zip(frames[1:], payloads[1:])))
        if span.along:
            self._mark_refill(key, grid, frame, frames[1:])
        return payloads[0]

    def _run(self, key, span: _Span, fetch) -> bool:
        """Fetch a span for other tasks; whether it came (if not, each fetches its own frame)."""
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
        with self._lock:
            for k, payload in kept:
                self._keep(key, k, payload)
            self._release(key, span)

    def _release(self, key, span: _Span) -> None:
        for k in span.frames:
            if self._pending.get((key, k)) is span:
                del self._pending[(key, k)]
        if span.claimed and not span.along:
            self._flying[key] -= 1
            if not self._flying[key]:
                del self._flying[key]
        span.done.set()

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
        if key in self._queued and self._flying.get(key, 0) < self.spans_in_flight:
            return self._claim(key, self._queued[key][0])
        return None

    def _plan(self, key, frame: int, grid, byte_count, image_bytes) -> _Span:
        """The span this task fetches, holding its frame; further ones queued (the lock is held)."""
        seen = functools.partial(self._seen, key)
        direction = _swept(grid, frame, seen, whole=True) if image_bytes is not None and \
            image_bytes <= self.max_bytes else 0
        if not direction:
            ahead = _sweep_ahead(grid, frame, seen, byte_count, self.read_ahead_bytes)
            return self._hold(key, _Span([frame, *ahead], along=True))
        unseen = _in_file_order(grid, frame, lambda k: k != frame and self._seen(key, k), direction)
        # Growing spans: the first frames come after one short round trip, the rest in few.
        spans = [_Span(run, claimed=frame in run) for run in _split(unseen, byte_count, MAX_REQUEST)]
        for span in spans:
            self._hold(key, span)
        own = next(span for span in spans if span.claimed)
        self._flying[key] = self._flying.get(key, 0) + 1
        if len(spans) > 1:
            self._queued[key] = self._queued.pop(key, deque())  # the newest image: dropped last
            self._queued[key].extend(span for span in spans if span is not own)
            while len(self._queued) > QUEUED_IMAGES:  # images whose tasks never came
                oldest = next(iter(self._queued))
                for span in self._queued.pop(oldest):
                    self._release(oldest, span)
        return own

    def _mark_refill(self, key, grid, frame: int, ahead: list[int]) -> None:
        """A read-ahead along a band across rows is read on when its sweep is half through it."""
        step, across = grid.frames_per_position, grid.tiles_across
        if not ahead or (frame // step) // across == (ahead[-1] // step) // across:
            return  # within one row: whether the sweep goes on is not known
        direction = 1 if ahead[-1] > frame else -1
        with self._lock:
            if len(self._refills) > 4096:  # marks of frames dropped unread
                self._refills.clear()
            self._refills[(key, ahead[len(ahead) // 2])] = (ahead[-1], direction)

    def _plan_refill(self, key, frame, grid, byte_count):
        mark = self._refills.pop((key, frame), None)
        if mark is None:
            return None
        last, direction = mark
        more = _along_band(grid, last, direction, functools.partial(self._seen, key), byte_count,
                           self.read_ahead_bytes, across_rows=True)
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
        k = (key, frame)
        return k in self._recent or k in self._cached or k in self._pending


def _swept(grid, frame: int, seen, *, whole: bool = False) -> int:
    """+1/-1: the two frames before ``frame`` in band-major order (``whole``: or the file's) were ``seen``; else 0."""
    for direction in (-1, 1):
        if all(_seen_before(grid, frame, -direction * back, seen) for back in (1, 2)):
            return direction
        if whole and all(0 <= frame - direction * back < grid.frame_count
                         and seen(frame - direction * back) for back in (1, 2)):
            return direction
    return 0


def _sweep_ahead(grid, frame: int, seen, byte_count, max_bytes: int) -> list[int]:
    """The frames of ``frame``'s band a sweep reads next: to its row's end, or across rows if it came in at the edge."""
    direction = _swept(grid, frame, seen)
    if not direction:
        return []
    column = frame // grid.frames_per_position % grid.tiles_across
    came_in_at_edge = column == (grid.tiles_across - 1 if direction < 0 else 0)
    return _along_band(grid, frame, direction, seen, byte_count, max_bytes, across_rows=came_in_at_edge)


def _along_band(grid, frame: int, direction: int, held, byte_count, max_bytes: int, *, across_rows: bool) -> list[int]:
    """The frames after ``frame`` along its band, up to one ``held``, at most ``max_bytes`` (at least one)."""
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


def _in_file_order(grid, frame: int, seen, direction: int) -> list[int]:
    """The frames not ``seen`` from ``frame``'s position on in ``direction``, then those behind, in file order."""
    step, end = grid.frames_per_position, grid.frame_count
    first, last = frame // step * step, (frame // step + 1) * step
    runs = (range(first, end), range(first - 1, -1, -1)) if direction > 0 else \
        (range(last - 1, -1, -1), range(last, end))
    return [k for run in runs for k in run if not seen(k)]


def _split(frames: list[int], byte_count, request_bytes: int) -> list[list[int]]:
    """``frames`` in spans of 1, 2, 4, ... requests of neighbouring frames (as the engine merges them)."""
    spans, lo, hi, total, held, room = [[]], None, None, 0, 0, 1
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
    """Whether the frame ``back`` places before ``frame`` in band-major order was ``seen``."""
    step, positions = grid.frames_per_position, grid.positions
    band, position = frame % step, frame // step
    place = band * positions + position + back
    if not 0 <= place < step * positions:
        return False
    return seen((place % positions) * step + place // positions)


#: This process's frames read ahead.
shared = ReadAhead()
_first_reads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # source -> lock of its pinning read
_first_reads_lock = threading.Lock()


def _first_read_lock(source) -> threading.Lock:
    with _first_reads_lock:
        return _first_reads.setdefault(source, threading.Lock())


def _forget_first_reads() -> None:
    global _first_reads, _first_reads_lock
    _first_reads, _first_reads_lock = weakref.WeakKeyDictionary(), threading.Lock()


in_forked_child(_forget_first_reads)
in_forked_child(lambda: shared._after_fork())  # whichever ReadAhead is ``shared`` then


def read_frame(image, frame: int) -> bytes:
    """Frame ``frame``'s compressed bytes, through :data:`shared` for a remote image keeping to a version."""
    key = _key(image)
    if key is None:
        if not pinned_by_next_read(image.source):
            return image.fetch(*([v] for v in image.frame_range(frame)))[0]
        # One task's read pins the source (its answer states the version); the others wait for it rather
        # than each fetch its frame alone and again in the read-ahead's spans.
        with _first_read_lock(image.source):
            key = _key(image)
            if key is None:
                payload = image.fetch(*([v] for v in image.frame_range(frame)))[0]
                key = _key(image)  # pinned now: a sweep may start here
                if key is not None:
                    shared.note(key, frame)
                return payload
    header = image.header

    def fetch(frames: list[int]) -> list[bytes]:
        starts, stops = header.ranges(frames)
        if len(frames) == 1:
            return image.fetch(starts, stops)
        # Read through a gap only when smaller than any frame (the blob's head beside a first
        # frame): a frame-sized gap is a frame no task asked for, or one fetched already.
        return image.fetch(starts, stops, max_gap=min(MAX_GAP, max(0, header.count_min - 1)))

    image_bytes = header.frames_end - header.base_frame_offset
    return shared.take(key, frame, image.grid, header.byte_count, fetch, image_bytes)


def _key(image) -> bytes | None:
    """The cache's name for ``image``'s frames, or ``None`` where it reads nothing ahead."""
    source = image.source
    if getattr(source, "is_local", True):
        return None
    if image.verify and not getattr(source, "pins_on_read", False):
        image._pin_file()  # the version its reads keep to, as its fetch fixes it anyway (else its answers do)
    if getattr(source, "identity", None) is None:
        return None  # nothing would tell a replaced file's frames from the old ones
    return image.blob_key


__all__ = ["CACHE_BYTES", "QUEUED_IMAGES", "READ_AHEAD_BYTES", "RECENT_FRAMES", "SPANS_IN_FLIGHT", "ReadAhead",
           "read_frame", "shared"]
