"""The one opener: a rumi image from a path, URL or byte source and its blob; what each reads: docs/backend.md."""

from __future__ import annotations

import os

from ..errors import RumiFormatError
from ..format.blob import HEADER_SIZE, Header, claimed_blob_size, headers_from_bytes, max_blob_size
from ..format.geo import Georeferencing, RasterType, affine_coefficients, check_claimed_georeferencing
from ..format.geo import georeferencing as build_georeferencing
from ..format.head import ifd_head_ranges, split_head
from ..format.ifd import check_frame_layout, parse_prefix, prefix_size
from ..format.placement import (
    GEOREFERENCING_SIZE,
    MODEL_TRANSFORMATION_SIZE,
    check_frames_inside,
    georeferencing_offset,
)
from ..format.limits import DEFAULT_LIMITS, Limits
from ..io.retry import DEFAULT_POLICY, RetryPolicy
from ..io.source import ByteSource, FileEndedError, read_bytes
from ..io.urls import is_local
from ..runtime.threads import waiting_on_network
from .checked import blob_key, checked_blobs
from .image import RumiImage, pin_file, source_size

#: The first read of a file without a blob; enough for the IFD of ~5,000 frames.
FIRST_READ = 64 * 1024


def open_image(path, header=None, *, storage_options=None, crs=None, transform=None, raster_type=None,
               georeferencing=None, limits: Limits = DEFAULT_LIMITS, verify: bool = True,
               retry: RetryPolicy = DEFAULT_POLICY, claimed_by: str | None = None) -> RumiImage:
    """Open a rumi image from a path, URL or byte source, and its blob (bytes, a path/URL, a ``Header`` or ``None``).

    ``crs``/``transform``/``raster_type`` or ``georeferencing`` claim the georeferencing, checked against the
    file's tags (naming ``claimed_by``); ``verify=False`` trusts file, blob and claim.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(24, dtype="int16").reshape(2, 3, 4), tile_size=2,
    ...                          frame_unit="cell", compression="portable")
    >>> open_image(path, header=blob).read(slice(1, 2), slice(0, 1)).tolist()
    [[[12, 13, 14, 15]]]
    """
    if not isinstance(retry, RetryPolicy):
        raise TypeError(f"retry must be an xarray_rumi.RetryPolicy, got {type(retry).__name__}")
    supplied = caller_georeferencing(crs, transform, raster_type, georeferencing)
    if supplied is None or georeferencing is False:  # False drops the CRS: it says nothing of the file
        claimed_by = None
    else:
        claimed_by = claimed_by or ("crs=/transform=" if georeferencing is None else "georeferencing=")
    source = byte_source(path, storage_options, retry)
    if header is None:
        parsed, blob, size = read_ifd(source, limits)
        if claimed_by is not None and verify:
            check_claimed_georeferencing(supplied, parsed.georeferencing, claimed_by=claimed_by, file=source.url)
        return RumiImage(source, blob, supplied or parsed.georeferencing, verify, size)
    # The file's head comes while the blob is fetched, its answer stating the file's size and version: one round trip.
    fetched = isinstance(header, (str, os.PathLike)) and not getattr(source, "is_local", True)
    heading = waiting_on_network(read_head, source) if supplied is None and fetched else None
    try:
        blob = load_header(header, storage_options, limits, retry)
    except BaseException:
        if heading is not None:
            heading.cancel() or heading.exception()  # the blob's error is the one to raise
        raise
    if supplied is not None:
        # the first frame read checks the blob and the claim
        return RumiImage(source, blob, supplied, verify, claimed_by=claimed_by)
    head = heading.result() if heading is not None else b""
    if heading is None and verify and not getattr(source, "pins_on_read", False):
        pin_file(source)  # before the read, so the read keeps to the version the blob is checked in
    supplied = _read_georeferencing(source, blob, check_blob=verify, head=head)
    size = source_size(source) if verify else None
    if verify and size < blob.frames_end:
        check_frames_inside(blob.offsets(), blob.byte_counts(), size, from_blob=True, name=source.url)
    return RumiImage(source, blob, supplied, verify, size)


def byte_source(path, storage_options=None, retry: RetryPolicy = DEFAULT_POLICY):
    """A :class:`ByteSource` for a path or URL, a byte source as it is."""
    if isinstance(path, (str, os.PathLike)):
        return ByteSource.of(path, storage_options, retry)
    if all(hasattr(path, name) for name in ("url", "read", "read_many")):
        return path
    raise TypeError(f"a rumi image opens from a path, an fsspec URL or a byte source, not {type(path).__name__}")


def read_head(source) -> bytes:
    """The file's first :data:`FIRST_READ` bytes (all of a smaller file), the source pinned by their answer or before.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"; _ = p.write_bytes(b"abc")
    >>> source = ByteSource.of(p)
    >>> read_head(source), source.identity.size
    (b'abc', 3)
    """
    if not getattr(source, "pins_on_read", False):
        pin_file(source)
    return source.read(0, FIRST_READ, exact=False)


