"""One OpenZL frame as one Zarr chunk: the configuration and the work every registration shares."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from functools import lru_cache

import geozl
import numpy as np

from ..errors import RumiFormatError
from ..format.dtypes import SampleType, sample_type_for_dtype, sample_type_from_name
from ..format.grid import FrameGrid
from ..frames.codec import check_element_width, decode_elements, decompress, encode_frame
from .edges import RIGHT_EDGE_SHIFTS, frame_shift

#: The recipe of ordinary Zarr arrays: built-in OpenZL codecs only, valid for every element type.
DEFAULT_RECIPE = "id>zstd"

#: The byte orders the numcodecs codec exchanges bytes in (zarr's ``bytes`` codec names them so).
ENDIANS = ("little", "big")

# Zarr cannot name ml_dtypes types: the narrowest numpy type holding each one's values exactly.
_WIDENED = {
    "uint2": np.uint8, "uint4": np.uint8, "int2": np.int8, "int4": np.int8,
    "float8_e4m3fn": np.float32, "float8_e5m2": np.float32, "float8_e8m0fnu": np.float32,
    "bfloat16": np.float32, "float6_e2m3fn": np.float32, "float6_e3m2fn": np.float32,
    "float4_e2m1fn": np.float32,
}


def zarr_dtype(sample: SampleType) -> np.dtype:
    """The dtype of a Zarr array of ``sample`` frames: the reader's, widened where Zarr cannot name it."""
    return np.dtype(_WIDENED.get(sample.name, sample.dtype))


