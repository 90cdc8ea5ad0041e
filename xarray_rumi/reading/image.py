"""An opened rumi image and the one reader of its frames (docs/backend.md)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import RumiFormatError
from ..format.blob import Header
from ..format.geo import Georeferencing, check_claimed_georeferencing
from ..format.grid import overlap
from ..format.head import check_blob_against_ifd_head, ifd_head_ranges, split_head
from ..format.placement import MODEL_TRANSFORMATION_SIZE
from ..frames.codec import decode_frame
from ..io.engine import REMOTE_BATCH, request_bytes
from ..io.source import ByteSource, FileEndedError, pinned_by_next_read
from ..runtime.scratch import FRAME, scratch
from ..runtime.threads import idle_threads, share_with_idle, share_work
from . import readahead
from .buffers import result_array
from .checked import checked_blobs, pair_digest, version_key

log = logging.getLogger(__name__)

#: Compressed bytes a local read fetches at a time: a few frames a decoding thread.
DECODE_BATCH = 2 * 1024 * 1024


@dataclass(frozen=True)
class RumiImage:
    """An opened rumi file: its source, header, georeferencing (when known); ``verify=False`` trusts file and blob.

    ``claimed_by`` names who gave an unchecked ``georeferencing``. Pickles without bytes.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(12, dtype="uint8").reshape(3, 4), tile_size=2)
    >>> image = xarray_rumi.open_image(path, header=blob)
    >>> image.read().shape, image.read(rows=slice(1, 2)).tolist()
    ((1, 3, 4), [[[4, 5, 6, 7]]])
    >>> image.file_size == os.path.getsize(path)
    True
    """

    source: ByteSource
    header: Header
    georeferencing: Georeferencing | None = None
    verify: bool = True
    opened_size: int | None = field(default=None, compare=False)
    claimed_by: str | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        grid, sample = self.grid, self.sample_type
        dtype = sample.name if sample.name == str(sample.dtype) else f"{sample.name} (read as {sample.dtype})"
        geo = self.georeferencing
        crs = "CRS not read" if geo is None else geo.crs_code or "no CRS"
        bands = f"{grid.samples_per_pixel} band{'s' if grid.samples_per_pixel > 1 else ''}"
        return (f"<RumiImage {self.source.url}: {bands} x {grid.image_length} rows x "
                f"{grid.image_width} columns, {dtype}, {grid.frame_count} frames ({grid.frame_unit.name.lower()}, "
                f"{grid.tile_length} x {grid.tile_width} px), {crs}>")

    @property
    def grid(self):
        return self.header.grid

    @property
    def sample_type(self):
        return self.header.sample_type

    @cached_property
    def _pair_digest(self) -> bytes:
        return pair_digest(self.source, self.header, self.georeferencing if self.claimed_by is not None else None)

    @property
    def blob_key(self) -> bytes:
        return version_key(self._pair_digest, self.source)

    @cached_property
    def file_size(self) -> int:
        """The file's real size in bytes (``header.frames_end`` is only a claim)."""
        if self.opened_size is not None:
            return self.opened_size
        self._pin_file()
        return source_size(self.source)

    def __reduce__(self):
        # The check of the blob travels as a fact about the pair, recorded where the image is loaded.
        checked = self.verify and self.blob_key in checked_blobs
        return _load_image, (self.source, self.header, self.georeferencing, self.verify, checked, self.opened_size,
                             self.claimed_by)

    def frame_range(self, index: int) -> tuple[int, int]:
        start = self.header.offset(index)
        return start, start + self.header.byte_count(index)

    def fetch(self, starts, stops, *, max_gap: int | None = None, on_ready=None,
              max_request: int | None = None) -> list[bytes]:
        """The bytes ``[starts[i], stops[i])``, once the blob is checked; past the file's end: ``frames.truncated``."""
        given = {"max_gap": max_gap, "on_ready": on_ready, "max_request": max_request}
        options = {name: value for name, value in given.items() if value is not None}
        try:
            return self._fetch(starts, stops, options)
        except FileEndedError as ended:
            raise self.truncated(ended) from None

    def truncated(self, ended: FileEndedError) -> RumiFormatError:
        """The error for a range that ``ended`` says runs past the end of the file."""
        header, url = self.header, self.source.url
        if ended.start < header.base_frame_offset:
            return RumiFormatError(
                "file-profile.truncated",
                f"{url} is {ended.size} bytes, but its IFD and external values end at byte {header.base_frame_offset}")
        frame = header.frame_at(ended.start)
        return RumiFormatError(
            "frames.truncated",
            f"frame {frame} (bytes {ended.start}-{ended.stop}) runs past the end of {url}, which is {ended.size} "
            f"bytes; its frames end at byte {header.frames_end} ({header.frames_end - ended.size} bytes missing): "
            "the file was cut after its blob was made, or the blob is not this file's")

    def _pin_file(self):
        return pin_file(self.source)

    def fetch_as_ready(self, starts, stops, handle, *, max_request: int | None = None) -> list[tuple[int, bytes]]:
        """Fetch, calling ``handle(position, payload)`` as remote requests complete; returns the rest's pairs."""
        handed_on = np.zeros(len(starts), bool)
        latest: dict = {}  # handled when the next request arrives, so the last one's go to the caller's threads

        def ready(positions, payloads) -> None:
            arrived = dict(zip(positions, payloads))
            handed_on[positions] = True
            # a thread of this read waiting idle decodes them now, rather than after this thread's next request
            if share_with_idle([functools.partial(handle, p, payload) for p, payload in (*latest.items(),
                                                                                          *arrived.items())]):
                latest.clear()
                return
            for position, payload in latest.items():
                handle(position, payload)
            latest.clear()
            latest.update(arrived)

        remote = {} if self.source.is_local else {"on_ready": ready, "max_request": max_request}
        payloads = self.fetch(starts, stops, **remote)
        return [*latest.items(), *((position, payloads[position]) for position in np.flatnonzero(~handed_on).tolist())]

    def _fetch(self, starts, stops, options: dict) -> list[bytes]:
        if not self.verify:
            return self._read_ranges(starts, stops, options)
        # A source whose reads pin it learns the file's version from this read's answers: no request asks it first.
        unpinned = pinned_by_next_read(self.source)
        if not unpinned:
            self._pin_file()
            if self.blob_key in checked_blobs:
                return self._read_ranges(starts, stops, options)
        # A blob of another file decodes to garbage: hand frames on only once it is checked.
        gap = {k: v for k, v in options.items() if k != "on_ready"}
        if unpinned and checked_blobs.has_pair(self._pair_digest):
            payloads = self._read_ranges(starts, stops, gap)
            if self.blob_key not in checked_blobs:
                self.check_blob()
            return payloads
        pair = self._pair_digest
        lock = checked_blobs.lock_for(pair)
        if not lock.acquire(blocking=False):
            payloads = self._read_ranges(starts, stops, gap)
            with lock:
                if self.blob_key not in checked_blobs:  # the checking thread failed: check here, to raise its error
                    self.check_blob()
            return payloads
        try:
            if not unpinned and self.blob_key in checked_blobs:
                return self._read_ranges(starts, stops, gap)
            checks = self._head_ranges()
            # The head goes last, so a failing read names a frame's range first.
            payloads = self.source.read_many([*starts, *(a for a, _ in checks)], [*stops, *(b for _, b in checks)],
                                             **gap)
            if self.blob_key not in checked_blobs:
                self._check_head(*payloads[len(payloads) - len(checks):])
            return payloads[:len(payloads) - len(checks)]
        finally:
            checked_blobs.release(pair, lock)

    def check_blob(self) -> None:
        """Check the blob (and claimed georeferencing) against the file's IFD head now, reading only that."""
        checks = self._head_ranges()
        try:
            head = self.source.read_many([a for a, _ in checks], [b for _, b in checks])
        except FileEndedError as ended:
            raise self.truncated(ended) from None
        self._check_head(*head)

    def _head_ranges(self) -> list[tuple[int, int]]:
        return ifd_head_ranges(self.grid, georeferencing=self.claimed_by is not None)

    def _check_head(self, *payloads: bytes) -> None:
        claimed = self.claimed_by is not None
        head, sample_formats, tags = split_head(self.grid, payloads, georeferencing=claimed)
        try:
            check_blob_against_ifd_head(self.header, head, sample_formats)
            if claimed:
                file_says = Georeferencing.from_tags(tags[:MODEL_TRANSFORMATION_SIZE], tags[MODEL_TRANSFORMATION_SIZE:])
                check_claimed_georeferencing(self.georeferencing, file_says, claimed_by=self.claimed_by,
                                             file=self.source.url)
        except Exception as exc:
            log.info("refused the blob (or the georeferencing claimed) of %s: %s", self.source.url, exc)
            if isinstance(exc, RumiFormatError):
                # a read of one of many images (a Cube's, a batch's) must say which file its blob is not
                raise RumiFormatError(exc.rule, f"{exc.detail}, in {self.source.url}") from exc
            raise
        checked_blobs.add(self.blob_key)

    def _read_ranges(self, starts, stops, options: dict) -> list[bytes]:
        if len(starts) == 1:
            return [self.source.read(int(starts[0]), int(stops[0]))]
        return self.source.read_many(starts, stops, **options)

    def batches(self, indices: np.ndarray, batch_bytes: int | None = None):
        """``(part, starts, stops)`` of ``indices[part]``: ``batch_bytes`` (``DECODE_BATCH``) at most, or one frame."""
        starts, stops = self.header.ranges(indices)
        ends = np.cumsum(stops - starts)
        first = 0
        while first < ends.size:
            limit = (ends[first - 1] if first else 0) + (DECODE_BATCH if batch_bytes is None else batch_bytes)
            last = max(first + 1, int(np.searchsorted(ends, limit, side="right")))
            yield slice(first, last), starts[first:last], stops[first:last]
            first = last

    def decode(self, index: int, payload: bytes, out: np.ndarray | None = None) -> np.ndarray:
        """Frame ``index`` from its compressed bytes, ``(bands, h, w)`` (into ``out`` if given); errors name it."""
        try:
            return decode_frame(payload, self.sample_type, self.grid.frame_shape(index), verify=self.verify, out=out)
        except RumiFormatError as exc:
            raise RumiFormatError(exc.rule, f"frame {index} of {self.source.url}: {exc.detail}") from None

    def read(self, bands: slice = slice(None), rows: slice = slice(None), cols: slice = slice(None)) -> np.ndarray:
        """The ``(band, y, x)`` window of contiguous slices, reading only the frames it touches."""
        window = [range(*s.indices(n)) for s, n in zip((bands, rows, cols), self.grid.shape)]
        if any(r.step != 1 for r in window):
            raise ValueError("read() takes contiguous slices; index the result for strides")
        return self.read_window(*window)

    def read_window(self, bands: range, rows: range, cols: range) -> np.ndarray:
        """A contiguous ``(band, y, x)`` window (what every Dask chunk asks for)."""
        return read_windows([self], bands, rows, cols)[0]

    def read_points(self, bands: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The outer selection ``bands x rows x cols`` of in-range indices."""
        out = np.empty((bands.size, rows.size, cols.size), self.sample_type.dtype)
        if out.size == 0:
            return out
        points = self.grid.frames_at_points(bands, rows, cols)

        def decode_and_place(k: int, payload: bytes) -> None:
            frame = self.decode(k, payload, out=scratch(FRAME, self.grid.frame_shape(k), out.dtype))
            where, inside = zip(*points.in_frame(k))
            out[np.ix_(*where)] = frame[np.ix_(*inside)]

        decode_all([(self, points.frames, decode_and_place)])
        return out

    def _frame_at(self, bands: range, rows: range, cols: range) -> int | None:
        grid = self.grid
        # an unaligned start falls inside its frame, whose window then differs from this one
        index = grid.frame_index(rows.start // grid.tile_length, cols.start // grid.tile_width, bands.start)
        if index >= grid.frame_count:
            return None
        window = zip(grid.frame_window(index), (bands, rows, cols))
        same = all((w.start, w.stop) == (r.start, r.stop) for w, r in window)
        return index if same else None

    def read_windows(self, windows, bands=None, *, out: np.ndarray | None = None) -> np.ndarray:
        """``(N, B, height, width)``: N windows ``(row, col, height, width)`` of one size (:func:`.batch.read_windows`).

        >>> import numpy as np, tempfile, os, xarray_rumi
        >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
        >>> blob = xarray_rumi.write(path, np.arange(64, dtype="uint8").reshape(8, 8), tile_size=4)
        >>> image = xarray_rumi.open_image(path, header=blob)
        >>> image.read_windows([(0, 0, 2, 3), (6, 5, 2, 3)])[:, 0].tolist()
        [[[0, 1, 2], [8, 9, 10]], [[53, 54, 55], [61, 62, 63]]]
        """
        from .batch import read_windows

        return read_windows([(self, window) for window in windows], bands, out=out)


def read_windows(images, bands: range, rows: range, cols: range) -> np.ndarray:
    """The same window of aligned images, ``(image, band, y, x)``: a chunk of a Cube, decoded together."""
    window = (bands, rows, cols)
    frame = images[0]._frame_at(*window) if len(images) == 1 else None
    if frame is not None:
        # a chunks={} task: remotely it may share a read-ahead, and the decoded frame is the result, uncopied
        return images[0].decode(frame, readahead.read_frame(images[0], frame))[np.newaxis]
    out = result_array((len(images), *(len(r) for r in window)), images[0].sample_type.dtype)
    decode_all([_window_job(image, window, part) for image, part in zip(images, out)])
    return out


def _window_job(image: RumiImage, window: tuple[range, range, range], out: np.ndarray) -> tuple:
    """What :func:`decode_all` needs to decode ``image``'s ``window`` into ``out``."""
    grid = image.grid

    def decode_into_place(k: int, payload: bytes) -> None:
        spans = [overlap(f, r) for f, r in zip(grid.frame_window(k), window)]
        target = out[tuple(o for o, _ in spans)]
        shape = grid.frame_shape(k)
        if target.shape == shape:
            image.decode(k, payload, out=target)  # the whole frame lies in the window
        else:
            frame = image.decode(k, payload, out=scratch(FRAME, shape, out.dtype))
            target[...] = frame[tuple(i for _, i in spans)]

    return image, grid.frames_touching(*window), decode_into_place


def decode_all(jobs) -> None:
    """Fetch and decode on every core the frames of ``jobs``: ``(image, frame indices, place(k, payload))`` each."""
    jobs = [(image, np.asarray(touched, np.int64), place) for image, touched, place in jobs]
    frames = sum(touched.size for _, touched, _ in jobs)
    if not frames:
        return

    threads = idle_threads()  # asked before share_work counts this read's own

    def batches():
        for image, touched, place in jobs:
            batch, request = _remote_sizes(image, touched, threads)
            for part, starts, stops in image.batches(touched, batch):
                yield image, place, touched[part].tolist(), starts, stops, request

    def prepare(batch) -> list:
        image, place, indices, starts, stops, request = batch
        rest = image.fetch_as_ready(starts, stops, lambda i, payload: place(indices[i], payload), max_request=request)
        return [functools.partial(place, indices[i], payload) for i, payload in rest]

    share_work(batches(), prepare, at_most=frames)


def _remote_sizes(image: RumiImage, touched: np.ndarray, threads: int) -> tuple[int, int | None]:
    """Bytes a thread fetches at a time (remotely a share of idle threads') and of one request (remotely)."""
    if image.source.is_local:
        return DECODE_BATCH, None
    starts, stops = image.header.ranges(touched)
    read = int((stops - starts).sum())
    return max(DECODE_BATCH, min(-(-read // threads), REMOTE_BATCH // threads)), request_bytes(read)


def pin_file(source):
    """Fix the version of the file ``source`` reads (:meth:`ByteSource.pin`); ``None`` for a source that keeps none."""
    pin = getattr(source, "pin", None)
    return pin() if pin is not None else None


def source_size(source) -> int:
    """The size of the file in the version ``source`` keeps to (else now)."""
    identity = getattr(source, "identity", None)
    return identity.size if identity is not None and identity.size is not None else source.size()


def _load_image(source, header, georeferencing, verify, checked, opened_size=None, claimed_by=None) -> RumiImage:
    image = RumiImage(source, header, georeferencing, verify, opened_size, claimed_by)
    if checked:
        checked_blobs.add(image.blob_key)
    return image


__all__ = ["DECODE_BATCH", "RumiImage", "decode_all", "read_windows"]