def caller_georeferencing(crs=None, transform=None, raster_type=None, georeferencing=None) -> Georeferencing | None:
    """The georeferencing the caller supplies (``georeferencing=False``: no CRS), or ``None`` to take the file's.

    >>> caller_georeferencing(crs=4326, transform=(1, 0, 0, 0, -1, 0)).epsg
    4326
    """
    given = crs is not None or transform is not None
    if isinstance(georeferencing, Georeferencing):
        if given or raster_type is not None:
            raise ValueError("pass either georeferencing=Georeferencing(...) or crs=/transform=/raster_type=, not both")
        if georeferencing.is_defined:
            affine_coefficients(georeferencing.transform)
        return georeferencing
    if georeferencing is False:
        if given:
            raise ValueError("georeferencing=False means no CRS; it cannot be combined with crs= or transform=")
        return Georeferencing(raster_type=RasterType.parse(raster_type or "area"))
    if georeferencing not in (None, True):
        raise TypeError(f"georeferencing must be None, False or a Georeferencing, got {georeferencing!r}")
    if not given:
        if raster_type is not None:
            raise ValueError("raster_type= overrides the file's georeferencing only together with crs= and transform=")
        return None
    return build_georeferencing(crs, transform, raster_type or "area")


def load_header(header, storage_options=None, limits: Limits = DEFAULT_LIMITS,
                retry: RetryPolicy = DEFAULT_POLICY) -> Header:
    """A :class:`Header` from blob bytes, a ``Header``, or a path/URL of a blob file."""
    if isinstance(header, Header):
        return header
    if isinstance(header, (bytes, bytearray, memoryview)):
        return Header.from_bytes(bytes(header), limits)
    if isinstance(header, (str, os.PathLike)):
        return Header.from_bytes(read_blob_file(header, storage_options, limits, retry), limits)
    raise TypeError(f"header must be blob bytes, a path or URL of a blob file, or None; got {type(header).__name__}")


def read_blob_file(path, storage_options=None, limits: Limits = DEFAULT_LIMITS,
                   retry: RetryPolicy = DEFAULT_POLICY) -> bytes:
    """The bytes of a blob file, read no further than its fields claim; a larger file is refused (``blob.size``).

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((8, 8), "uint8"), tile_size=4)
    >>> len(read_blob_file(path))   # the image itself: its first bytes say it is no blob, and no more is read
    64
    """
    name = os.fspath(path)
    largest = max_blob_size(limits)
    # fewer bytes than the fields themselves: no blob is that short, so the answer was cut
    data = read_bytes(path, storage_options, retry, max_size=largest,
                      claimed_size=lambda first: HEADER_SIZE if len(first) < HEADER_SIZE else
                      claimed_blob_size(first, limits))
    claimed = claimed_blob_size(data, limits)
    if claimed is not None and len(data) > claimed:
        raise RumiFormatError("blob.size", f"{name} is larger than the {claimed} bytes its blob's fields claim: "
                              "not a header blob, or a blob with bytes after it")
    if len(data) > largest:
        raise RumiFormatError("blob.size", f"{name} is larger than the largest blob Limits admit "
                              f"({largest} bytes, Limits.max_frames counts of 32 bits): not a header blob")
    return data


def load_headers(headers, names, storage_options=None, limits: Limits = DEFAULT_LIMITS,
                 retry: RetryPolicy = DEFAULT_POLICY) -> list:
    """:func:`load_header` of many entries (``None`` stays ``None``), parsed together; a bad blob is named by ``names``."""
    names, headers = list(names), list(headers)
    if len(headers) != len(names):
        raise ValueError(f"{len(names)} images but {len(headers)} headers")
    for position, header in enumerate(headers):
        if not isinstance(header, (type(None), Header, bytes, bytearray, memoryview, str, os.PathLike)):
            raise TypeError(f"header must be blob bytes, a path or URL of a blob file, or None; "
                            f"got {type(header).__name__} for image {position} ({names[position]!r})")
    blobs = {p: header for p, header in enumerate(headers) if not isinstance(header, (type(None), Header))}
    # blob files read at once: a Cube of remote images waits one round trip for them, not one each
    files = [p for p, blob in blobs.items() if isinstance(blob, (str, os.PathLike))]
    read = all_at_once(lambda path: read_blob_file(path, storage_options, limits, retry), [blobs[p] for p in files],
                       waits=not all(is_local(blobs[p]) for p in files))
    blobs.update(zip(files, read))
    parsed = headers_from_bytes(blobs.values(), limits, names=[f"image {p} ({names[p]!r})" for p in blobs])
    for position, header in zip(blobs, parsed):
        headers[position] = header
    return headers


