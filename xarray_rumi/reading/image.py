"""Opening a rumi file: header from a blob or the IFD, then frames by index.

With a blob, locating any frame needs no read of the file.  Without one the
IFD is parsed from the start of the file, usually in a single read.

A blob is checked against the fixed head of its file's IFD (the first 252
bytes) before any pixel read through it is returned: at open when the open
reads the georeferencing anyway (the head comes in the same batched read),
otherwise on the process's first frame read of that file and blob (the head
comes in the same batch as the frames).  :data:`~xarray_rumi.reading.checked.checked_blobs` remembers the
pairs checked, so later reads in the process pay nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import RumiFormatError
from ..format.blob import Header
from ..format.geo import Georeferencing
from ..format.grid import overlap
from ..format.head import check_blob_against_ifd_head, ifd_head_ranges
from ..format.ifd import check_frame_layout, parse_prefix, prefix_size
from ..format.layout import GEOREFERENCING_SIZE, MODEL_TRANSFORMATION_SIZE, georeferencing_offset
from ..format.limits import DEFAULT_LIMITS, Limits
from .checked import blob_key, checked_blobs
from ..frames.codec import decode_frame
from ..io.retry import DEFAULT_POLICY, RetryPolicy
from ..io.source import ByteSource, read_bytes

#: Compressed bytes fetched together when reading many frames.
READ_BATCH = 32 * 1024 * 1024
#: The first read of a file without a blob; enough for the IFD of ~5,000 frames.
FIRST_READ = 64 * 1024


@dataclass(frozen=True)
class RumiImage:
    """An opened rumi file: where it is, its header, and (when read) its georeferencing.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(12, dtype="uint8").reshape(3, 4), tile_size=2)
    >>> image = open_image(path, header=blob)
    >>> image.read().shape
    (1, 3, 4)
    """

    source: ByteSource
    header: Header
    georeferencing: Georeferencing | None = None
    #: Whether the blob was known to agree with the file when it was opened (by
    #: this process); pickled, so the copies a Dask graph ships need not check again.
    blob_checked: bool = False

    @cached_property
    def blob_key(self) -> bytes:
        return blob_key(self.source, self.header)

    @property
    def grid(self):
        return self.header.grid

    @property
    def sample_type(self):
        return self.header.sample_type

    def frame_range(self, index: int) -> tuple[int, int]:
        start = self.header.offset(index)
        return start, start + self.header.byte_count(index)

    def fetch(self, starts, stops, *, check_blob: bool = True) -> list[bytes]:
        """The bytes ``[starts[i], stops[i])`` of frames, once the blob is known to match the file.

        On this process's first read of a blob not yet checked, the file's IFD
        head comes in the same batch as the frames and the blob is checked
        against it before anything is returned: one more small range, no
        extra round trip.  Threads that meet an unchecked blob together fetch
        their frames meanwhile and wait for one thread's verdict.
        ``check_blob=False`` trusts the blob.
        """
        if not check_blob or self.blob_checked or self.blob_key in checked_blobs:
            return self._read_ranges(starts, stops)
        key = self.blob_key
        lock = checked_blobs.lock_for(key)
        if not lock.acquire(blocking=False):
            payloads = self._read_ranges(starts, stops)
            with lock:
                if key not in checked_blobs:  # the checking thread failed: check here, to raise its error
                    self.check_blob()
            return payloads
        try:
            if key in checked_blobs:
                return self._read_ranges(starts, stops)
            checks = ifd_head_ranges(self.grid)
            # The head goes last, so a failing read names a frame's range first.
            payloads = self.source.read_many([*starts, *(a for a, _ in checks)], [*stops, *(b for _, b in checks)])
            check_blob_against_ifd_head(self.header, *payloads[len(payloads) - len(checks):])
            checked_blobs.add(key)
            return payloads[:len(payloads) - len(checks)]
        finally:
            checked_blobs.release(key, lock)

    def check_blob(self) -> None:
        """Check the blob against the file's IFD head now, reading only that (one or two small ranges)."""
        checks = ifd_head_ranges(self.grid)
        pieces = self.source.read_many([a for a, _ in checks], [b for _, b in checks])
        check_blob_against_ifd_head(self.header, *pieces)
        checked_blobs.add(self.blob_key)

    def _read_ranges(self, starts, stops) -> list[bytes]:
        if len(starts) == 1:  # one range is one plain read (cat_file remotely)
            return [self.source.read(int(starts[0]), int(stops[0]))]
        return self.source.read_many(starts, stops)

    def read_frames(self, indices, *, verify: bool = True) -> list[np.ndarray]:
        """Decode frames ``indices``, each ``(bands, h, w)``, fetched in batched reads."""
        return [frame for _, frame in self.iter_frames(indices, verify=verify)]

    def iter_frames(self, indices, *, verify: bool = True):
        """``(index, frame)`` for frames ``indices``, decoded one at a time.

        Only one batch of compressed frames and one decoded frame are held at
        once, so a caller placing frames into an output needs no more.
        """
        grid, sample = self.grid, self.sample_type
        for k, payload in self.iter_payloads(indices, check_blob=verify):
            yield k, decode_frame(payload, sample, grid.frame_shape(k), verify=verify)

    def iter_payloads(self, indices, *, check_blob: bool = True):
        """``(index, compressed frame)`` for frames ``indices``, fetched about 32 MiB at a time."""
        for batch, payloads in self.iter_batches(indices, check_blob=check_blob):
            yield from zip(batch.tolist(), payloads)

    def iter_batches(self, indices, *, batch_bytes: int = READ_BATCH, check_blob: bool = True):
        """``(indices, compressed frames)`` for frames ``indices`` in order, one :meth:`fetch` per batch.

        A batch holds at most ``batch_bytes`` of frames (or one larger frame),
        so a caller holds no more than that of compressed bytes at a time.
        """
        indices = np.asarray(indices, dtype=np.int64)
        starts, stops = self.header.ranges(indices)
        ends = np.cumsum(stops - starts)
        first = 0
        while first < indices.size:
            limit = (ends[first - 1] if first else 0) + batch_bytes
            last = max(first + 1, int(np.searchsorted(ends, limit, side="right")))
            yield indices[first:last], self.fetch(starts[first:last], stops[first:last], check_blob=check_blob)
            first = last

    def read(self, bands: slice = slice(None), rows: slice = slice(None), cols: slice = slice(None)) -> np.ndarray:
        """The ``(band, y, x)`` window as an array, reading only the frames it touches."""
        grid = self.grid
        b = range(*bands.indices(grid.samples_per_pixel))
        y = range(*rows.indices(grid.image_length))
        x = range(*cols.indices(grid.image_width))
        if b.step != 1 or y.step != 1 or x.step != 1:
            raise ValueError("read() takes contiguous slices; index the result for strides")
        out = np.empty((len(b), len(y), len(x)), self.sample_type.dtype)
        indices = grid.frames_touching(b, y, x)
        for k, frame in self.iter_frames(indices):
            fb, fy, fx = grid.frame_window(k)
            ob, oy, ox = overlap(fb, b), overlap(fy, y), overlap(fx, x)
            out[ob[0], oy[0], ox[0]] = frame[ob[1], oy[1], ox[1]]
        return out


