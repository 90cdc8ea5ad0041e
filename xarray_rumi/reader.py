"""Opening a rumi file: header from a blob or the IFD, then frames by index.

With a blob, locating any frame needs no read of the file.  Without one the
IFD is parsed from the start of the file, usually in a single read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .errors import RumiFormatError
from .format.blob import Header
from .format.geo import Georeferencing
from .format.ifd import check_frame_layout, parse_prefix, prefix_size
from .format.layout import GEO_KEY_DIRECTORY_SIZE, MODEL_TRANSFORMATION_SIZE, georeferencing_offset
from .format.limits import DEFAULT_LIMITS, Limits
from .io.frames import decode_frame
from .io.source import ByteSource, read_bytes

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

    @property
    def grid(self):
        return self.header.grid

    @property
    def sample_type(self):
        return self.header.sample_type

    def frame_range(self, index: int) -> tuple[int, int]:
        start = self.header.offset(index)
        return start, start + self.header.byte_count(index)

    def read_frames(self, indices, *, verify: bool = True) -> list[np.ndarray]:
        """Decode frames ``indices``, each ``(bands, h, w)``, fetched in batched reads."""
        return [frame for _, frame in self.iter_frames(indices, verify=verify)]

    def iter_frames(self, indices, *, verify: bool = True):
        """``(index, frame)`` for frames ``indices``, decoded one at a time.

        Only one batch of compressed frames and one decoded frame are held at
        once, so a caller placing frames into an output needs no more.
        """
        grid, sample = self.grid, self.sample_type
        for k, payload in self.iter_payloads(indices):
            yield k, decode_frame(payload, sample, grid.frame_shape(k), verify=verify)

    def iter_payloads(self, indices):
        """``(index, compressed frame)`` for frames ``indices``, fetched about 32 MiB at a time."""
        indices = np.asarray(indices, dtype=np.int64)
        starts, stops = self.header.ranges(indices)
        ends = np.cumsum(stops - starts)
        first = 0
        while first < indices.size:
            limit = (ends[first - 1] if first else 0) + READ_BATCH
            last = max(first + 1, int(np.searchsorted(ends, limit, side="right")))
            payloads = self.source.read_many(starts[first:last], stops[first:last])
            yield from zip(indices[first:last].tolist(), payloads)
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
            ob, oy, ox = _overlap(fb, b), _overlap(fy, y), _overlap(fx, x)
            out[ob[0], oy[0], ox[0]] = frame[ob[1], oy[1], ox[1]]
        return out


def _overlap(frame: slice, window: range) -> tuple[slice, slice]:
    """``(slice into the window, slice into the frame)`` of their intersection."""
    lo, hi = max(frame.start, window.start), min(frame.stop, window.stop)
    return slice(lo - window.start, hi - window.start), slice(lo - frame.start, hi - frame.start)


def load_header(header, storage_options=None, limits: Limits = DEFAULT_LIMITS) -> Header:
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
        return Header.from_bytes(read_bytes(header, storage_options), limits)
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
    return parsed, header


def read_georeferencing(source: ByteSource, header: Header) -> Georeferencing:
    """The georeferencing of a file whose blob is known: one 160-byte read.

    Both tags' values always end where the frames begin, so the blob alone
    says where they are.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((1, 8, 8), "uint8"), crs=32618,
    ...                          transform=(30, 0, 500000, 0, -30, 4000000), compression="portable")
    >>> read_georeferencing(ByteSource.of(path), Header.from_bytes(blob)).epsg
    32618
    """
    start = georeferencing_offset(header.grid)
    data = source.read(start, start + MODEL_TRANSFORMATION_SIZE + GEO_KEY_DIRECTORY_SIZE)
    return Georeferencing.from_tags(data[:MODEL_TRANSFORMATION_SIZE], data[MODEL_TRANSFORMATION_SIZE:])


def open_image(path, header=None, *, storage_options=None, limits: Limits = DEFAULT_LIMITS,
               read_georef: bool = True) -> RumiImage:
    """Open a rumi file from a path or fsspec URL.

    ``header`` is blob bytes, a path/URL of a blob file, or ``None`` to rebuild
    it from the IFD.  With a blob and ``read_georef=False`` nothing is read.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(24, dtype="int16").reshape(2, 3, 4), tile_size=2,
    ...                          frame_unit="cell", compression="portable")
    >>> image = open_image(path, header=blob)
    >>> image.grid.frame_count, image.read(slice(1, 2), slice(0, 1)).tolist()
    (4, [[[12, 13, 14, 15]]])
    """
    source = ByteSource.of(path, storage_options)
    if header is None:
        parsed, blob = read_ifd(source, limits)
        return RumiImage(source, blob, parsed.georeferencing)
    blob = load_header(header, storage_options, limits)
    georef = read_georeferencing(source, blob) if read_georef else None
    return RumiImage(source, blob, georef)


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