def open_images(paths, headers, own_kwargs=None, **kwargs) -> list[RumiImage]:
    """:func:`open_image` of each path with its header (and its ``own_kwargs``), remote ones at once: one round trip."""
    own_kwargs = own_kwargs or [{}] * len(paths)
    headers = load_headers(headers, paths, kwargs.get("storage_options"), kwargs.get("limits", DEFAULT_LIMITS),
                           kwargs.get("retry", DEFAULT_POLICY))
    opens = list(zip(paths, headers, own_kwargs))

    def without_request(path, header, own) -> bool:
        given = {**kwargs, **own}
        georeferenced = given.get("georeferencing") not in (None, False) or (
            given.get("crs") is not None and given.get("transform") is not None)
        return (isinstance(path, (str, os.PathLike)) and is_local(path)) or (header is not None and georeferenced)

    # local files, and remote ones given their blob and georeferencing, open without a request: in turn is quicker
    waits = not all(without_request(*each) for each in opens)

    def open_one(position: int) -> RumiImage:
        path, header, own = opens[position]
        try:
            return open_image(path, header=header, **kwargs, **own)
        except RumiFormatError as exc:
            # among many images the error says which: a rule's message may not name the file
            raise RumiFormatError(exc.rule, f"image {position} ({path!r}): {exc.detail}") from exc

    return all_at_once(open_one, list(range(len(opens))), waits=waits)


def all_at_once(function, items: list, *, waits: bool = True) -> list:
    """``function(item)`` of each of ``items``: at once if they wait on the network (``waits``), else in turn."""
    if len(items) < 2 or not waits:
        return [function(item) for item in items]
    calls = [waiting_on_network(function, item) for item in items]
    try:
        return [call.result() for call in calls]
    except BaseException:
        for call in calls:
            call.cancel()
        raise


def read_ifd(source, limits: Limits = DEFAULT_LIMITS):
    """``(ParsedIFD, Header, size)`` of the file's IFD, its frame layout checked and its size holding every frame."""
    head = read_head(source)
    needed = prefix_size(head, limits)
    if needed > len(head):
        # A short first read means the file ended; a local file must hold what the IFD claims before it is read.
        if len(head) < FIRST_READ or (source.is_local and source_size(source) < needed):
            raise RumiFormatError(
                "file-profile.truncated", f"the IFD and its values need {needed} bytes, but the file is shorter"
            )
        head += source.read(len(head), needed, exact=False)
    parsed = parse_prefix(head, limits)
    check_frame_layout(parsed, limits)
    size = source_size(source)
    check_frames_inside(parsed.tile_offsets, parsed.tile_byte_counts, size)
    header = Header.from_byte_counts(parsed.grid, parsed.sample_type, parsed.tile_byte_counts)
    checked_blobs.add(blob_key(source, header))
    return parsed, header, size


def _read_georeferencing(source, header: Header, *, check_blob: bool, head: bytes) -> Georeferencing:
    # one read (none if ``head`` holds the tags), which with ``check_blob`` also checks the blob
    start = georeferencing_offset(header.grid)
    image = RumiImage(source, header)
    try:
        # Unpinned, the version comes with this read: a pair checked in some version most likely is in this one.
        unpinned = getattr(source, "identity", True) is None
        check = check_blob and not (checked_blobs.has_pair(image._pair_digest) if unpinned
                                    else image.blob_key in checked_blobs)
        ranges = ifd_head_ranges(header.grid, georeferencing=True) if check else [(start, start + GEOREFERENCING_SIZE)]
        if all(b <= len(head) for _, b in ranges):
            payloads = [head[a:b] for a, b in ranges]
        else:
            payloads = source.read_many([a for a, _ in ranges], [b for _, b in ranges])
        data = payloads[-1][-GEOREFERENCING_SIZE:]  # the tags end the last range, checking or not
        if check:
            image._check_head(*split_head(header.grid, payloads, georeferencing=True)[:2])
        elif check_blob and image.blob_key not in checked_blobs:
            image.check_blob()  # another version of the file than the one checked
    except FileEndedError as ended:  # the file ends inside its IFD
        raise image.truncated(ended) from None
    return Georeferencing.from_tags(data[:MODEL_TRANSFORMATION_SIZE], data[MODEL_TRANSFORMATION_SIZE:])


def header_from_file(path, *, storage_options=None) -> bytes:
    """Rebuild the header blob of a rumi file from its IFD.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((3, 64, 64), "uint16"), tile_size=32)
    >>> header_from_file(path) == blob
    True
    """
    _, header, _ = read_ifd(ByteSource.of(path, storage_options))
    return header.to_bytes()


__all__ = ["FIRST_READ", "caller_georeferencing", "header_from_file", "load_header", "load_headers", "open_image",
           "open_images", "read_blob_file", "read_head", "read_ifd"]