def load_header(header, storage_options=None, limits: Limits = DEFAULT_LIMITS,
                retry: RetryPolicy = DEFAULT_POLICY) -> Header:
    """A :class:`Header` from blob bytes, a ``Header``, or a path/URL of a blob file.

    >>> load_header(bytes(28))
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: blob.magic: expected 0x45564F4C (bytes 4C 4F 56 45), got 0x00000000
    """
    if isinstance(header, Header):
        return header
    if isinstance(header, (bytes, bytearray, memoryview)):
        return Header.from_bytes(bytes(header), limits)
    if isinstance(header, (str, os.PathLike)):
        return Header.from_bytes(read_bytes(header, storage_options, retry), limits)
    raise TypeError(f"header must be blob bytes, a path or URL of a blob file, or None; got {type(header).__name__}")


def read_ifd(source: ByteSource, limits: Limits = DEFAULT_LIMITS, *, check_registry: bool = True):
    """Parse the IFD and check the frame layout; returns ``(ParsedIFD, Header)``.

    One read of :data:`FIRST_READ` bytes, and a second only when the IFD's
    values need more.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((2, 40, 40), "uint8"), tile_size=16, compression="portable")
    >>> parsed, header = read_ifd(ByteSource.of(path))
    >>> header.to_bytes() == blob, int(parsed.tile_offsets[0]) == header.base_frame_offset
    (True, True)
    """
    head = source.read(0, FIRST_READ, exact=False)
    needed = prefix_size(head, limits)
    if needed > len(head):
        # A short first read means the file ended; otherwise make sure the file
        # holds what the IFD claims before asking for that much.
        if len(head) < FIRST_READ or (source.is_local and source.size() < needed):
            raise RumiFormatError(
                "file-profile.truncated", f"the IFD and its values need {needed} bytes, but the file is shorter"
            )
        head += source.read(len(head), needed, exact=False)
    parsed = parse_prefix(head, limits, check_registry=check_registry)
    check_frame_layout(parsed, limits)
    header = Header.from_byte_counts(parsed.grid, parsed.sample_type, parsed.tile_byte_counts)
    if isinstance(source, ByteSource):  # this blob is the file's own: opening with it later needs no check
        checked_blobs.add(blob_key(source, header))
    return parsed, header


