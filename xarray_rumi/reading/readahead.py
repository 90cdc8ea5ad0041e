"""Read-ahead for remote whole-frame reads: Dask tasks of neighbouring frames share one round trip.

With ``chunks={}`` every Dask task reads one frame, so a remote read would be
a request per frame, a round trip each, as many at once as Dask has workers:
latency-bound.  Here a task whose frame misses, while the frames just before
it along its band were asked for too (a sweep: what a Dask compute of many
frames does, in either direction), fetches the frames that follow in the
sweep's direction as well, in one :meth:`~xarray_rumi.reading.image.RumiImage.fetch`
(the read engine merges what lies together; the blob check, ``If-Match``,
retries and truncation work as for any fetch), and keeps the extra frames in
a small per-process cache until their own tasks take them:

- a task asking for a frame in the cache **takes** it (the cache lets go of
  it: a frame is read once per compute, and its memory is freed on use);
- a task asking for a frame whose fetch is **in flight** waits for that fetch
  rather than sending its own;
- a read-ahead stays on the frame's band (a read of one band reads no other)
  and in its frame row, unless the sweep entered the row at its edge (whole
  rows are being read): then it runs across rows, up to :data:`READ_AHEAD_BYTES`;
  a frame read alone (a chip, a column of frames) is no sweep and reads nothing more;
- a read-ahead over whole rows is read on when its sweep is half through it:
  the task taking the frame at its middle fetches the next span of the band,
  while the other tasks decode the frames still held.

The cache is keyed by the image's :attr:`~xarray_rumi.reading.image.RumiImage.blob_key`
(address, storage options, blob and the **version** of the file its reads
keep to), so a replaced file never gets old bytes; it holds at most
:data:`CACHE_BYTES`, oldest frames dropped first (a dropped frame is only
fetched again by its task); it is emptied in a forked child.  Local files
and sources that keep to no version are never read ahead.  A frame from the
cache is decoded and checked as any other; a read-ahead that fails leaves
each task to fetch its own frame, so its error is the one it gets today.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..io.engine import MAX_GAP
from ..runtime.fork import in_forked_child

#: Compressed bytes one read-ahead fetches at most (its own frame aside): a band of 4096 px in
#: 512 px uint16 frames (64 of 256 KiB), two waves of the engine's 32 requests in flight.  At
#: 50 ms, 2 MiB / 8 MiB / 16 MiB took a chunks={} read in 2.7 / 1.6 / 1.2 s (docs/benchmarks.md,
#: "Remote reads"); the cache bound leaves room for a few such sweeps at once.
READ_AHEAD_BYTES = 16 * 1024 * 1024
#: Compressed bytes the process keeps of frames read ahead and not yet taken.
CACHE_BYTES = 64 * 1024 * 1024
#: Frames asked for lately that a process remembers: a sweep is told from frames read alone by
#: them, and stops at them (Dask's order goes back and forth within a few dozen tasks).  Few
#: enough that a second compute of the same image, hundreds of frames later, reads ahead again.
RECENT_FRAMES = 64


class ReadAhead:
    """Frames read ahead and not yet taken, the fetches in flight, and the frames asked for lately.

    ``take(key, frame, grid, byte_count, fetch)`` gives frame ``frame``'s
    bytes: from the cache, from a fetch in flight, or by ``fetch(frames)``
    (the bytes of ``frames``, in order), which it calls with the frame first
    and the frames it reads ahead after.  Thread-safe; starts no thread.

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
                 recent_frames: int = RECENT_FRAMES) -> None:
        self.max_bytes, self.read_ahead_bytes, self.recent_frames = max_bytes, read_ahead_bytes, recent_frames
        self._after_fork()

    def _after_fork(self) -> None:
        # A forked child starts empty: the parent's frames and fetches are not its own, and a
        # lock another thread held at fork time would never be released there.
        self._lock = threading.Lock()
        self._cached: OrderedDict = OrderedDict()   # (key, frame) -> bytes, oldest first
        self._bytes = 0
        self._pending: dict = {}                    # (key, frame) -> Event set when its fetch ends
        self._recent: OrderedDict = OrderedDict()   # (key, frame) asked for lately
        self._refills: dict = {}                    # (key, frame) -> (last frame read ahead, direction)

    @property
    def cached_bytes(self) -> int:
        """Bytes of frames held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._cached)

    def clear(self) -> None:
        """Drop every frame held (fetches in flight keep going)."""
        with self._lock:
            self._cached.clear()
            self._bytes = 0

    def note(self, key: bytes, frame: int) -> None:
        """Record that ``frame`` was read without the cache, as a sweep's first frame may be."""
        with self._lock:
            self._note(key, frame)

    def take(self, key: bytes, frame: int, grid, byte_count, fetch) -> bytes:
        ahead, refill = None, None  # what this call fetches, if it fetches
        with self._lock:
            self._note(key, frame)
            found = self._pop(key, frame)
            if found is not None:
                refill = self._plan_refill(key, frame, grid, byte_count)
            else:
                event = self._pending.get((key, frame))
                if event is None:
                    ahead = self._plan(key, frame, grid, byte_count)
                    event = self._hold(key, [frame, *ahead])
        if found is not None:
            if refill is not None:
                self._refill(key, grid, *refill, fetch)
            return found
        return self._wait_or_fetch(key, frame, grid, ahead, event, fetch)

    def _wait_or_fetch(self, key, frame, grid, ahead, event, fetch) -> bytes:
        if ahead is None:  # another thread's fetch holds this frame
            event.wait()
            with self._lock:
                found = self._pop(key, frame)
            # Its fetch failed (or the frame was dropped since): this task reads its own frame.
            return found if found is not None else fetch([frame])[0]
        try:
            payloads = fetch([frame, *ahead])
        except BaseException as exc:
            self._settle(key, [frame, *ahead], [], event)  # never leave a waiter waiting
            if not ahead or not isinstance(exc, Exception):
                raise
            # The read-ahead failed, perhaps for another frame's sake: this frame alone, as
            # without read-ahead, so the task sees its own bytes or its own error.
            return fetch([frame])[0]
        self._settle(key, ahead, payloads[1:], event, also_done=[frame])
        self._mark_refill(key, grid, frame, ahead)
        return payloads[0]

    def _hold(self, key, frames) -> threading.Event:
        """Mark ``frames`` in flight under one new event (the lock is held)."""
        event = threading.Event()
        for k in frames:
            self._pending[(key, k)] = event
        return event

    def _settle(self, key, frames, payloads, event, also_done=()) -> None:
        """Keep ``frames``' payloads, end their pending state (and ``also_done``'s), wake the waiters."""
        with self._lock:
            for k, payload in zip(frames, payloads):
                self._keep(key, k, payload)
            for k in (*also_done, *frames):
                if self._pending.get((key, k)) is event:
                    del self._pending[(key, k)]
        event.set()

    def _mark_refill(self, key, grid, frame: int, ahead: list[int]) -> None:
        """A read-ahead over whole rows is read on when its sweep is half through it: fetching overlaps decoding."""
        step, across = grid.frames_per_position, grid.tiles_across
        if not ahead or (frame // step) // across == (ahead[-1] // step) // across:
            return  # within one row: whether the sweep goes on is not known
        direction = 1 if ahead[-1] > frame else -1
        with self._lock:
            if len(self._refills) > 4096:  # marks of frames dropped unread
                self._refills.clear()
            self._refills[(key, ahead[len(ahead) // 2])] = (ahead[-1], direction)

    def _plan_refill(self, key, frame, grid, byte_count):
        """``(frames, event)`` to read on from a marked frame just taken, or ``None`` (the lock is held)."""
        mark = self._refills.pop((key, frame), None)
        if mark is None:
            return None
        last, direction = mark
        more = along_band(grid, last, direction, lambda k: self._seen(key, k), byte_count, self.read_ahead_bytes,
                          across_rows=True)
        return (last, more, self._hold(key, more)) if more else None

    def _refill(self, key, grid, last, more, event, fetch) -> None:
        try:
            payloads = fetch(more)
        except Exception:  # noqa: BLE001 - each task then fetches its own frame and sees its own error
            payloads = []
        except BaseException:
            self._settle(key, more, [], event)  # never leave a waiter waiting
            raise
        self._settle(key, more, payloads, event)
        if payloads:
            self._mark_refill(key, grid, last, more)

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

    def _plan(self, key, frame: int, grid, byte_count) -> list[int]:
        """The frames to fetch after ``frame``: the sweep's next ones along its band, or none."""
        return sweep_ahead(grid, frame, lambda k: self._seen(key, k), lambda k: self._seen(key, k),
                           byte_count, self.read_ahead_bytes)


def sweep_ahead(grid, frame: int, seen, held, byte_count, max_bytes: int) -> list[int]:
    """The frames of ``frame``'s band a sweep reaching ``frame`` reads next, in order; none without a sweep.

    A sweep is two frames in a row just before ``frame`` in a sweep's order
    (the band's positions in raster order, bands one after the other; either
    way) both ``seen``.  The frames
    returned follow ``frame`` in the sweep's direction, stopping at one
    ``held`` (asked for lately, in flight or cached), after ``max_bytes`` (``byte_count(k)``
    each) and at the end of ``frame``'s frame row, unless the sweep came into
    the row across its edge: whole rows are then being read, and it goes on
    across rows.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> grid = FrameGrid(64, 64, 16, 16, 2)           # 2 bands, 4 x 4 positions: frame = 2 * position + band
    >>> seen = {31, 29}.__contains__                 # band 1 at positions 15, 14 (the last row, from its end)
    >>> sweep_ahead(grid, 27, seen, lambda k: False, lambda k: 10, 1000)   # position 13: the rest of the row
    [25]
    >>> sweep_ahead(grid, 23, {27, 25}.__contains__, lambda k: False, lambda k: 10, 45)  # came in at the edge
    [21, 19, 17, 15]
    >>> sweep_ahead(grid, 27, {31}.__contains__, lambda k: False, lambda k: 10, 1000)     # one frame: no sweep
    []
    >>> sweep_ahead(grid, 30, {1, 3}.__contains__, lambda k: False, lambda k: 10, 25)  # band 1 done: on to band 0
    [28, 26]
    """
    step = grid.frames_per_position
    position, across = frame // step, grid.tiles_across
    for direction in (-1, 1):
        if all(_seen_before(grid, frame, -direction * back, seen) for back in (1, 2)):
            break
    else:
        return []
    column = position % across
    came_in_at_edge = column == (across - 1 if direction < 0 else 0)
    return along_band(grid, frame, direction, held, byte_count, max_bytes, across_rows=came_in_at_edge)


def along_band(grid, frame: int, direction: int, held, byte_count, max_bytes: int, *, across_rows: bool) -> list[int]:
    """The frames after ``frame`` along its band in ``direction`` (+1/-1 position), up to one ``held``.

    At most ``max_bytes`` of them (at least one), within ``frame``'s frame row
    unless ``across_rows``.

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


def _seen_before(grid, frame: int, back: int, seen) -> bool:
    """Whether the frame ``back`` places before ``frame`` in a sweep's order was ``seen``.

    The order is the band's positions in raster order, bands one after the other
    (Dask's order for a band-major array), so a sweep that ends one band goes on
    into the next without frames read alone.
    """
    step, positions = grid.frames_per_position, grid.positions
    band, position = frame % step, frame // step
    place = band * positions + position + back
    if not 0 <= place < step * positions:
        return False
    return seen((place % positions) * step + place // positions)


#: This process's frames read ahead.
shared = ReadAhead()
in_forked_child(shared._after_fork)


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
        payload = image.fetch(*([v] for v in image.frame_range(frame)))[0]
        key = _key(image)  # a first read that pinned its source names its frames now: a sweep may start here
        if key is not None:
            shared.note(key, frame)
        return payload
    header = image.header

    def fetch(frames: list[int]) -> list[bytes]:
        starts, stops = header.ranges(frames)
        if len(frames) == 1:
            return image.fetch(starts, stops)  # as without read-ahead
        # Along a band of tile frames the gaps are other bands' frames, which the sweep does not
        # want (Dask reads band after band): a gap is read through only when smaller than any
        # frame (the blob's head and tags beside a first frame), never across a whole frame.
        return image.fetch(starts, stops, max_gap=min(MAX_GAP, max(0, header.count_min - 1)))

    return shared.take(key, frame, image.grid, header.byte_count, fetch)


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


__all__ = ["CACHE_BYTES", "READ_AHEAD_BYTES", "RECENT_FRAMES", "ReadAhead", "along_band", "read_frame", "shared",
           "sweep_ahead"]
