"""The numcodecs codec hands back the bytes it was given, in either byte order; frames stay little-endian."""

from __future__ import annotations

import json

import geozl
import numcodecs
import numpy as np
import pytest
import xarray as xr
import zarr

from xarray_rumi.virtual.codec import OpenZLBytesCodec, OpenZLCodec, OpenZLZarrCodec

BIG = [">u2", ">i4", ">f8", ">f4", ">c8", ">c16", ">i8"]
LITTLE = ["<u2", "<i4", "<f8", "<c8", "u1", "i1", "bool"]


def values(dtype, shape=(6, 5)):
    dtype = np.dtype(dtype)
    ramp = np.arange(np.prod(shape)).reshape(shape) * 3 - 7
    if dtype.kind == "b":
        return (ramp % 2 == 0).astype(dtype)
    if dtype.kind == "u":
        ramp = ramp + 7
    if dtype.kind == "c":
        return (ramp + 0.5j * ramp[::-1]).astype(dtype)
    return ramp.astype(dtype)


def endian_of(dtype) -> str:
    return "big" if np.dtype(dtype).byteorder == ">" else "little"


@pytest.mark.parametrize("dtype", BIG + LITTLE)
def test_decode_hands_back_the_bytes_encode_was_given(dtype):
    data = values(dtype)
    codec = OpenZLCodec(endian=endian_of(dtype))
    assert bytes(codec.decode(codec.encode(data))) == data.tobytes()
    out = np.empty_like(data)
    codec.decode(codec.encode(data), out=out)
    assert out.tobytes() == data.tobytes()


def test_the_issues_case_reads_back_unswapped():
    codec = OpenZLCodec(endian="big")
    data = np.array([0, 1, 2, 3], ">u2")
    assert np.frombuffer(codec.decode(codec.encode(data)), ">u2").tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("dtype", [">u2", ">f8", ">c8"])
def test_the_frame_holds_the_values_little_endian(dtype):
    """A frame is readable by any OpenZL decoder: it holds the values, not the caller's bytes."""
    data = values(dtype)
    frame = OpenZLCodec(endian="big").encode(data)
    little = np.dtype(dtype).newbyteorder("<")
    np.testing.assert_array_equal(np.frombuffer(geozl.decompress(frame), little).reshape(data.shape), data)
    # so a frame written from little-endian values reads as the same values under either configuration
    same = OpenZLCodec().encode(data.astype(little))
    np.testing.assert_array_equal(np.frombuffer(OpenZLCodec(endian="big").decode(same), dtype).reshape(data.shape), data)


@pytest.mark.parametrize(("dtype", "endian"), [(">u2", "little"), (">f8", "little"), ("<i4", "big"), ("<c8", "big")])
def test_a_chunk_of_the_other_byte_order_is_refused(dtype, endian):
    with pytest.raises(ValueError, match=f"endian.*{endian_of(dtype)}"):
        OpenZLCodec(endian=endian).encode(values(dtype))


@pytest.mark.parametrize("dtype", ["u1", "i1", "bool"])
def test_one_byte_elements_have_no_byte_order(dtype):
    data = values(dtype)
    for endian in ("little", "big"):
        codec = OpenZLCodec(endian=endian)
        assert bytes(codec.decode(codec.encode(data))) == data.tobytes()


@pytest.mark.parametrize("dtype", [">u2", ">f8", "<u2"])
def test_raw_bytes_with_a_sample_type_are_read_in_the_configured_order(dtype):
    """Behind zarr's ``bytes`` serializer the codec gets bytes: ``endian`` says how to read them."""
    data = values(dtype, (1, 4, 4))
    sample = {"u": "uint16", "f": "float64"}[np.dtype(dtype).kind]
    codec = OpenZLCodec(sample_type=sample, chunk_shape=[1, 4, 4], endian=endian_of(dtype))
    frame = codec.encode(np.frombuffer(data.tobytes(), np.uint8))
    assert bytes(codec.decode(frame)) == data.tobytes()
    stored = np.frombuffer(geozl.decompress(frame), np.dtype(dtype).newbyteorder("<")).reshape(data.shape)
    np.testing.assert_array_equal(stored, data)


