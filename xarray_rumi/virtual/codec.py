"""OpenZL as a Zarr codec: numcodecs ``"openzl"``, zarr v3 ``"openzl"`` and ``"numcodecs.openzl"``."""

from __future__ import annotations

import asyncio
import math
import sys
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ensure_ndarray, ndarray_copy
from zarr.abc.codec import ArrayBytesCodec, BytesBytesCodec
from zarr.core.common import parse_named_configuration
from zarr.registry import get_ndbuffer_class, register_codec

from ..format.dtypes import sample_type_from_name
from ..format.limits import DEFAULT_LIMITS
from ..frames.codec import decode_elements, decompress, frame_version
from .chunks import DEFAULT_RECIPE, OpenZLConfig, zarr_dtype


class OpenZLCodec(Codec):
    """numcodecs codec ``"openzl"``: one OpenZL frame per chunk.

    >>> import numcodecs
    >>> codec = numcodecs.get_codec({"id": "openzl", "sample_type": "int32", "chunk_shape": [2, 3]})
    >>> data = np.arange(6, dtype="int32").reshape(2, 3)
    >>> np.frombuffer(codec.decode(codec.encode(data)), "int32").tolist()
    [0, 1, 2, 3, 4, 5]
    """

    codec_id = "openzl"

    def __init__(self, **config):
        # a configuration may carry its codec id: numcodecs' from_config passes it on, zarr's numcodecs.* names too
        codec_id = config.pop("id", self.codec_id)
        if codec_id != self.codec_id:
            raise ValueError(f"openzl takes the configuration of codec id 'openzl', got id {codec_id!r}: {config}")
        self.config = OpenZLConfig(**config)

    def get_config(self) -> dict:
        return {"id": self.codec_id, **self.config.to_config()}

    def encode(self, buf) -> bytes:
        chunk = np.asarray(buf) if isinstance(buf, np.ndarray) else ensure_ndarray(buf)
        if self.config.sample_type is not None:
            dtype = zarr_dtype(sample_type_from_name(self.config.sample_type))
            if chunk.dtype.newbyteorder("=") != dtype.newbyteorder("="):
                # behind zarr's bytes serializer: raw bytes in the configured byte order
                chunk = ensure_contiguous_ndarray(chunk).view(dtype.newbyteorder(_BYTE_ORDER[self.config.endian]))
                if self.config.chunk_shape and chunk.size == math.prod(self.config.chunk_shape):
                    chunk = chunk.reshape(self.config.chunk_shape)
        _check_byte_order(chunk.dtype, self.config.endian)
        return self.config.encode(chunk)

    def decode(self, buf, out=None):
        # numcodecs hands over bytes only: without a sample type they go back raw, for zarr to view
        data = memoryview(ensure_contiguous_ndarray(buf)).cast("B")
        order = _BYTE_ORDER[self.config.endian]
        if self.config.sample_type is not None:
            array = self.config.decode(data)
            raw = np.ascontiguousarray(array, array.dtype.newbyteorder(order)).reshape(-1).view(np.uint8)
        else:
            limit = np.asarray(out).nbytes if out is not None else DEFAULT_LIMITS.max_frame_bytes
            frame_version(data)
            if order == "<":
                raw = decompress(data, limit)
            else:   # the frame's samples are little-endian: swapping them needs the width the frame records
                raw, width = decode_elements(data, limit)
                if width > 1:
                    raw = raw.view(f"<u{width}").astype(f">u{width}").view(np.uint8)
        return ndarray_copy(raw, out)

    def __repr__(self) -> str:
        return f"OpenZLCodec({', '.join(f'{k}={v!r}' for k, v in self.config.to_config().items())})"


_BYTE_ORDER = {"little": "<", "big": ">"}


def _check_byte_order(dtype: np.dtype, endian: str) -> None:
    """Refuse a chunk whose bytes decode would not hand back: one of the other byte order."""
    order = {"=": sys.byteorder, "<": "little", ">": "big"}.get(dtype.byteorder)
    if order is not None and order != endian and dtype.itemsize > 1:
        raise ValueError(f"openzl: the chunk is {order}-endian ({dtype.str}), but the codec's endian is {endian!r}, "
                         f"so decoding would hand back its bytes swapped: use OpenZLCodec(endian={order!r}) for "
                         f"{order}-endian arrays, or store the array {endian}-endian")


def _same_planes(a, b) -> bool:
    """Whether two chunk shapes hold the same planes of the same rows and columns."""
    return tuple(a[-2:]) == tuple(b[-2:]) and math.prod(a[:-2]) == math.prod(b[:-2])


