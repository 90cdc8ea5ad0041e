"""The 28 sample encodings: which pairs exist, what they read as, and their bytes."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from _rumi_bytes import representable

from xarray_rumi import RumiFormatError
from xarray_rumi.format.dtypes import SAMPLE_TYPES, sample_type, sample_type_for_dtype, sample_type_from_name

# The spec's table of valid pairs, copied by hand: (sample_format, bits_per_sample) -> what it reads as.
SPEC_PAIRS = {
    (1, 1): np.bool_, (1, 2): ml_dtypes.uint2, (1, 4): ml_dtypes.uint4, (1, 8): np.uint8,
    (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64,
    (2, 2): ml_dtypes.int2, (2, 4): ml_dtypes.int4, (2, 8): np.int8, (2, 16): np.int16,
    (2, 32): np.int32, (2, 64): np.int64,
    (3, 16): np.float16, (3, 32): np.float32, (3, 64): np.float64,
    (5, 32): np.complex64, (5, 64): np.complex128,
    (6, 32): np.complex64, (6, 64): np.complex64, (6, 128): np.complex128,
    (100, 8): ml_dtypes.float8_e4m3fn, (101, 8): ml_dtypes.float8_e5m2, (102, 16): ml_dtypes.bfloat16,
    (103, 8): ml_dtypes.float8_e8m0fnu, (104, 6): ml_dtypes.float6_e2m3fn, (105, 6): ml_dtypes.float6_e3m2fn,
    (106, 4): ml_dtypes.float4_e2m1fn,
}


def test_exactly_the_spec_pairs_in_spec_order():
    assert list(SAMPLE_TYPES) == list(SPEC_PAIRS)
    for pair, dtype in SPEC_PAIRS.items():
        found = sample_type(*pair)
        assert (found.sample_format, found.bits_per_sample) == pair
        assert found.dtype == np.dtype(dtype), pair


def test_every_other_pair_is_rejected():
    formats = list(range(0, 8)) + list(range(99, 108)) + [255, 65535]
    bits = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 128, 255]
    rejected = 0
    for fmt in formats:
        for width in bits:
            if (fmt, width) in SPEC_PAIRS:
                continue
            with pytest.raises(RumiFormatError) as info:
                sample_type(fmt, width)
            assert info.value.rule == "sample-encoding"
            rejected += 1
    assert rejected == len(formats) * len(bits) - len(SPEC_PAIRS)


def test_storage_widths_follow_the_guide():
    # Sub-byte samples take one byte each; complex ones are two components.
    for t in SAMPLE_TYPES.values():
        if t.bits_per_sample < 8:
            assert t.bytes_per_sample == 1 and t.sub_byte
        else:
            assert t.bytes_per_sample * 8 == t.bits_per_sample
        assert t.components == (2 if t.sample_format in (5, 6) else 1)


@pytest.mark.parametrize("t", SAMPLE_TYPES.values(), ids=lambda t: t.name)
def test_encode_decode_is_exact_on_every_pattern(t):
    values = representable(t, 500, np.random.default_rng(t.bits_per_sample * 1000 + t.sample_format))
    stored = t.encode(values)
    assert stored.dtype == t.storage.newbyteorder("<")
    raw = stored.tobytes()
    assert len(raw) == values.size * t.bytes_per_sample
    back = t.decode(raw, values.shape)
    assert back.dtype == t.dtype
    assert back.tobytes() == np.asarray(values, t.dtype).tobytes()  # bit-exact, NaN payloads included


@pytest.mark.parametrize("t", [t for t in SAMPLE_TYPES.values() if t.sub_byte], ids=lambda t: t.name)
def test_sub_byte_samples_keep_high_bits_zero(t):
    stored = t.encode(representable(t, 300, np.random.default_rng(1)))
    assert int(stored.max()) < 1 << t.bits_per_sample
    for bad in (1 << t.bits_per_sample, 0x80):
        with pytest.raises(RumiFormatError) as info:
            t.decode(bytes([0, bad]), (2,))
        assert info.value.rule == "frame.sub-byte"


def test_little_endian_two_component_layouts():
    assert sample_type_from_name("uint16").decode(bytes([1, 2]), (1,)).tolist() == [0x0201]
    assert sample_type_from_name("int2").encode(np.array([-2, -1, 0, 1])).tolist() == [2, 3, 0, 1]
    assert sample_type_from_name("int4").encode(np.array([-8, -1, 7])).tolist() == [8, 15, 7]
    cint16 = sample_type_from_name("cint16")
    raw = np.array([-32768, 32767, 5, -6], "<i2").tobytes()
    assert cint16.decode(raw, (2,)).tolist() == [complex(-32768, 32767), complex(5, -6)]
    assert cint16.encode(np.array([3 - 4j], np.complex64)).tobytes() == np.array([3, -4], "<i2").tobytes()
    cfloat16 = sample_type_from_name("cfloat16")
    assert cfloat16.encode(np.array([0.5 + 2j])).tobytes() == np.array([0.5, 2], "<f2").tobytes()


@pytest.mark.parametrize("name, fits, does_not_fit", [
    ("bool", [0, 1, 1], [0, 2]),
    ("uint2", [0, 3], [4]),
    ("uint4", [0, 15], [16]),
    ("int2", [-2, 1], [2]),
    ("int4", [-8, 7], [-9]),
    ("uint8", [0, 255], [-1]),
    ("int16", [-32768, 32767], [32768]),
    ("uint32", [0, 2**32 - 1], [2**32]),
    ("float16", [0.5, -2.0, 65504.0], [0.1]),
    ("bfloat16", [1.0, 256.0], [257.0]),
    ("float8_e4m3fn", [448.0, -0.5], [1000.0]),
    ("float4_e2m1fn", [6.0, -1.5], [0.3]),
    ("cint16", [1 + 2j, -32768 + 0j], [0.5j]),
    ("cint32", [2**31 - 1 + 0j], [2**31 + 0j]),
    ("cfloat16", [0.25 - 1j], [0.1 + 0j]),
])
def test_narrower_storage_only_when_values_fit(name, fits, does_not_fit):
    t = sample_type_from_name(name)
    source_dtype = np.complex128 if t.components == 2 else (np.float64 if t.dtype.kind not in "uib" else np.int64)
    back = t.decode(t.encode(np.array(fits, source_dtype)).tobytes(), (len(fits),))
    assert back.astype(source_dtype).tolist() == np.array(fits, source_dtype).tolist()
    with pytest.raises(ValueError, match="do not fit"):
        t.encode(np.array(does_not_fit, source_dtype))


def test_nan_kept_in_floats_but_refused_where_unrepresentable():
    assert np.isnan(sample_type_from_name("float16").decode(
        sample_type_from_name("float16").encode(np.array([np.nan])).tobytes(), (1,)))[0]
    with pytest.raises(ValueError):
        sample_type_from_name("float6_e2m3fn").encode(np.array([np.nan]))  # the fn types have no NaN


def test_natural_sample_type_of_a_dtype():
    assert sample_type_for_dtype("uint16").name == "uint16"
    assert sample_type_for_dtype(np.dtype(">u2")).name == "uint16"  # byte order is the writer's business
    assert sample_type_for_dtype(bool).name == "bool"
    assert sample_type_for_dtype(np.complex64).name == "complex64"  # not cfloat16/cint16: those are explicit
    assert sample_type_for_dtype(ml_dtypes.float8_e5m2).name == "float8_e5m2"
    for dtype in ("float128" if hasattr(np, "float128") else "U1", object, "M8[s]"):
        with pytest.raises(ValueError):
            sample_type_for_dtype(dtype)


def test_names_are_numpy_names_or_the_three_complex_extras():
    for t in SAMPLE_TYPES.values():
        assert sample_type_from_name(t.name) is t
        if t.name not in ("cint16", "cint32", "cfloat16"):
            assert np.dtype(t.name if t.name != "bool" else np.bool_) == t.dtype or t.dtype.name == t.name
    with pytest.raises(ValueError, match="unknown sample type"):
        sample_type_from_name("int3")


def test_plain_types_never_import_ml_dtypes(tmp_path):
    # ml_dtypes' import can cost half a second (numpy 2.4), and xr.open_dataset imports every installed backend
    script = f"""
import sys, numpy as np, xarray as xr, xarray_rumi
blob = xarray_rumi.write({str(tmp_path / "a.rumi")!r}, np.ones((2, 8, 8), "float32"), tile_size=4)
assert xr.open_dataset({str(tmp_path / "a.rumi")!r}, engine="rumi", header=blob)["band_data"].values.sum() == 128
assert "ml_dtypes" not in sys.modules
import ml_dtypes
assert xarray_rumi.format.dtypes.sample_type_for_dtype(ml_dtypes.bfloat16).name == "bfloat16"
"""
    subprocess.run([sys.executable, "-c", script], check=True)
