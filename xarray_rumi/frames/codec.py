"""Encoding and decoding single frames: one self-contained OpenZL frame each."""

from __future__ import annotations

import math
import sys
import threading
from collections import OrderedDict

import geozl
import numpy as np
import openzl.ext

from ..errors import RumiFormatError
from ..format.dtypes import SampleType
from ..runtime.heap import keep_heap_top
from ..runtime.scratch import DECODED_BYTES, scratch
from ._geozl_into import into_decoder

FORMAT_VERSION = 24  # of every frame written: decoders of openzl 0.2 and 0.3 alike read it
MIN_READ_VERSION, MAX_READ_VERSION = 8, 27
MAGIC_TAIL = bytes.fromhex("a5b1d7")

# Only OpenZL's built-in codecs: any OpenZL decoder reads them.
PORTABLE_RECIPES = ("id>zstd", "delta_1d>zstd", "id>transpose>zstd", "delta_1d>transpose>zstd", "id>field_lz")


def frame_version(frame: bytes | memoryview) -> int:
    """The OpenZL frame format version of a frame; ``frame.openzl`` if it is not an OpenZL frame.

    >>> frame_version(bytes.fromhex("d8a5b1d7"))
    24
    """
    head = bytes(frame[:4])
    if len(head) < 4 or head[1:] != MAGIC_TAIL or not 0xC0 + MIN_READ_VERSION <= head[0] <= 0xC0 + MAX_READ_VERSION:
        raise RumiFormatError("frame.openzl", f"the frame does not start with an OpenZL frame header (got {head.hex()})")
    return head[0] - 0xC0


def as_planes(stored: np.ndarray, interband: bool = False) -> np.ndarray:
    """A frame's storage elements ``(bands, h, w[, 2])`` as the aligned ``(planes, rows, width)`` GeoZL encodes."""
    bands, h = stored.shape[:2]
    # Arrays from dask.distributed can sit unaligned, which OpenZL cannot wrap as a numeric stream.
    raster = np.require(stored, requirements=("C", "A")).reshape(bands, h, -1)
    return raster.reshape(1, bands, -1) if interband else raster


def encode_frame(stored: np.ndarray, recipe: str, *, interband: bool = False, error=None,
                 cache: ThreadCache | None = None) -> bytes:
    """Compress one frame of storage elements shaped ``(bands, h, w[, 2])``.

    >>> frame = encode_frame(np.zeros((1, 16, 16), np.uint16), "delta_1d>zstd")
    >>> frame_version(frame)
    24
    """
    keep_heap_top()
    raster = as_planes(stored, interband)
    planes, width = raster.shape[0], raster.shape[-1]
    if error is not None:
        # a lossy graph fixes its quantiser's domain from its data: never reused
        graph = geozl.graph(raster, recipe, width=width, planes=planes, error=error)
    else:
        graph = (cache or PROCESS_CACHE).get(("graph", recipe, raster.dtype.str, width, planes),
                                             lambda: geozl.graph(raster, recipe, width=width, planes=planes))
    frame = geozl.compress(raster, graph=graph)
    if frame[0] != 0xC0 + FORMAT_VERSION:
        raise RuntimeError(f"geozl wrote OpenZL format version {frame[0] - 0xC0}, not the pinned {FORMAT_VERSION}")
    return frame


# Every recipe one write measures and uses; bounded as pool threads live as long as the process.
GRAPHS_PER_THREAD = 96


class ThreadCache:
    """Per-thread state built on first use, the least recently used dropped past ``size``.

    >>> cache = ThreadCache()
    >>> cache.get("key", lambda: ["built"]) is cache.get("key", lambda: ["built again"])
    True
    """

    def __init__(self, size: int = GRAPHS_PER_THREAD):
        self._size = size
        self._local = threading.local()

    def get(self, key, build):
        entries = self._local.__dict__.get("entries")
        if entries is None:
            entries = self._local.entries = OrderedDict()
        value = entries.get(key)
        if value is None:
            value = entries[key] = build()
            if len(entries) > self._size:
                entries.popitem(last=False)
        else:
            entries.move_to_end(key)
        return value


PROCESS_CACHE = ThreadCache()


def decode_frame(frame: bytes | memoryview, sample: SampleType, shape: tuple[int, int, int], *,
                 verify: bool = True, out: np.ndarray | None = None) -> np.ndarray:
    """Decompress one frame into an array of ``shape`` ``(bands, h, w)`` (or into ``out``); ``RumiFormatError``
    for a frame that does not decode to exactly that.

    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> frame = encode_frame(np.arange(6, dtype=np.uint16).reshape(1, 2, 3), "id>zstd")
    >>> image = np.zeros((1, 2, 5), np.uint16)
    >>> _ = decode_frame(frame, sample_type_from_name("uint16"), (1, 2, 3), out=image[:, :, 1:4])
    >>> image.tolist()
    [[[0, 0, 1, 2, 0], [0, 3, 4, 5, 0]]]
    """
    frame_version(frame)
    keep_heap_top()  # else, in a Dask worker, the decoder's buffers go back to the system each frame
    shape = tuple(int(n) for n in shape)
    expected = math.prod(shape) * sample.bytes_per_sample  # math.prod: np.prod's overhead shows per frame
    if out is not None:
        _check_out(out, sample, shape)
        if _decoder is not None:
            return _decode_into(frame, sample, shape, expected, out, verify)
    raw = decompress(frame, expected, verify=verify)
    _check_length(raw.size, expected)
    decoded = sample.decode(raw, shape)
    if out is None:
        return decoded
    out[...] = decoded
    return out