class _ZarrOpenZL:
    """What both zarr v3 codecs share: their checked :class:`OpenZLConfig` as the named config and against the array,
    and the async half of zarr's interface run in a thread."""

    is_fixed_size = False
    _name: str

    @classmethod
    def from_dict(cls, data: dict):
        _, configuration = parse_named_configuration(data, cls._name, require_configuration=False)
        return cls(**(configuration or {}))

    def to_dict(self) -> dict:
        return {"name": self._name, "configuration": self.config.to_config()}

    def validate(self, *, shape, dtype, chunk_grid) -> None:
        """Refuse a configuration whose chunk shape or sample type is not the array's."""
        config, grid_chunks = self.config, getattr(chunk_grid, "chunk_shape", None)
        if None not in (config.chunk_shape, grid_chunks) and not _same_planes(grid_chunks, config.chunk_shape):
            raise ValueError(f"openzl chunk_shape {list(config.chunk_shape)} differs from the array's chunks "
                             f"{list(grid_chunks)}")
        native = dtype.to_native_dtype()
        if config.sample_type is not None:
            expected = zarr_dtype(sample_type_from_name(config.sample_type))
            if expected.newbyteorder("=") != native.newbyteorder("="):
                raise ValueError(f"openzl sample_type {config.sample_type} reads as {expected}, but the array is "
                                 f"{native}")

    async def _decode_single(self, chunk_data, chunk_spec):
        return await asyncio.to_thread(self._decode_sync, chunk_data, chunk_spec)

    async def _encode_single(self, chunk_data, chunk_spec):
        return await asyncio.to_thread(self._encode_sync, chunk_data, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec) -> int:
        raise NotImplementedError("OpenZL frames are variable-size")


@dataclass(frozen=True)
class OpenZLZarrCodec(_ZarrOpenZL, ArrayBytesCodec):
    """zarr v3 array-to-bytes codec ``"openzl"`` (the serializer of a chunk).

    >>> import zarr
    >>> a = zarr.create_array({}, shape=(5, 7), chunks=(4, 4), dtype="uint16", serializer=OpenZLZarrCodec())
    >>> a[:] = np.arange(35, dtype="uint16").reshape(5, 7)
    >>> int(a[4, 6])
    34
    """

    _name = "openzl"
    sample_type: str | None = None
    recipe: str = DEFAULT_RECIPE
    chunk_shape: tuple[int, ...] | None = None
    image_shape: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        config = self.config  # validates and normalises
        for name in ("chunk_shape", "image_shape"):
            object.__setattr__(self, name, getattr(config, name))

    @cached_property
    def config(self) -> OpenZLConfig:
        return OpenZLConfig(self.sample_type, self.recipe, self.chunk_shape, self.image_shape)

    def _decode_sync(self, chunk_bytes, chunk_spec):
        native = chunk_spec.dtype.to_native_dtype()
        array = self.config.decode(chunk_bytes.as_numpy_array(), tuple(chunk_spec.shape), native)
        return get_ndbuffer_class().from_ndarray_like(array)

    def _encode_sync(self, chunk_array, chunk_spec):
        return chunk_spec.prototype.buffer.from_bytes(self.config.encode(chunk_array.as_numpy_array()))


@dataclass(frozen=True)
class OpenZLBytesCodec(_ZarrOpenZL, BytesBytesCodec):
    """zarr v3 ``"numcodecs.openzl"``: the numcodecs codec behind zarr's ``bytes`` serializer.

    >>> import zarr
    >>> a = zarr.create_array({}, shape=(3, 3), dtype="complex64", compressors=[
    ...     OpenZLBytesCodec(sample_type="cint16", chunk_shape=[3, 3])])
    >>> a[:] = np.full((3, 3), 2 - 1j, "complex64")
    >>> complex(a[1, 1]), a.metadata.codecs[1].to_dict()["name"]
    ((2-1j), 'numcodecs.openzl')
    """

    _name = "numcodecs.openzl"
    codec: OpenZLCodec

    def __init__(self, **config):
        object.__setattr__(self, "codec", OpenZLCodec(**config))

    @property
    def config(self) -> OpenZLConfig:
        return self.codec.config

    @property
    def codec_config(self) -> dict:
        # what VirtualiZarr writes as a Kerchunk compressor, as for numcodecs' own zarr v3 wrappers
        return self.codec.get_config()

    def _decode_sync(self, chunk_bytes, chunk_spec):
        return chunk_spec.prototype.buffer.from_bytes(self.codec.decode(chunk_bytes.as_numpy_array()))

    def _encode_sync(self, chunk_bytes, chunk_spec):
        return chunk_spec.prototype.buffer.from_bytes(self.codec.encode(chunk_bytes.as_numpy_array()))


register_codec("numcodecs.openzl", OpenZLBytesCodec)  # for a source tree on sys.path, which has no entry points

__all__ = ["DEFAULT_RECIPE", "OpenZLBytesCodec", "OpenZLConfig", "OpenZLCodec", "OpenZLZarrCodec", "zarr_dtype"]
