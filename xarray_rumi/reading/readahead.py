"""Read-ahead for remote ``chunks={}`` tasks: a frame continuing a sweep brings the next along (docs/backend.md)."""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict

import numpy as np

from ..io.engine import MAX_GAP, MAX_REQUEST, HandedOn
from ..io.source import pinned_by_next_read
from ..runtime.fork import in_forked_child

#: Compressed bytes one read-ahead along a band fetches at most.
READ_AHEAD_BYTES = 16 * 1024 * 1024
#: Compressed bytes the process keeps of frames read ahead and not yet taken, or in flight to it.
CACHE_BYTES = 64 * 1024 * 1024
#: Frames asked for lately that tell a sweep (Dask's order goes back and forth within a few dozen tasks).
RECENT_FRAMES = 64
#: Images read ahead whole lately, not read ahead whole again (their frames are cached, taken or failed).
WHOLE_IMAGES = 64
#: Bytes of one request of a whole-image read-ahead: all go out at once, so size sets the GETs, not the wait.
WHOLE_REQUEST = 4 * 1024 * 1024
#: Bytes of the request holding the sweep's next frames, smaller: their tasks wait for it.
FIRST_REQUEST = MAX_REQUEST


class _Span(threading.Event):
    """Frames one fetch brings: set once they are kept, or failed."""

    def __init__(self, frames: list[int]) -> None:
        super().__init__()
        self.frames = frames