@dataclass(frozen=True)
class OpenZLConfig:
    """The codec's configuration, checked where it is made, and the encoding and decoding every registration shares."""

    sample_type: str | None = None
    recipe: str = DEFAULT_RECIPE
    chunk_shape: tuple[int, ...] | None = None
    image_shape: tuple[int, int] | None = None
    endian: str = "little"

    def __post_init__(self) -> None:
        # a bad configuration fails where it is made, naming the field
        if self.sample_type is not None:
            _check_type("sample_type", self.sample_type, str, "a rumi sample type name like 'uint16'")
            try:
                sample_type_from_name(self.sample_type)
            except ValueError as exc:
                raise ValueError(f"sample_type: {exc}") from None
        _check_type("recipe", self.recipe, str, "a GeoZL recipe like 'planar>zigzag>zstd'")
        _check_type("endian", self.endian, str, f"one of {ENDIANS}")
        if self.endian not in ENDIANS:
            raise ValueError(f"endian must be one of {ENDIANS}, got {self.endian!r}")
        object.__setattr__(self, "chunk_shape", _sizes("chunk_shape", self.chunk_shape, at_least=1))
        object.__setattr__(self, "image_shape", _sizes("image_shape", self.image_shape, length=2))
        reason = _recipe_refusal(self.recipe, None if self.sample_type is None else
                                 sample_type_from_name(self.sample_type).storage.str)
        if reason is not None:
            raise ValueError(f"recipe {self.recipe!r} cannot encode this codec's chunks: {reason}")
        if self.image_shape is not None and (self.sample_type is None or self.chunk_shape is None
                                             or len(self.chunk_shape) < 2):
            raise ValueError("edge placement (image_shape) needs sample_type and a chunk_shape ending in (T_l, T_w)")

    def to_config(self) -> dict:
        """The configuration as plain JSON values: the recipe, then the fields not at their defaults."""
        config = {"recipe": self.recipe}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default and f.name != "recipe":
                config[f.name] = list(value) if isinstance(value, tuple) else value
        return config

    def sample_for(self, dtype) -> SampleType:
        if self.sample_type is not None:
            return sample_type_from_name(self.sample_type)
        return sample_type_for_dtype(dtype)

    def encode(self, chunk: np.ndarray) -> bytes:
        """One OpenZL frame holding ``chunk`` (any shape; the last two axes are rows and columns)."""
        chunk = np.asarray(chunk)
        stored = self.sample_for(chunk.dtype).encode(chunk)  # refuses values the sample type cannot hold
        rows = chunk.shape[-2] if chunk.ndim >= 2 else 1
        return encode_frame(stored.reshape(math.prod(chunk.shape[:-2]), rows, -1), self.recipe)

    def decode(self, data, chunk_shape: tuple[int, ...] | None = None, dtype=None) -> np.ndarray:
        """Decode one chunk to ``chunk_shape`` (default: the configured one)."""
        data = memoryview(data).cast("B")
        shape = tuple(chunk_shape if chunk_shape is not None else self.chunk_shape or ())
        if not shape:
            raise ValueError("the chunk shape is unknown: configure chunk_shape or pass it")
        sample = self.sample_for(dtype if dtype is not None else np.uint8)
        out_dtype = zarr_dtype(sample) if self.sample_type is not None else np.dtype(dtype)
        chunk_bytes = math.prod(shape) * sample.bytes_per_sample   # math.prod: np.prod's overhead shows per chunk
        shift = frame_shift(data)
        raw = self._decompress(data[shift:], chunk_bytes, sample)
        if raw.size == chunk_bytes:   # a whole chunk: no cut frame holds as many samples
            return sample.decode(raw, shape).astype(out_dtype, copy=False)
        if self.image_shape is None:
            raise RumiFormatError("frame.length", f"the chunk decodes to {raw.size} bytes, not the {chunk_bytes} of a chunk")
        h, w = self._frame_size(raw.size // sample.bytes_per_sample, raw.size % sample.bytes_per_sample, shape, shift)
        out = np.zeros(shape, out_dtype)
        out[..., :h, :w] = sample.decode(raw, (*shape[:-2], h, w))
        return out

    def _decompress(self, frame: memoryview, limit: int, sample: SampleType) -> np.ndarray:
        checked = self.__dict__.setdefault("_widths_checked", set())   # not a field: equality and config ignore it
        if sample.name in checked:
            return decompress(frame, limit)
        raw, width = decode_elements(frame, limit)
        check_element_width(width, sample)
        checked.add(sample.name)
        return raw

    def _frame_size(self, samples: int, remainder: int, shape, shift: int) -> tuple[int, int]:
        planes = math.prod(shape[:-2])
        tile_length, tile_width = shape[-2:]
        shapes = _frame_sizes(self.image_shape, (tile_length, tile_width))
        candidates = sorted(c for c in shapes if planes * c[0] * c[1] == samples and not remainder)
        if len(candidates) == 2:
            # a right edge (T_l, e_w) or a bottom edge (e_l, T_w): the reference's shift says which
            right = shift in RIGHT_EDGE_SHIFTS
            candidates = [c for c in candidates if (c[0] == tile_length) == right]
        if len(candidates) != 1:
            image_length, image_width = self.image_shape
            raise RumiFormatError("frame.length", f"the frame decodes to {samples} samples, which no frame of a "
                                  f"{image_length} x {image_width} image in {tile_length} x {tile_width} tiles holds")
        return candidates[0]


@lru_cache(maxsize=64)
def _frame_sizes(image_shape: tuple[int, int], tile_shape: tuple[int, int]) -> frozenset[tuple[int, int]]:
    (image_length, image_width), (tile_length, tile_width) = image_shape, tile_shape
    return FrameGrid(image_width, image_length, tile_width, tile_length, 1).frame_sizes | {tile_shape}


def _check_type(name: str, value, kind: type, what: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {what}, got {value!r}")


def _sizes(name: str, value, *, length: int | None = None, at_least: int = 0) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple, np.ndarray)) or any(
            isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Integral) for item in value):
        raise TypeError(f"{name} must be a list of positive integers, got {value!r}")
    sizes = tuple(int(item) for item in value)
    if (length is not None and len(sizes) != length) or len(sizes) < at_least or any(size < 1 for size in sizes):
        raise ValueError(f"{name} must be {length or f'at least {at_least}'} positive integers, got {list(sizes)}")
    return sizes


@lru_cache(maxsize=64)
def _recipe_refusal(recipe: str, storage: str | None) -> str | None:
    """Why ``recipe`` cannot encode elements of ``storage`` (any element width where ``None``), or ``None``."""
    reason = None
    for dtype in [storage] if storage is not None else ["uint8", "uint16", "uint32", "uint64"]:
        try:
            geozl.graph(np.zeros((1, 1, 1), dtype), recipe)   # the graph an encode would build, on one element
            return None
        except (RuntimeError, ValueError) as exc:
            reason = reason or " ".join(str(exc).split())
    return reason


__all__ = ["DEFAULT_RECIPE", "ENDIANS", "OpenZLConfig", "zarr_dtype"]
