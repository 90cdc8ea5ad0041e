"""The OpenZL codec: registration, ordinary Zarr arrays, edge placement, damage."""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest
import xarray as xr
import zarr

from xarray_rumi import RumiFormatError
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.frames.codec import FORMAT_VERSION
from xarray_rumi.virtual.codec import DEFAULT_RECIPE, OpenZLConfig, OpenZLCodec, OpenZLZarrCodec, zarr_dtype

DTYPES = ["uint8", "int16", "uint32", "int64", "float32", "float64", "bool", "complex64", "complex128"]


def values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if dtype.kind == "f":
        return rng.normal(0, 1e3, shape).astype(dtype)
    return rng.integers(0, 100, shape).astype(dtype)


def test_numcodecs_registry_resolves_openzl():
    codec = numcodecs.get_codec({"id": "openzl", "recipe": "delta_1d>zstd"})
    assert isinstance(codec, OpenZLCodec)
    config = codec.get_config()
    assert config == {"id": "openzl", "recipe": "delta_1d>zstd"}
    assert json.loads(json.dumps(config)) == config   # plain JSON
    assert numcodecs.get_codec(config).get_config() == config


def test_zarr_registry_resolves_openzl():
    assert zarr.registry.get_codec_class("openzl") is OpenZLZarrCodec
    codec = OpenZLZarrCodec.from_dict({"name": "openzl", "configuration": {"recipe": "id>zstd"}})
    assert codec.to_dict() == {"name": "openzl", "configuration": {"recipe": "id>zstd"}}
    assert OpenZLZarrCodec.from_dict({"name": "openzl"}) == OpenZLZarrCodec()


@pytest.mark.parametrize("dtype", DTYPES)
def test_zarr_v3_array_with_openzl_serializer_round_trips(dtype):
    data = values(dtype, (3, 37, 50))
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store, shape=data.shape, chunks=(1, 16, 16), dtype=dtype,
                              serializer={"name": "openzl"}, compressors=None)
    array[:] = data
    reopened = zarr.open_array(store)   # from the stored metadata, through the registry
    assert reopened.metadata.codecs[0].to_dict()["name"] == "openzl"
    np.testing.assert_array_equal(reopened[:], data)


@pytest.mark.parametrize("dtype", ["uint16", "float32", "complex64"])
def test_zarr_v2_array_with_openzl_compressor_round_trips(dtype):
    data = values(dtype, (40, 33))
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store, shape=data.shape, chunks=(16, 16), dtype=dtype, zarr_format=2,
                              compressors=OpenZLCodec(), filters=None)
    array[:] = data
    assert json.loads(store._store_dict[".zarray"].to_bytes())["compressor"] == {"id": "openzl", "recipe": DEFAULT_RECIPE}
    np.testing.assert_array_equal(zarr.open_array(store)[:], data)


def test_dataset_to_zarr_with_the_codec(tmp_path):
    data = values("uint16", (2, 30, 40))
    ds = xr.Dataset({"v": (("band", "y", "x"), data)})
    ds.to_zarr(tmp_path / "v3.zarr", zarr_format=3, consolidated=False,
               encoding={"v": {"serializer": OpenZLZarrCodec(recipe="planar>zigzag>zstd"), "compressors": None,
                               "chunks": (1, 16, 16)}})
    ds.to_zarr(tmp_path / "v2.zarr", zarr_format=2, consolidated=False,
               encoding={"v": {"compressors": [OpenZLCodec()], "chunks": (1, 16, 16)}})
    for name in ("v3.zarr", "v2.zarr"):
        back = xr.open_dataset(tmp_path / name, engine="zarr", consolidated=False)
        xr.testing.assert_identical(back.load(), ds)
    meta = json.loads((tmp_path / "v3.zarr" / "v" / "zarr.json").read_text())
    assert meta["codecs"] == [{"name": "openzl", "configuration": {"recipe": "planar>zigzag>zstd"}}]