class ReadAhead:
    """The cache of frames read ahead; ``take`` gives a frame's bytes, else ``fetch(frames)``'s; thread-safe.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> ahead, sent, row = ReadAhead(), [], FrameGrid(64, 16, 16, 16, 1)  # one band, a row of 4 frames
    >>> fetch = lambda frames: sent.append(frames) or [b"%d" % k for k in frames]
    >>> [ahead.take(b"key", k, row, lambda k: 100, fetch) for k in range(4)], sent  # a sweep at frame 2
    ([b'0', b'1', b'2', b'3'], [[0], [1], [2, 3]])
    """

    def __init__(self, *, max_bytes: int = CACHE_BYTES, read_ahead_bytes: int = READ_AHEAD_BYTES) -> None:
        self.max_bytes, self.read_ahead_bytes = max_bytes, read_ahead_bytes
        self._after_fork()

    def _after_fork(self) -> None:
        # A forked child starts empty: a lock held at fork time would never be released there.
        self._lock = threading.Lock()
        self._cached: OrderedDict[tuple[bytes, int], bytes] = OrderedDict()
        self._bytes = 0
        self._reserved = 0  # bytes of whole-image read-aheads still in flight
        self._pending: dict[tuple[bytes, int], _Span] = {}
        self._recent: OrderedDict[tuple[bytes, int], None] = OrderedDict()
        self._refills: dict[tuple[bytes, int], tuple[int, int]] = {}
        self._read_whole: OrderedDict[bytes, None] = OrderedDict()
        self._first_reads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # source -> lock of its pinning read

    def first_read_lock(self, source) -> threading.Lock:
        """The lock of the read that pins ``source``: its other tasks wait for it, then read ahead."""
        with self._lock:
            return self._first_reads.setdefault(source, threading.Lock())

    def note(self, key: bytes, frame: int) -> None:
        """Record that ``frame`` was read without the cache, as a sweep's first frame may be."""
        with self._lock:
            self._note(key, frame)

    def take(self, key: bytes, frame: int, grid, byte_count, fetch, image_bytes: int | None = None) -> bytes:
        """Frame ``frame`` of the image ``key`` (``image_bytes`` of frames: read ahead whole if they fit).

        ``fetch(frames)`` gives their bytes; a whole image is fetched as ``fetch(runs, on_ready)``:
        lists of neighbouring frames, one request each, handed to ``on_ready(frames, payloads)`` as
        they come.
        """
        own = refill = whole = None
        with self._lock:
            self._note(key, frame)
            found = self._pop(key, frame)
            span = self._pending.get((key, frame))
            if found is not None:
                refill = self._plan_refill(key, frame, grid, byte_count)
            elif span is None:
                whole = self._plan_whole(key, frame, grid, byte_count, image_bytes)
                if whole is None:
                    own = span = self._plan_along(key, frame, grid, byte_count)
                else:
                    span = self._pending[(key, frame)]
        if whole is not None:
            # Fetched by the task that saw the sweep: each request's frames reach the tasks waiting
            # for them as it completes, so the other workers decode while this one receives the rest.
            self._fetch_whole(key, *whole, byte_count, fetch)
        if found is not None:
            if refill is not None:
                self._refill(key, grid, *refill, fetch)
            return found
        if own is not None:
            return self._fetch_own(key, frame, grid, own, fetch)
        span.wait()
        with self._lock:
            found = self._pop(key, frame)
        # Its fetch failed (or the frame was dropped since): this task reads its own frame.
        return found if found is not None else fetch([frame])[0]

    def _fetch_own(self, key, frame: int, grid, span: _Span, fetch) -> bytes:
        frames = span.frames  # this task's frame first (_plan_along)
        try:
            payloads = fetch(frames)
        except BaseException as exc:
            self._settle(key, span, [])  # never leave a waiter waiting
            if len(frames) == 1 or not isinstance(exc, Exception):
                raise
            # Perhaps for another frame's sake: this frame alone, so the task sees its own error.
            return fetch([frame])[0]
        self._settle(key, span, list(zip(frames[1:], payloads[1:])))
        self._mark_refill(key, grid, frame, frames[1:])
        return payloads[0]

    def _fetch_whole(self, key, frames: list[int], reserved: int, direction: int, byte_count, fetch) -> None:
        """Fetch a whole image's ``frames``, each kept and its waiters woken as its request completes."""
        arrived: set[int] = set()
        spans = _runs(frames, byte_count, direction=direction, first_bytes=FIRST_REQUEST, run_bytes=WHOLE_REQUEST)

        def ready(ks, payloads) -> None:
            nonlocal reserved
            with self._lock:
                for k, payload in zip(ks, payloads):
                    reserved -= len(payload)
                    self._reserved -= len(payload)
                    arrived.add(k)
                    self._keep(key, k, payload)
                    self._release(key, self._pending.get((key, k)))

        try:
            fetch(spans, ready)
        except Exception:  # noqa: BLE001 - each task then fetches its own frame and sees its own error
            pass
        finally:
            with self._lock:
                self._reserved -= reserved
                for k in frames:
                    if k not in arrived:
                        self._release(key, self._pending.get((key, k)))

    def _settle(self, key, span: _Span, kept) -> None:
        with self._lock:
            for k, payload in kept:
                self._keep(key, k, payload)
            self._release(key, span)

    def _release(self, key, span: _Span | None) -> None:
        if span is None:
            return
        for k in span.frames:
            if self._pending.get((key, k)) is span:
                del self._pending[(key, k)]
        span.set()

    def _hold(self, key, span: _Span) -> _Span:
        for k in span.frames:
            self._pending[(key, k)] = span
        return span

    def _plan_whole(self, key, frame: int, grid, byte_count, image_bytes) -> tuple | None:
        """``(frames, bytes, direction)`` of a whole-image read-ahead continuing a sweep at ``frame``, held."""
        if image_bytes is None or image_bytes > self.max_bytes or key in self._read_whole:
            return None
        seen = functools.partial(self._seen, key)
        direction = _swept(grid, frame, seen, whole=True)
        if not direction:
            return None
        frames = [frame, *_in_file_order(grid, frame, lambda k: k == frame or seen(k), direction)]
        size = sum(byte_count(k) for k in frames)
        if self._reserved + size > self.max_bytes:
            return None  # other images' read-aheads in flight fill the cache: read along the band
        self._reserved += size
        self._read_whole[key] = None
        if len(self._read_whole) > WHOLE_IMAGES:
            self._read_whole.popitem(last=False)
        for k in frames:
            self._hold(key, _Span([k]))
        return frames, size, direction

    def _plan_along(self, key, frame: int, grid, byte_count) -> _Span:
        """The span this task fetches: its frame, and the next of its band if it continues a sweep."""
        ahead = _sweep_ahead(grid, frame, functools.partial(self._seen, key), byte_count, self.read_ahead_bytes)
        return self._hold(key, _Span([frame, *ahead]))

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
        return (last, self._hold(key, _Span(more))) if more else None

    def _refill(self, key, grid, last, span: _Span, fetch) -> None:
        try:
            payloads = fetch(span.frames)
        except Exception:  # noqa: BLE001 - each task then fetches its own frame and sees its own error
            payloads = []
        except BaseException:
            self._settle(key, span, [])
            raise
        self._settle(key, span, list(zip(span.frames, payloads)))
        if payloads:
            self._mark_refill(key, grid, last, span.frames)

    def _note(self, key, frame) -> None:
        self._recent[(key, frame)] = None
        self._recent.move_to_end((key, frame))
        while len(self._recent) > RECENT_FRAMES:
            self._recent.popitem(last=False)

    def _pop(self, key, frame):
        found = self._cached.pop((key, frame), None)
        if found is not None:
            self._bytes -= len(found)
        return found

    def _keep(self, key, frame, payload: bytes) -> None:
        self._cached[(key, frame)] = payload
        self._bytes += len(payload)
        while self._bytes + self._reserved > self.max_bytes and self._cached:
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


