"""The 28 sample encodings of rumi 0.1.0 and how their bytes map to numpy."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import RumiFormatError


@dataclass(frozen=True)
class SampleType:
    """One valid ``(sample_format, bits_per_sample)`` pair.

    >>> t = sample_type_from_name("cint16")
    >>> (t.sample_format, t.bits_per_sample, t.dtype, t.storage, t.components)
    (5, 32, dtype('complex64'), dtype('int16'), 2)
    """

    name: str
    sample_format: int
    bits_per_sample: int
    dtype: np.dtype
    storage: np.dtype
    components: int = 1

    @property
    def bytes_per_sample(self) -> int:
        return self.storage.itemsize * self.components

    @property
    def sub_byte(self) -> bool:
        """Whether samples are narrower than their one-byte storage."""
        return self.bits_per_sample < 8

    def decode(self, raw: np.ndarray | bytes | memoryview, shape: tuple[int, ...]) -> np.ndarray:
        """Exactly ``prod(shape)`` samples of frame bytes as an array; ``frame.sub-byte`` for set padding bits.

        >>> sample_type_from_name("uint4").decode(bytes([1, 15]), (2,)).tolist()
        [1, 15]
        """
        stored = np.frombuffer(raw, dtype=self.storage.newbyteorder("<"))
        if self.sub_byte:
            if stored.size and int(stored.max()) >> self.bits_per_sample:
                raise RumiFormatError("frame.sub-byte", f"{self.name} samples must keep their unused high bits zero")
            return stored.view(self.dtype).reshape(shape)
        if self.components == 2 and self.dtype.itemsize != self.bytes_per_sample:
            parts = stored.reshape(*shape, 2).astype(np.finfo(self.dtype).dtype)   # (real, imag) pairs
            return parts.view(self.dtype).reshape(shape)
        return stored.view(self.dtype.newbyteorder("<")).reshape(shape).astype(self.dtype, copy=False)

    def encode(self, values: np.ndarray) -> np.ndarray:
        """``values`` as contiguous little-endian storage elements; ``ValueError`` if one does not fit exactly.

        >>> sample_type_from_name("int2").encode(np.array([-1, 1])).tolist()
        [3, 1]
        """
        values = np.asarray(values)
        if self.components == 2:
            values = values if values.dtype.kind == "c" else values.astype(np.complex128)
            stored = _exact_cast(np.stack([values.real, values.imag], axis=-1), self.storage, self.name)
        else:
            stored = np.ascontiguousarray(_exact_cast(values, self.dtype, self.name)).view(self.storage)
        return np.ascontiguousarray(stored).astype(self.storage.newbyteorder("<"), copy=False)


def _exact_cast(values: np.ndarray, target: np.dtype, name: str) -> np.ndarray:
    if values.dtype == target:
        return values
    with np.errstate(invalid="ignore", over="ignore"):
        cast = values.astype(target)
        back = cast.astype(values.dtype)
    same = back == values
    if values.dtype.kind in "fc":
        same |= np.isnan(values) & np.isnan(back)
    if not np.all(same):
        raise ValueError(f"values do not fit sample type {name!r} exactly")
    return cast


_u8 = np.uint8
#: The spec's sample types: name, sample_format, bits_per_sample, numpy type (a str: ml_dtypes' type of that name),
#: storage, components.
_SPECS = (
    ("bool", 1, 1, np.bool_, _u8),
    ("uint2", 1, 2, "uint2", _u8),
    ("uint4", 1, 4, "uint4", _u8),
    ("uint8", 1, 8, np.uint8),
    ("uint16", 1, 16, np.uint16),
    ("uint32", 1, 32, np.uint32),
    ("uint64", 1, 64, np.uint64),
    ("int2", 2, 2, "int2", _u8),
    ("int4", 2, 4, "int4", _u8),
    ("int8", 2, 8, np.int8),
    ("int16", 2, 16, np.int16),
    ("int32", 2, 32, np.int32),
    ("int64", 2, 64, np.int64),
    ("float16", 3, 16, np.float16),
    ("float32", 3, 32, np.float32),
    ("float64", 3, 64, np.float64),
    ("cint16", 5, 32, np.complex64, np.int16, 2),
    ("cint32", 5, 64, np.complex128, np.int32, 2),
    ("cfloat16", 6, 32, np.complex64, np.float16, 2),
    ("complex64", 6, 64, np.complex64, np.float32, 2),
    ("complex128", 6, 128, np.complex128, np.float64, 2),
    ("float8_e4m3fn", 100, 8, "float8_e4m3fn", _u8),
    ("float8_e5m2", 101, 8, "float8_e5m2", _u8),
    ("bfloat16", 102, 16, "bfloat16", np.uint16),
    ("float8_e8m0fnu", 103, 8, "float8_e8m0fnu", _u8),
    ("float6_e2m3fn", 104, 6, "float6_e2m3fn", _u8),
    ("float6_e3m2fn", 105, 6, "float6_e3m2fn", _u8),
    ("float4_e2m1fn", 106, 4, "float4_e2m1fn", _u8),
)


class _SampleTypes(Mapping):
    """``(sample_format, bits_per_sample)`` -> :class:`SampleType`, each made when first asked for.

    ml_dtypes is imported only for one of its types: with some numpy releases its import costs half a second, which
    every process reading plain integers or floats (and every ``xr.open_dataset``, which loads all backends) would pay.
    """

    def __init__(self) -> None:
        self._specs = {(spec[1], spec[2]): spec for spec in _SPECS}
        self._made: dict[tuple[int, int], SampleType] = {}

    def __getitem__(self, pair) -> SampleType:
        made = self._made.get(pair)
        if made is None:
            made = self._made[pair] = _from_spec(*self._specs[pair])
        return made

    def __iter__(self):
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


def _from_spec(name, sample_format, bits, dtype, storage=None, components=1) -> SampleType:
    if isinstance(dtype, str):
        import ml_dtypes

        dtype = getattr(ml_dtypes, dtype)
    return SampleType(name, sample_format, bits, np.dtype(dtype), np.dtype(storage or dtype), components)


SAMPLE_TYPES = _SampleTypes()
_PAIR_BY_NAME = {spec[0]: (spec[1], spec[2]) for spec in _SPECS}


def sample_type(sample_format: int, bits_per_sample: int, *, rule: str = "sample-encoding") -> SampleType:
    """The sample type of a pair; ``RumiFormatError`` for a pair the spec does not list.

    >>> sample_type(3, 8)
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: sample-encoding: (sample_format=3, bits_per_sample=8) is not a valid rumi pair
    """
    try:
        return SAMPLE_TYPES[(int(sample_format), int(bits_per_sample))]
    except KeyError:
        raise RumiFormatError(rule, f"(sample_format={sample_format}, bits_per_sample={bits_per_sample}) "
                              "is not a valid rumi pair") from None


def sample_type_from_name(name: str) -> SampleType:
    """The sample type named ``name`` (``"cint16"``, ``"uint4"``, ...); ``ValueError`` for another name."""
    try:
        return SAMPLE_TYPES[_PAIR_BY_NAME[str(name)]]
    except KeyError:
        raise ValueError(f"unknown sample type {name!r}; expected one of {', '.join(_PAIR_BY_NAME)}") from None


def sample_type_for_dtype(dtype) -> SampleType:
    """The sample type that stores a numpy dtype without conversion; ``ValueError`` if none does."""
    pair = _pair_of_dtype(np.dtype(dtype))
    if pair is None:
        raise ValueError(f"rumi has no sample type for dtype {np.dtype(dtype)}")
    return SAMPLE_TYPES[pair]


@functools.cache  # numpy spells a dtype's name anew each time it is asked (~1.5 us)
def _pair_of_dtype(dtype: np.dtype) -> tuple[int, int] | None:
    # numpy and ml_dtypes name each dtype as the spec names its type; no dtype is named cint16, cint32 or cfloat16,
    # so complex arrays are written as complex64/complex128
    return _PAIR_BY_NAME.get(dtype.name)
