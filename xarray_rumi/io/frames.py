"""Encoding and decoding single frames: one self-contained OpenZL frame each.

Decoding goes through ``geozl.decompress``, which knows GeoZL's decoders and
OpenZL's built-in ones, releases the GIL and refuses to allocate more than the
grid says a frame holds.  Encoding pins one OpenZL frame format version.
"""

from __future__ import annotations

import threading

import geozl
import numpy as np

from ..errors import RumiFormatError
from ..format.dtypes import SampleType

#: The OpenZL frame format version of every frame this project writes.  24 is
#: read by decoders built on openzl 0.2 and 0.3 alike.
FORMAT_VERSION = 24
MIN_READ_VERSION, MAX_READ_VERSION = 8, 27
_MAGIC_TAIL = bytes.fromhex("a5b1d7")  # bytes 1..3 of every OpenZL frame

#: Recipes that use only OpenZL's built-in codecs: any OpenZL decoder reads them.
PORTABLE_RECIPES = ("id>zstd", "delta_1d>zstd", "id>transpose>zstd", "delta_1d>transpose>zstd", "id>field_lz")
#: Candidates for ``compression="auto"``: the portable ones plus GeoZL's 2D predictors.
AUTO_RECIPES = PORTABLE_RECIPES + (
    "planar>zigzag>zstd", "med>zigzag>zstd", "delta_w>zigzag>zstd", "average>zigzag>zstd",
    "planar>zigzag>field_lz", "planar>zigzag>pfor",
)

_graphs = threading.local()  # geozl.Graph owns a compression context: one per thread


def frame_version(frame: bytes | memoryview) -> int:
    """The OpenZL frame format version a frame was written at (its first byte).

    >>> frame_version(bytes.fromhex("d8a5b1d7"))
    24
    """
    head = bytes(frame[:4])
    if len(head) < 4 or head[1:] != _MAGIC_TAIL or not 0xC0 + MIN_READ_VERSION <= head[0] <= 0xC0 + MAX_READ_VERSION:
        raise RumiFormatError("frame.openzl", f"the frame does not start with an OpenZL frame header (got {head.hex()})")
    return head[0] - 0xC0


def applicable(recipe: str, storage: np.dtype) -> bool:
    """Whether ``recipe`` can encode elements of ``storage`` (transpose needs 2..8 bytes)."""
    return not ("transpose" in recipe and storage.itemsize == 1)


def encode_frame(stored: np.ndarray, recipe: str, *, interband: bool = False, error=None) -> bytes:
    """Compress one frame of storage elements shaped ``(bands, h, w[, 2])``.

    ``stored`` comes from :meth:`SampleType.encode`.  Row predictors reset at
    each band, so a cell frame predicts within each band; with ``interband``
    a cell frame is one plane whose rows are whole bands, so the "row above"
    of a pixel is the same pixel in the previous band.  ``recipe`` is a GeoZL
    recipe (see ``PORTABLE_RECIPES`` and ``AUTO_RECIPES``).  ``error`` makes it
    lossy: a GeoZL error bound (a number, ``"1%"`` or a ``LINEAR``/``LOG``/
    ``SQRT`` recipe), recorded inside the frame and nowhere else.

    >>> frame = encode_frame(np.zeros((1, 16, 16), np.uint16), "delta_1d>zstd")
    >>> frame_version(frame)
    24
    """
    bands, h = stored.shape[:2]
    # Arrays that crossed a process boundary (dask.distributed) can sit in an
    # unaligned buffer, which OpenZL cannot wrap as a numeric stream.
    raster = np.require(stored, requirements=("C", "A")).reshape(bands, h, -1)
    if interband:
        raster = raster.reshape(1, bands, -1)
    planes, width = raster.shape[0], raster.shape[-1]
    if error is not None:
        # a lossy graph fixes its quantiser's domain from the data it is built on
        graph = geozl.graph(raster, recipe, width=width, planes=planes, error=error)
    else:
        key = (recipe, raster.dtype.str, width, planes)
        cache = _graphs.__dict__.setdefault("cache", {})
        graph = cache.get(key)
        if graph is None:
            graph = cache[key] = geozl.graph(raster, recipe, width=width, planes=planes)
    frame = geozl.compress(raster, graph=graph)
    if frame[0] != 0xC0 + FORMAT_VERSION:
        raise RuntimeError(f"geozl wrote OpenZL format version {frame[0] - 0xC0}, not the pinned {FORMAT_VERSION}")
    return frame


def decode_frame(frame: bytes | memoryview, sample: SampleType, shape: tuple[int, int, int], *, verify: bool = True) -> np.ndarray:
    """Decompress one frame into an array of ``shape`` ``(bands, h, w)``.

    Refuses, without expanding it, a frame that would decode to more than the
    grid allows, and refuses one that decodes to any other length.

    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> frame = encode_frame(np.arange(6, dtype=np.uint16).reshape(1, 2, 3), "id>zstd")
    >>> decode_frame(frame, sample_type_from_name("uint16"), (1, 2, 3)).tolist()
    [[[0, 1, 2], [3, 4, 5]]]
    >>> decode_frame(frame, sample_type_from_name("uint16"), (1, 2, 2))
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: frame.decode: the frame does not decode: ...
    """
    frame_version(frame)
    expected = int(np.prod(shape)) * sample.bytes_per_sample
    try:
        raw = geozl.decompress(frame, verify=verify, max_output_size=expected)
    except (RuntimeError, ValueError) as exc:
        # OpenZL's messages carry a C stack trace; the first lines say what went wrong.
        reason = " ".join(str(exc).split("Stack Trace")[0].split())
        raise RumiFormatError("frame.decode", f"the frame does not decode: {reason}") from None
    if raw.size != expected:
        raise RumiFormatError(
            "frame.length", f"the frame decodes to {raw.size} bytes, but its grid position holds {expected}"
        )
    return sample.decode(raw, shape)