def decompress(frame: bytes | memoryview, max_output_size: int, *, verify: bool = True) -> np.ndarray:
    """The decoded bytes of a frame (geozl), refused (``frame.decode``) above ``max_output_size``."""
    try:
        return geozl.decompress(frame, verify=verify, max_output_size=max_output_size)
    except (RuntimeError, ValueError) as exc:
        raise _not_decodable(str(exc)) from None


def decode_elements(frame: bytes | memoryview, max_output_size: int) -> tuple[np.ndarray, int]:
    """``(decoded bytes, element width)`` of a frame, refused (``frame.decode``) above ``max_output_size``."""
    frame = bytes(frame)   # OpenZL's Python API takes only bytes
    try:
        info = openzl.ext.FrameInfo(frame)
    except RuntimeError as exc:
        raise _not_decodable(str(exc)) from None
    if info.num_outputs != 1 or info.output_type(0) != openzl.ext.Type.Numeric:
        raise RumiFormatError("frame.decode", "the frame does not decode to one stream of numbers, as a rumi frame does")
    declared = info.output_content_size(0)
    if declared > max_output_size:
        raise _not_decodable(f"the frame declares {declared} bytes of output, above the {max_output_size} allowed")
    try:
        (output,) = PROCESS_CACHE.get(("dctx",), _decompression_context).decompress(frame)
    except RuntimeError as exc:
        raise _not_decodable(str(exc)) from None
    return output.content.as_nparray().reshape(-1).view(np.uint8), output.elt_width


def _decompression_context() -> openzl.ext.DCtx:
    dctx = openzl.ext.DCtx()
    geozl.register_decoders(dctx)
    return dctx


def check_element_width(width: int, sample: SampleType) -> None:
    """Refuse (``frame.width``) a frame whose elements are not as wide as ``sample`` stores them."""
    if width != sample.storage.itemsize:
        raise RumiFormatError("frame.width", f"the frame holds {width}-byte elements, but sample type {sample.name} "
                                             f"is stored as {sample.storage.itemsize}-byte elements")


def _not_decodable(message: str) -> RumiFormatError:
    # OpenZL's messages carry a C stack trace; the first lines say what went wrong.
    reason = " ".join(message.split("Stack Trace")[0].split())
    return RumiFormatError("frame.decode", f"the frame does not decode: {reason}")


def _check_length(decoded: int, expected: int) -> None:
    if decoded != expected:
        raise RumiFormatError(
            "frame.length", f"the frame decodes to {decoded} bytes, but its grid position holds {expected}"
        )


def _check_out(out: np.ndarray, sample: SampleType, shape: tuple[int, ...]) -> None:
    if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != sample.dtype:
        got = f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', type(out).__name__)}"
        raise ValueError(f"out must be a numpy array of shape {shape} and dtype {sample.dtype}, got {got}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")


_decoder = into_decoder()  # None: out= then copies


def _writes_in_place(out: np.ndarray, sample: SampleType) -> bool:
    """Whether ``out``'s memory can take the frame's bytes as they are."""
    return (
        out.flags.c_contiguous
        and sample.dtype.itemsize == sample.bytes_per_sample  # not cint16/cint32/cfloat16: they widen
        and (sample.dtype.byteorder == "<" or (sample.dtype.byteorder in "=|" and sys.byteorder == "little"))
        and out.ctypes.data % 8 == 0  # OpenZL writes numeric streams aligned
    )


def _decode_into(frame, sample: SampleType, shape, expected: int, out: np.ndarray, verify: bool) -> np.ndarray:
    payload = np.frombuffer(frame, np.uint8)
    declared = _decoder.declared_size(payload)
    if declared == 0:
        raise _not_decodable("unreadable frame")
    if declared > expected:
        raise _not_decodable(f"the frame declares {declared} bytes of output, above the {expected} allowed")
    _check_length(declared, expected)
    in_place = _writes_in_place(out, sample)
    target = out.reshape(-1).view(np.uint8) if in_place else scratch(DECODED_BYTES, (expected,), np.uint8)
    try:
        written = _decoder.decompress(payload, target, verify)
    except RuntimeError as exc:
        raise _not_decodable(str(exc)) from None
    _check_length(written, expected)
    if in_place:
        sample.decode(target, shape)  # checks sub-byte padding bits; a view, no copy
        return out
    out[...] = sample.decode(target, shape)
    return out