def test_encoding_pins_the_format_version_and_honours_the_recipe():
    data = values("int16", (1, 64, 64))
    for recipe in ("id>zstd", "planar>zigzag>zstd", "med>zigzag>zstd"):
        frame = OpenZLConfig(recipe=recipe).encode(data)
        assert frame[0] == 0xC0 + FORMAT_VERSION
        np.testing.assert_array_equal(OpenZLConfig().decode(frame, data.shape, "int16"), data)  # GeoZL decoders
    smooth = np.add.outer(np.arange(64), np.arange(64)).astype(np.int16)[None]
    assert len(OpenZLConfig(recipe="planar>zigzag>zstd").encode(smooth)) < len(OpenZLConfig(recipe="id>zstd").encode(smooth))
    with pytest.raises(ValueError, match="recipe"):
        OpenZLConfig(recipe="zstd")


def test_decoding_is_bounded_by_the_chunk():
    frame = OpenZLConfig().encode(np.zeros((1, 64, 64), "uint8"))
    with pytest.raises(RumiFormatError, match="frame"):
        OpenZLConfig().decode(frame, (1, 32, 32), "uint8")   # 4x the chunk: refused, not expanded
    with pytest.raises(RumiFormatError, match="frame.length"):
        OpenZLConfig().decode(OpenZLConfig().encode(np.zeros((1, 8, 8), "uint8")), (1, 16, 16), "uint8")


