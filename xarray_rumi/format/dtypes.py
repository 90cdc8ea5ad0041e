"""The 28 sample encodings of rumi 0.1.0 and how their bytes map to numpy."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
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


def _t(name, fmt, bits, dtype, storage=None, components=1) -> SampleType:
    dtype = np.dtype(dtype)
    return SampleType(name, fmt, bits, dtype, np.dtype(storage or dtype), components)


_u8 = np.uint8
SAMPLE_TYPES: dict[tuple[int, int], SampleType] = {
    (t.sample_format, t.bits_per_sample): t
    for t in (
        _t("bool", 1, 1, np.bool_, _u8),
        _t("uint2", 1, 2, ml_dtypes.uint2, _u8),
        _t("uint4", 1, 4, ml_dtypes.uint4, _u8),
        _t("uint8", 1, 8, np.uint8),
        _t("uint16", 1, 16, np.uint16),
        _t("uint32", 1, 32, np.uint32),
        _t("uint64", 1, 64, np.uint64),
        _t("int2", 2, 2, ml_dtypes.int2, _u8),
        _t("int4", 2, 4, ml_dtypes.int4, _u8),
        _t("int8", 2, 8, np.int8),
        _t("int16", 2, 16, np.int16),
        _t("int32", 2, 32, np.int32),
        _t("int64", 2, 64, np.int64),
        _t("float16", 3, 16, np.float16),
        _t("float32", 3, 32, np.float32),
        _t("float64", 3, 64, np.float64),
        _t("cint16", 5, 32, np.complex64, np.int16, 2),
        _t("cint32", 5, 64, np.complex128, np.int32, 2),
        _t("cfloat16", 6, 32, np.complex64, np.float16, 2),
        _t("complex64", 6, 64, np.complex64, np.float32, 2),
        _t("complex128", 6, 128, np.complex128, np.float64, 2),
        _t("float8_e4m3fn", 100, 8, ml_dtypes.float8_e4m3fn, _u8),
        _t("float8_e5m2", 101, 8, ml_dtypes.float8_e5m2, _u8),
        _t("bfloat16", 102, 16, ml_dtypes.bfloat16, np.uint16),
        _t("float8_e8m0fnu", 103, 8, ml_dtypes.float8_e8m0fnu, _u8),
        _t("float6_e2m3fn", 104, 6, ml_dtypes.float6_e2m3fn, _u8),
        _t("float6_e3m2fn", 105, 6, ml_dtypes.float6_e3m2fn, _u8),
        _t("float4_e2m1fn", 106, 4, ml_dtypes.float4_e2m1fn, _u8),
    )
}
_BY_NAME = {t.name: t for t in SAMPLE_TYPES.values()}

_BY_DTYPE = {t.dtype: t for t in SAMPLE_TYPES.values() if t.name not in ("cint16", "cint32", "cfloat16")}


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
        return _BY_NAME[str(name)]
    except KeyError:
        raise ValueError(f"unknown sample type {name!r}; expected one of {', '.join(_BY_NAME)}") from None


def sample_type_for_dtype(dtype) -> SampleType:
    """The sample type that stores a numpy dtype without conversion; ``ValueError`` if none does."""
    dtype = np.dtype(dtype)
    found = _BY_DTYPE.get(np.dtype(dtype.type))
    if found is None:
        raise ValueError(f"rumi has no sample type for dtype {dtype}")
    return found
