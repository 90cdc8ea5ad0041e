"""Every field of the codec's configuration is checked where the codec is made, by every way of making it."""

from __future__ import annotations

import dataclasses

import numcodecs
import numpy as np
import pytest
import zarr

from xarray_rumi.virtual.codec import OpenZLBytesCodec, OpenZLConfig, OpenZLCodec, OpenZLZarrCodec

GRID = {"sample_type": "uint16", "chunk_shape": [1, 4, 4], "image_shape": [6, 6]}

# (configuration, error type, the field the message names)
BAD = [
    ({"chunk_shape": [-1, 4]}, ValueError, "chunk_shape"),
    ({"chunk_shape": [0, 0]}, ValueError, "chunk_shape"),
    ({"chunk_shape": []}, ValueError, "chunk_shape"),
    ({"chunk_shape": "44"}, TypeError, "chunk_shape"),
    ({"chunk_shape": 44}, TypeError, "chunk_shape"),
    ({"chunk_shape": [4.5, 4]}, TypeError, "chunk_shape"),
    ({"chunk_shape": [True, 4]}, TypeError, "chunk_shape"),
    ({"chunk_shape": ["4", "4"]}, TypeError, "chunk_shape"),
    ({"recipe": "foo>zstd"}, ValueError, "recipe"),
    ({"recipe": "zstd"}, ValueError, "recipe"),
    ({"recipe": ""}, ValueError, "recipe"),
    ({"recipe": 5}, TypeError, "recipe"),
    ({"recipe": None}, TypeError, "recipe"),
    ({"sample_type": "uint8", "recipe": "id>transpose>zstd"}, ValueError, "recipe"),
    ({"sample_type": "uint3"}, ValueError, "sample_type"),
    ({"sample_type": 16}, TypeError, "sample_type"),
    ({**GRID, "image_shape": [6]}, ValueError, "image_shape"),
    ({**GRID, "image_shape": [0, 6]}, ValueError, "image_shape"),
    ({**GRID, "image_shape": "66"}, TypeError, "image_shape"),
]
NUMCODECS_ONLY = [
    ({"endian": "middle"}, ValueError, "endian"),
    ({"endian": None}, TypeError, "endian"),
    ({"endian": ">"}, ValueError, "endian"),
]


def ids(cases):
    return [f"{config}" for config, _, _ in cases]


@pytest.mark.parametrize(("config", "error", "field"), BAD + NUMCODECS_ONLY, ids=ids(BAD + NUMCODECS_ONLY))
def test_numcodecs_codec_refuses_a_bad_field_when_made(config, error, field):
    for make in (lambda: OpenZLCodec(**config),
                 lambda: OpenZLCodec.from_config({"id": "openzl", **config}),
                 lambda: numcodecs.get_codec({"id": "openzl", **config}),
                 lambda: OpenZLBytesCodec.from_dict({"name": "numcodecs.openzl", "configuration": config})):
        with pytest.raises(error, match=field):
            make()


@pytest.mark.parametrize(("config", "error", "field"), BAD, ids=ids(BAD))
def test_zarr_v3_codec_refuses_a_bad_field_when_made(config, error, field):
    with pytest.raises(error, match=field):
        OpenZLZarrCodec.from_dict({"name": "openzl", "configuration": config})
    good = OpenZLZarrCodec(**GRID)
    with pytest.raises(error, match=field):   # a codec evolved from another, as zarr does from the array spec
        dataclasses.replace(good, **{**GRID, **config})


def test_the_zarr_v3_array_to_bytes_codec_takes_no_byte_order():
    with pytest.raises(TypeError, match="endian"):
        OpenZLZarrCodec.from_dict({"name": "openzl", "configuration": {"endian": "big"}})


def test_good_configurations_are_normalised():
    chunks = OpenZLConfig(sample_type="uint16", chunk_shape=np.array([1, 4, 4]), image_shape=[np.int64(6), 6])
    assert chunks.chunk_shape == (1, 4, 4) and chunks.image_shape == (6, 6)
    assert chunks.to_config() == {"recipe": "id>zstd", "sample_type": "uint16", "chunk_shape": [1, 4, 4],
                                  "image_shape": [6, 6]}
    # a recipe that needs wider elements is fine where no sample type narrows it
    assert OpenZLCodec(recipe="id>transpose>zstd").get_config()["recipe"] == "id>transpose>zstd"


def test_an_array_behind_the_bytes_codec_must_have_the_sample_types_dtype():
    with pytest.raises(ValueError, match="sample_type"):
        zarr.create_array({}, shape=(4, 4), chunks=(4, 4), dtype="float32",
                          compressors=[OpenZLBytesCodec(sample_type="uint16", chunk_shape=[4, 4])])
    with pytest.raises(ValueError, match="chunk_shape"):
        zarr.create_array({}, shape=(8, 8), chunks=(4, 4), dtype="uint16",
                          compressors=[OpenZLBytesCodec(sample_type="uint16", chunk_shape=[2, 2])])


def test_decoding_needs_a_chunk_shape_configured_or_passed():
    codec = OpenZLCodec(sample_type="uint16")
    frame = codec.encode(np.arange(16, dtype="uint16").reshape(4, 4))
    with pytest.raises(ValueError, match="chunk shape is unknown"):
        codec.decode(frame)
    assert codec.config.decode(frame, (4, 4))[3, 3] == 15


def test_the_bytes_codec_takes_the_configuration_of_openzl_only():
    assert OpenZLBytesCodec(id="openzl", **GRID) == OpenZLBytesCodec(**GRID)
    with pytest.raises(ValueError, match="takes the configuration of codec id .openzl., got id .zstd."):
        OpenZLBytesCodec(id="zstd", level=3)