def test_the_configuration_names_the_byte_order_only_when_big():
    assert OpenZLCodec().get_config() == {"id": "openzl", "recipe": "id>zstd"}
    config = OpenZLCodec(endian="big").get_config()
    assert config == {"id": "openzl", "recipe": "id>zstd", "endian": "big"}
    assert numcodecs.get_codec(json.loads(json.dumps(config))).get_config() == config


@pytest.mark.parametrize("dtype", [">u2", ">i4", ">f8", ">c16"])
def test_zarr_v2_array_of_a_big_endian_dtype_round_trips(dtype):
    data = values(dtype, (20, 17))
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store, shape=data.shape, chunks=(8, 8), dtype=dtype, zarr_format=2,
                              compressors=OpenZLCodec(endian="big"), filters=None)
    array[:] = data
    assert json.loads(store._store_dict[".zarray"].to_bytes())["compressor"]["endian"] == "big"
    reopened = zarr.open_array(store)   # the codec rebuilt from the stored configuration
    np.testing.assert_array_equal(reopened[:], data)


def test_zarr_v2_array_refuses_a_big_endian_dtype_with_a_little_endian_codec():
    array = zarr.create_array({}, shape=(4,), chunks=(4,), dtype=">u2", zarr_format=2,
                              compressors=OpenZLCodec(), filters=None)
    with pytest.raises(ValueError, match="endian='big'"):
        array[:] = np.arange(4, dtype=">u2")


@pytest.mark.parametrize("dtype", [">f8", ">u2", ">i4"])
def test_dataset_to_zarr_v2_of_big_endian_data(tmp_path, dtype):
    """What netCDF3 and FITS give: big-endian variables, written as a Zarr v2 store and read back."""
    ds = xr.Dataset({"v": (("y", "x"), values(dtype, (30, 20)))})
    ds.to_zarr(tmp_path / "be.zarr", zarr_format=2, consolidated=False,
               encoding={"v": {"compressors": [OpenZLCodec(endian="big")], "chunks": (16, 16)}})
    back = xr.open_zarr(tmp_path / "be.zarr", consolidated=False).v.values
    np.testing.assert_array_equal(back, ds.v.values)
    assert back.dtype.newbyteorder("=") == np.dtype(dtype).newbyteorder("=")


@pytest.mark.parametrize("dtype", [">u2", ">f8"])
def test_zarr_v3_serializer_of_a_big_endian_dtype_round_trips(dtype):
    """The array-to-bytes codec exchanges arrays, not bytes: it needs no byte order."""
    data = values(dtype, (1, 9, 7))
    array = zarr.create_array({}, shape=data.shape, chunks=(1, 4, 4), dtype=dtype,
                              serializer=OpenZLZarrCodec(), compressors=None)
    array[:] = data
    np.testing.assert_array_equal(array[:], data)


def test_zarr_v3_bytes_codec_behind_big_endian_bytes():
    """zarr's ``bytes`` serializer writing big-endian bytes, then ``numcodecs.openzl`` told so."""
    data = values(">u2", (1, 8, 8))
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store, shape=data.shape, chunks=(1, 8, 8), dtype=">u2",
                              serializer=zarr.codecs.BytesCodec(endian="big"),
                              compressors=[OpenZLBytesCodec(sample_type="uint16", chunk_shape=[1, 8, 8], endian="big")])
    array[:] = data
    np.testing.assert_array_equal(zarr.open_array(store)[:], data)
    frame = store._store_dict["c/0/0/0"].to_bytes()
    np.testing.assert_array_equal(np.frombuffer(geozl.decompress(frame), "<u2").reshape(data.shape), data)


def test_zarr_v3_serializer_with_a_sample_type_takes_a_big_endian_array():
    """The sample type names values, not a byte order: a >u2 array of uint16 frames, edges placed."""
    data = np.arange(36, dtype=">u2").reshape(1, 6, 6)
    array = zarr.create_array({}, shape=data.shape, chunks=(1, 4, 4), dtype=">u2", compressors=None,
                              serializer=OpenZLZarrCodec(sample_type="uint16", chunk_shape=[1, 4, 4], image_shape=[6, 6]))
    array[:] = data
    np.testing.assert_array_equal(array[:], data)