def test_garbage_and_damaged_frames_raise():
    frame = bytearray(OpenZLConfig().encode(values("uint16", (1, 32, 32))))
    with pytest.raises(RumiFormatError, match="frame.openzl"):
        OpenZLConfig().decode(b"not a frame at all", (1, 32, 32), "uint16")
    frame[len(frame) // 2] ^= 0xFF
    with pytest.raises(RumiFormatError, match="frame"):
        OpenZLConfig().decode(bytes(frame), (1, 32, 32), "uint16")


def edge_codec(**kwargs):
    # A 1000 x 1000 image in 256 px tiles: edges are 232 px, and (256, 232) and
    # (232, 256) frames hold the same number of samples.
    return OpenZLConfig(sample_type="uint16", chunk_shape=(1, 256, 256), image_shape=(1000, 1000), **kwargs)


def test_interior_frame_is_just_reshaped():
    tile = values("uint16", (1, 256, 256))
    np.testing.assert_array_equal(edge_codec().decode(OpenZLConfig().encode(tile)), tile)


@pytest.mark.parametrize(("shape", "edge"), [((1, 232, 232), None), ((1, 256, 232), "right"), ((1, 232, 256), "bottom")])
def test_edge_frames_are_placed_top_left(shape, edge):
    frame_values = values("uint16", shape) + 1   # no zeros, so padding is visible
    frame = OpenZLConfig().encode(frame_values)
    leading = b"\0" if edge == "right" else b""   # a right-edge reference starts one byte before its frame
    chunk = edge_codec().decode(leading + frame)
    assert chunk.shape == (1, 256, 256)
    h, w = shape[1:]
    np.testing.assert_array_equal(chunk[:, :h, :w], frame_values)
    assert not chunk[:, h:, :].any() and not chunk[:, :, w:].any()


@pytest.mark.parametrize(("shift", "edge"), [(0, "bottom"), (1, "right"), (2, "bottom"), (3, "right")])
def test_the_reference_says_which_edge_it_is(shift, edge):
    """No table: where the frame magic begins (1 or 3 bytes in: a right edge) settles the ambiguity."""
    shape = (1, 256, 232) if edge == "right" else (1, 232, 256)
    frame_values = values("uint16", shape) + 1
    frame = OpenZLConfig().encode(frame_values)
    chunk = edge_codec().decode(b"\xd8\xa5\xb1"[:shift] + frame)   # leading bytes that look like a magic's start
    h, w = shape[1:]
    np.testing.assert_array_equal(chunk[:, :h, :w], frame_values)
    assert not chunk[:, h:, :].any() and not chunk[:, :, w:].any()


def test_a_chunk_with_no_frame_magic_near_its_start_is_refused():
    frame = OpenZLConfig().encode(values("uint16", (1, 256, 232)))
    with pytest.raises(RumiFormatError, match="frame.openzl"):
        edge_codec().decode(b"\0\0\0\0" + frame)


def test_a_configuration_is_the_grids_alone(tmp_path):
    """Two files on one grid, different data: one codec configuration, so their virtual arrays concatenate."""
    import xarray_rumi
    from xarray_rumi.virtual.kerchunk import references

    configs = []
    for n in range(2):
        data = np.random.default_rng(n).integers(0, 2**16, (2, 1000, 1000)).astype("uint16")
        path = str(tmp_path / f"{n}.rumi")
        xarray_rumi.write(path, data, tile_size=256, compression="portable")
        configs.append(json.loads(references(path)["refs"]["band_data/.zarray"])["compressor"])
    assert configs[0] == configs[1] == {"id": "openzl", "recipe": DEFAULT_RECIPE, "sample_type": "uint16",
                                        "chunk_shape": [1, 256, 256], "image_shape": [1000, 1000]}


def test_a_frame_no_grid_position_holds_raises():
    frame = OpenZLConfig().encode(values("uint16", (1, 100, 100)))
    with pytest.raises(RumiFormatError, match="frame.length"):
        edge_codec().decode(frame)


def test_complex_integer_frames_decode_to_complex():
    codec = OpenZLConfig(sample_type="cint16", chunk_shape=(1, 2, 2))
    data = np.array([[[1 + 2j, -3 - 4j], [5, -6j]]], np.complex64)
    frame = codec.encode(data)
    assert len(np.frombuffer(__import__("geozl").decompress(frame), np.int16)) == 8   # int16 pairs on disk
    out = codec.decode(frame)
    assert out.dtype == np.complex64
    np.testing.assert_array_equal(out, data)


def test_ml_dtypes_types_read_widened_and_exact():
    assert zarr_dtype(sample_type_from_name("uint4")) == np.uint8
    assert zarr_dtype(sample_type_from_name("float8_e8m0fnu")) == np.float32
    codec = OpenZLConfig(sample_type="bfloat16", chunk_shape=(1, 3))
    data = np.array([[1.5, -2.0, 2.0**100]], np.float32)
    frame = codec.encode(data)
    assert len(__import__("geozl").decompress(frame)) == 6   # stored as bfloat16
    np.testing.assert_array_equal(codec.decode(frame), data)
    with pytest.raises(ValueError, match="exactly"):
        codec.encode(np.array([[1.0001, 0, 0]], np.float32))


def test_numcodecs_decode_with_and_without_sample_type():
    data = values("int16", (8, 8))
    plain = OpenZLCodec()
    raw = plain.decode(plain.encode(data))
    np.testing.assert_array_equal(np.frombuffer(raw, np.int16).reshape(8, 8), data)
    out = np.empty((8, 8), np.int16)
    plain.decode(plain.encode(data), out=out)
    np.testing.assert_array_equal(out, data)
    with pytest.raises(RumiFormatError):
        plain.decode(plain.encode(data), out=np.empty(10, np.int16))   # bounded by ``out``
    typed = OpenZLCodec(sample_type="int16", chunk_shape=[1, 8, 8], image_shape=[8, 8])
    np.testing.assert_array_equal(np.frombuffer(typed.decode(typed.encode(data[None])), np.int16).reshape(8, 8), data)


def test_configuration_is_validated():
    with pytest.raises(ValueError, match="unknown sample type"):
        OpenZLConfig(sample_type="uint3")
    with pytest.raises(ValueError, match="image_shape"):
        OpenZLConfig(image_shape=(10, 10))
    with pytest.raises(ValueError, match="complex64"):
        zarr.create_array({}, shape=(4,), dtype="uint8", serializer=OpenZLZarrCodec(sample_type="cint16"))
    with pytest.raises(ValueError, match="chunk_shape"):
        zarr.create_array({}, shape=(8, 8), chunks=(4, 4), dtype="uint8", serializer=OpenZLZarrCodec(chunk_shape=(2, 2)))
    # a stack of images adds a leading length-1 axis: the same frames
    zarr.create_array({}, shape=(2, 1, 8, 8), chunks=(1, 1, 4, 4), dtype="uint8", serializer=OpenZLZarrCodec(chunk_shape=(1, 4, 4)))


@pytest.mark.parametrize("codec", ["openzl", "numcodecs.openzl"])
def test_zarr_v3_codecs_decode_synchronously_where_zarr_asks(codec, monkeypatch):
    """zarr >= 3.4 runs codecs with ``_decode_sync``/``_encode_sync`` without an event loop (its fused pipeline)."""
    import zarr.abc.codec
    import zarr.core.codec_pipeline

    from xarray_rumi.virtual.codec import OpenZLBytesCodec

    if not hasattr(zarr.core.codec_pipeline, "FusedCodecPipeline"):
        pytest.skip(f"zarr {zarr.__version__} has no fused pipeline to run synchronous codecs (3.4 brought it)")
    supports_sync = zarr.abc.codec.SupportsSyncCodec
    config = dict(sample_type="uint16", chunk_shape=(1, 4, 4), image_shape=(6, 6))
    if codec == "openzl":
        kwargs = {"serializer": OpenZLZarrCodec(**config)}
    else:
        kwargs = {"serializer": zarr.codecs.BytesCodec(), "compressors": [OpenZLBytesCodec(**config)]}
    data = np.arange(36, dtype=np.uint16).reshape(1, 6, 6)
    array = zarr.create_array({}, shape=data.shape, chunks=(1, 4, 4), dtype="uint16", **kwargs)
    array[:] = data
    assert all(isinstance(c, supports_sync) for c in array.metadata.codecs)

    async def not_on_the_event_loop(self, chunk, spec):
        raise AssertionError("the fused pipeline decoded through the async method")

    for cls in (OpenZLZarrCodec, OpenZLBytesCodec):
        monkeypatch.setattr(cls, "_decode_single", not_on_the_event_loop)
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}):
        fused = zarr.open_array(array.store, mode="r")
        assert type(fused.async_array.codec_pipeline).__name__ == "FusedCodecPipeline"
        np.testing.assert_array_equal(fused[:], data)   # the right and bottom edges and the corner included


