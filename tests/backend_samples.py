"""Test data for the backend tests: values of every rumi sample encoding.

Values cover each type's range (extremes of the integers, NaN and infinities
where the type has them) so a reader that converts anywhere shows up.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from xarray_rumi.format.dtypes import SAMPLE_TYPES, SampleType

SAMPLE_NAMES = [t.name for t in SAMPLE_TYPES.values()]
_SPECIALS = {"float16", "float32", "float64", "bfloat16", "float8_e5m2"}  # have NaN and +-inf
_FLOAT_SPAN = {
    "float4_e2m1fn": 6.0, "float6_e2m3fn": 7.5, "float6_e3m2fn": 28.0, "float8_e4m3fn": 448.0,
    "float8_e5m2": 57344.0, "bfloat16": 1e30, "float16": 60000.0, "float32": 1e30, "float64": 1e300,
}


def sample_values(sample: SampleType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random values of ``sample.dtype`` that ``sample`` stores exactly."""
    rng = np.random.default_rng(seed)
    name = sample.name
    if name == "bool":
        return rng.random(shape) > 0.5
    if name.startswith(("uint", "int")):
        info = ml_dtypes.iinfo(sample.dtype) if sample.bits_per_sample < 8 else np.iinfo(sample.dtype)
        values = rng.integers(int(info.min), int(info.max), shape, endpoint=True, dtype=np.int64
                              if name.startswith("int") or sample.bits_per_sample < 64 else np.uint64)
        flat = values.reshape(-1)
        flat[:2] = [info.min, info.max]
        return values.astype(sample.dtype)
    if name == "float8_e8m0fnu":  # powers of two only
        return np.exp2(rng.integers(-127, 128, shape).astype(np.float64)).astype(sample.dtype)
    if sample.components == 2:
        part = {"cint16": np.int16, "cint32": np.int32, "cfloat16": np.float16}.get(name)
        if part is not None and np.dtype(part).kind == "i":
            info = np.iinfo(part)
            real = rng.integers(info.min, info.max, shape, endpoint=True)
            imag = rng.integers(info.min, info.max, shape, endpoint=True)
        else:
            real, imag = rng.normal(0, 1000, shape), rng.normal(0, 1000, shape)
            if part is not None:  # cfloat16: parts representable in float16
                real, imag = real.astype(np.float16), imag.astype(np.float16)
        return (real + 1j * imag).astype(sample.dtype)
    span = _FLOAT_SPAN[name]
    values = rng.uniform(-span, span, shape).astype(sample.dtype)
    if name in _SPECIALS:
        flat = values.reshape(-1)
        flat[:3] = np.array([np.nan, np.inf, -np.inf]).astype(sample.dtype)
    return values


def same_values(got: np.ndarray, expected: np.ndarray) -> bool:
    """Equal dtype, shape and bytes: NaN payloads and signed zeros included."""
    return got.dtype == expected.dtype and got.shape == expected.shape and \
        np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes()