def read_georeferencing(source: ByteSource, header: Header, *, check_blob: bool = False) -> Georeferencing:
    """The georeferencing of a file whose blob is known: one 160-byte read.

    Both tags' values always end where the frames begin, so the blob alone
    says where they are.  With ``check_blob`` the file's IFD head comes in the
    same batched read (two ranges, which the SampleFormat values of five or
    more bands, stored just before the georeferencing, join) and the blob is
    checked against it, unless this process has checked it already.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((1, 8, 8), "uint8"), crs=32618,
    ...                          transform=(30, 0, 500000, 0, -30, 4000000), compression="portable")
    >>> read_georeferencing(ByteSource.of(path), Header.from_bytes(blob)).epsg
    32618
    """
    start = georeferencing_offset(header.grid)
    stop = start + GEOREFERENCING_SIZE
    key = blob_key(source, header) if check_blob else None
    if key is None or key in checked_blobs:
        data = source.read(start, stop)
    else:
        head, *sample_formats = ifd_head_ranges(header.grid)
        if sample_formats:
            start = sample_formats[0][0]
        head_bytes, data = source.read_many([head[0], start], [head[1], stop])
        data, sample_format_bytes = data[-GEOREFERENCING_SIZE:], data[:-GEOREFERENCING_SIZE]
        check_blob_against_ifd_head(header, head_bytes, sample_format_bytes)
        checked_blobs.add(key)
    return Georeferencing.from_tags(data[:MODEL_TRANSFORMATION_SIZE], data[MODEL_TRANSFORMATION_SIZE:])


def open_image(path, header=None, *, storage_options=None, limits: Limits = DEFAULT_LIMITS,
               read_georef: bool = True, retry: RetryPolicy = DEFAULT_POLICY) -> RumiImage:
    """Open a rumi file from a path or fsspec URL.

    ``header`` is blob bytes, a path/URL of a blob file, or ``None`` to rebuild
    it from the IFD.  With a blob the georeferencing and the IFD head come in
    one batched read, and the blob is checked against the head; with a blob
    and ``read_georef=False`` nothing is read, and the blob is checked on the
    first frame read.  ``retry`` is how remote reads are retried.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(24, dtype="int16").reshape(2, 3, 4), tile_size=2,
    ...                          frame_unit="cell", compression="portable")
    >>> image = open_image(path, header=blob)
    >>> image.grid.frame_count, image.read(slice(1, 2), slice(0, 1)).tolist()
    (4, [[[12, 13, 14, 15]]])
    """
    source = ByteSource.of(path, storage_options, retry)
    if header is None:
        parsed, blob = read_ifd(source, limits)
        return RumiImage(source, blob, parsed.georeferencing, blob_checked=True)
    blob = load_header(header, storage_options, limits, retry)
    georef = read_georeferencing(source, blob, check_blob=True) if read_georef else None
    return RumiImage(source, blob, georef, blob_checked=blob_key(source, blob) in checked_blobs)


def header_from_file(path, *, storage_options=None) -> bytes:
    """Rebuild the header blob of a rumi file from its IFD.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((3, 64, 64), "uint16"), tile_size=32)
    >>> header_from_file(path) == blob
    True
    """
    _, header = read_ifd(ByteSource.of(path, storage_options))
    return header.to_bytes()


def check_blob_matches(blob: Header, file_header: Header) -> None:
    """Refuse a blob that disagrees with the file it is meant for (``blob.matches-file``).

    For a single-band image either frame unit agrees: the layouts are the same.
    """
    a, b = blob.grid, file_header.grid
    for name in ("image_width", "image_length", "tile_width", "tile_length", "samples_per_pixel"):
        if getattr(a, name) != getattr(b, name):
            raise RumiFormatError("blob.matches-file", f"blob {name} is {getattr(a, name)}, the file says {getattr(b, name)}")
    if blob.sample_type != file_header.sample_type:
        raise RumiFormatError(
            "blob.matches-file",
            f"blob sample type is {blob.sample_type.name}, the file's is {file_header.sample_type.name}",
        )
    if a.frame_unit != b.frame_unit and a.samples_per_pixel != 1:
        raise RumiFormatError(
            "blob.matches-file", f"blob frame_unit is {a.frame_unit.name.lower()}, the file's TileOffsets say {b.frame_unit.name.lower()}"
        )
    if blob.count_min != file_header.count_min or blob.packed != file_header.packed or blob.count_bits != file_header.count_bits:
        diff = np.flatnonzero(blob.byte_counts() != file_header.byte_counts())
        where = f" (first at frame {int(diff[0])})" if diff.size else ""
        raise RumiFormatError("blob.matches-file", f"blob frame byte counts differ from TileByteCounts{where}")