@pytest.mark.parametrize(("written", "read", "chunk"), [("uint16", "uint8", (1, 64, 32)), ("uint16", "uint32", (1, 16, 32)),
                                                        ("float32", "uint16", (1, 64, 32)), ("uint8", "int16", (1, 16, 32))])
def test_a_frame_of_another_element_width_is_refused(written, read, chunk):
    """The byte count fits the chunk, but the frame records other element widths: never reinterpreted."""
    frame = OpenZLConfig().encode(values(written, (1, 32, 32)))
    widths = f"{np.dtype(written).itemsize}-byte elements.*{read} is stored as {np.dtype(read).itemsize}-byte"
    for decode in (lambda: OpenZLConfig(sample_type=read, chunk_shape=chunk).decode(frame),
                   lambda: OpenZLConfig().decode(frame, chunk, read),   # the zarr v3 serializer: the array's dtype
                   lambda: OpenZLCodec(sample_type=read, chunk_shape=list(chunk)).decode(frame)):
        with pytest.raises(RumiFormatError, match=f"frame.width: the frame holds {widths}"):
            decode()


def test_a_zarr_v3_array_of_another_width_refuses_the_chunk():
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store, shape=(32, 32), chunks=(32, 32), dtype="uint16", serializer=OpenZLZarrCodec(),
                              compressors=None)
    array[:] = values("uint16", (32, 32))
    wider = zarr.create_array(zarr.storage.MemoryStore(), shape=(16, 32), chunks=(16, 32), dtype="uint32",
                              serializer=OpenZLZarrCodec(), compressors=None)
    wider.store._store_dict["c/0/0"] = store._store_dict["c/0/0"]   # a uint16 chunk under uint32 metadata
    with pytest.raises(RumiFormatError, match="frame.width"):
        wider[:]