def _runs(frames: list[int], byte_count, *, direction: int, first_bytes: int, run_bytes: int) -> list[list[int]]:
    """``frames`` in runs of neighbours (which lie back to back), at most ``run_bytes`` each, in the file's order;
    first the run of ``frames[0]``, from it on in ``direction``, at most ``first_bytes``: the sweep's next tasks wait
    for it.

    >>> _runs([2, 0, 1, 3, 4, 6], lambda k: 10, direction=1, first_bytes=20, run_bytes=20)
    [[2, 3], [0, 1], [4], [6]]
    """
    wanted = set(frames)
    head, total, k = [frames[0]], byte_count(frames[0]), frames[0] + direction
    while k in wanted and total + byte_count(k) <= first_bytes:
        head.append(k)
        total += byte_count(k)
        k += direction
    out, taken = [sorted(head)], set(head)
    for k in sorted(wanted - taken):
        size = byte_count(k)
        if len(out) > 1 and k == out[-1][-1] + 1 and total + size <= run_bytes:
            out[-1].append(k)
            total += size
        else:
            out.append([k])
            total = size
    return out


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
in_forked_child(lambda: shared._after_fork())  # whichever ReadAhead is ``shared`` then


def read_frame(image, frame: int) -> bytes:
    """Frame ``frame``'s compressed bytes, through :data:`shared` for a remote image keeping to a version."""
    key = _key(image)
    if key is None:
        if not pinned_by_next_read(image.source):
            return image.fetch(*([v] for v in image.frame_range(frame)))[0]
        # One task's read pins the source (its answer states the version); the others wait for it rather
        # than each fetch its frame alone and again in the read-ahead's spans.
        with shared.first_read_lock(image.source):
            key = _key(image)
            if key is None:
                payload = image.fetch(*([v] for v in image.frame_range(frame)))[0]
                key = _key(image)  # pinned now: a sweep may start here
                if key is not None:
                    shared.note(key, frame)
                return payload
    header = image.header

    def fetch(frames: list, on_ready=None) -> list[bytes] | None:
        if on_ready is not None:
            return _fetch_runs(image, frames, on_ready)
        starts, stops = header.ranges(frames)
        if len(frames) == 1:
            return image.fetch(starts, stops)
        # Read through a gap only when smaller than any frame (the blob's head beside a first
        # frame): a frame-sized gap is a frame no task asked for, or one fetched already.
        return image.fetch(starts, stops, max_gap=min(MAX_GAP, max(0, header.count_min - 1)))

    image_bytes = header.frames_end - header.base_frame_offset
    return shared.take(key, frame, image.grid, header.byte_count, fetch, image_bytes)


def _fetch_runs(image, spans: list[list[int]], on_ready) -> None:
    """Each run of neighbouring frames as one range, its frames handed to ``on_ready`` as its request completes."""
    starts, stops = image.header.ranges([k for run in spans for k in run])
    # a run is frames k, k + 1, ...: the blob's offsets are its counts summed, so their bytes lie back to back
    firsts = np.cumsum([0, *(len(run) for run in spans)])
    run_starts, run_stops = starts[firsts[:-1]], stops[firsts[1:] - 1]

    def ready(positions, pieces) -> None:
        for p, piece in zip(positions, pieces):
            view, base = memoryview(piece), run_starts[p]
            on_ready(spans[p], [view[starts[i] - base:stops[i] - base] for i in range(firsts[p], firsts[p + 1])])

    payloads = image.fetch(run_starts, run_stops, max_gap=0, on_ready=ready)
    # what the engine did not hand on as it came (a fetch of one range) comes back here
    rest = [p for p, payload in enumerate(payloads) if not isinstance(payload, HandedOn)]
    ready(rest, [payloads[p] for p in rest])


def _key(image) -> bytes | None:
    """The cache's name for ``image``'s frames, or ``None`` where it reads nothing ahead."""
    source = image.source
    if getattr(source, "is_local", True):
        return None
    if image.verify and not getattr(source, "pins_on_read", False):
        image._pin_file()  # the version its reads keep to, as its fetch fixes it anyway (else its answers do)
    identity = getattr(source, "identity", None)
    if identity is None or (identity.etag is None and identity.version_id is None):
        # nothing would tell a replaced file's frames from the old ones: a size alone does not
        return None
    return image.blob_key


__all__ = ["CACHE_BYTES", "FIRST_REQUEST", "READ_AHEAD_BYTES", "RECENT_FRAMES", "ReadAhead", "WHOLE_REQUEST",
           "read_frame", "shared"]
