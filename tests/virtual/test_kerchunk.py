"""Kerchunk references: every pixel exact through fsspec's reference file system."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.reading.open import load_header, open_image
from xarray_rumi.virtual.edges import ambiguous_edges, chunk_references
from xarray_rumi.virtual.kerchunk import cube_references, references

UTM = dict(crs=32633, transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 6000000.0))


def open_refs(refs, **options) -> xr.Dataset:
    return xr.open_dataset("reference://", engine="zarr",
                           backend_kwargs={"consolidated": False, "storage_options": {"fo": refs, **options}})


def rumi_engine_available() -> bool:
    return "rumi" in xr.backends.list_engines()


def sample_data(sample: str, shape, seed=0) -> np.ndarray:
    """Random values of a sample type, as the reader returns them."""
    rng = np.random.default_rng(seed)
    t = sample_type_from_name(sample)
    if sample == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if sample in ("cint16", "cfloat16", "complex64"):
        return (rng.integers(-300, 300, shape) + 1j * rng.integers(-300, 300, shape)).astype(np.complex64)
    if t.dtype.kind in "iu" and t.bits_per_sample >= 8:
        info = np.iinfo(t.dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True).astype(t.dtype)
    if t.sub_byte or t.sample_format >= 100:  # any byte pattern of a valid sample is a value
        raw = rng.integers(0, 1 << min(t.bits_per_sample, 8), shape, dtype=np.uint64).astype(t.storage)
        if sample == "float8_e8m0fnu":
            raw[raw == 255] = 127
        if sample == "bfloat16":
            raw = rng.normal(0, 100, shape).astype(np.float32).astype(t.dtype).view(np.uint16)
        return raw.view(t.dtype)
    return rng.normal(0, 100, shape).astype(t.dtype)


def write_and_reference(tmp_path, data, **write_kwargs):
    path = str(tmp_path / "image.rumi")
    blob = xarray_rumi.write(path, data, compression="portable", **write_kwargs)
    return path, blob, references(path, blob)


def assert_exact(tmp_path, path, blob, refs, data):
    ds = open_refs(refs)
    got = ds.band_data.values
    expected = open_image(path, blob).read()
    assert got.shape == expected.shape == data.shape
    # ml_dtypes types read as a wider exact type: compare values, and bits where they are floats
    np.testing.assert_array_equal(got, expected.astype(got.dtype))
    np.testing.assert_array_equal(got.astype(expected.dtype), data)
    if rumi_engine_available():
        rumi = xr.open_dataset(path, engine="rumi", header=blob)
        np.testing.assert_array_equal(got, rumi.band_data.values.astype(got.dtype))
        for name in ("band", "x", "y"):
            if name in rumi.coords:
                np.testing.assert_array_equal(ds[name].values, rumi[name].values)
        assert ds.spatial_ref.attrs == rumi.spatial_ref.attrs
    return ds


MATRIX = [
    # (bands, Y, X, tile, frame unit, sample type)
    (1, 1000, 1000, 256, "tile", "uint16"),         # square image, square tiles: ambiguous edges
    (3, 1000, 1000, 256, "cell", "uint8"),
    (1, 1, 1, 256, "tile", "float32"),               # one pixel
    (2, 3, 5, 256, "tile", "int16"),                 # smaller than a tile
    (2, 3, 5, 256, "cell", "int16"),
    (1, 300, 517, 128, "tile", "float64"),           # non-multiples
    (2, 200, 300, (64, 128), "tile", "uint16"),      # rectangular tiles
    (3, 9, 18, (4, 8), "tile", "int32"),             # rectangular and ambiguous: (4, 2) vs (1, 8)
    (2, 9, 18, (4, 8), "cell", "uint8"),
    (2, 70, 70, 32, "tile", "cint16"),               # ambiguous: (32, 6) vs (6, 32)
    (1, 70, 70, 32, "tile", "complex64"),
    (2, 70, 70, 32, "cell", "bool"),
    (1, 40, 50, 16, "tile", "uint4"),
    (1, 40, 50, 16, "tile", "int2"),
    (2, 40, 50, 16, "cell", "bfloat16"),
    (1, 40, 50, 16, "tile", "float8_e4m3fn"),
    (1, 40, 50, 16, "tile", "float4_e2m1fn"),
    (1, 40, 50, 16, "tile", "cfloat16"),
]


@pytest.mark.parametrize(("bands", "rows", "cols", "tile", "unit", "sample"), MATRIX)
def test_references_reproduce_every_pixel(tmp_path, bands, rows, cols, tile, unit, sample):
    data = sample_data(sample, (bands, rows, cols))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=tile, frame_unit=unit, sample_type=sample, **UTM)
    ds = assert_exact(tmp_path, path, blob, refs, data)
    header = load_header(blob)
    assert ds.band_data.dims == ("band", "y", "x")
    assert ds.band_data.encoding["chunks"] == (header.grid.bands_per_frame, header.grid.tile_length, header.grid.tile_width)
    assert ds.band_data.attrs["rumi_sample_type"] == sample
    frames = [k for k, v in refs["refs"].items() if k.startswith("band_data/") and isinstance(v, list)]
    assert len(frames) == header.frame_count


def test_ambiguous_edges_with_equal_compressed_lengths_are_exact(tmp_path):
    # Constant data: every right-edge (256, 232) and bottom-edge (232, 256)
    # frame compresses to the same length, so only moved references tell them apart.
    data = np.zeros((2, 1000, 1000), np.uint16)
    data[:, :, 744:] = 1   # right column of frames holds ones, bottom row zeros
    data[:, 768:, :] = 2   # ...and the bottom row twos: a wrong placement shows
    data[:, 768:, 744:] = 3
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=256, frame_unit="tile")
    header = load_header(blob)
    assert ambiguous_edges(header.grid)
    plan = chunk_references([header])
    assert plan.moved == 6   # 3 right-edge frames x 2 bands share a length with bottom-edge ones
    assert refs["refs"]["band_data/0.0.3"][1] == header.offset(6) - 1   # moved one byte early
    assert_exact(tmp_path, path, blob, refs, data)


def test_no_reference_is_as_long_as_a_raw_chunk():
    # A frame exactly as long as a chunk's bytes would pass for raw chunk data
    # in a reader that lost the codec (VirtualiZarr's Kerchunk writer drops
    # array-to-bytes codecs): such references are moved too.
    from xarray_rumi.format.blob import Header
    from xarray_rumi.format.grid import FrameGrid

    grid = FrameGrid(8, 8, 4, 4, 1)    # 4 frames of 16 uint8 samples, no ambiguity
    header = Header.from_byte_counts(grid, sample_type_from_name("uint8"), [16, 30, 16, 17])
    plan = chunk_references([header])
    assert plan.moved == 2   # each starts two bytes early, which the codec sees from where the frame magic is
    assert plan.lengths[0].tolist() == [18, 30, 18, 17]
    assert plan.starts[0].tolist() == [header.offset(0) - 2, header.offset(1), header.offset(2) - 2, header.offset(3)]
    assert all(n != 16 for n in np.concatenate(plan.lengths).tolist())
    # and a right-edge reference never lands on the chunk size either: 15 + 1 would, so it takes 3 bytes
    squeezed = Header.from_byte_counts(FrameGrid(6, 6, 4, 4, 1), sample_type_from_name("uint8"), [16, 15, 15, 9])
    plan = chunk_references([squeezed])   # right (4, 2) and bottom (2, 4) both 15 bytes
    assert plan.lengths[0].tolist() == [18, 18, 15, 9]
    assert plan.starts[0].tolist() == [squeezed.offset(0) - 2, squeezed.offset(1) - 3, squeezed.offset(2), squeezed.offset(3)]


def test_a_frame_as_long_as_a_raw_chunk_reads_exactly(tmp_path):
    # 16 x 16 random bytes with the first 46 zeroed compress ("id>zstd") to
    # exactly 256 bytes: the size of the raw chunk
    tile = np.random.default_rng(5).integers(0, 256, (1, 16, 16)).astype(np.uint8)
    tile.reshape(-1)[:46] = 0
    data = np.concatenate([tile, np.ones_like(tile)], axis=2)   # frames: that one, then a constant one
    path = str(tmp_path / "a.rumi")
    blob = xarray_rumi.write(path, data, tile_size=16, compression="id>zstd")
    header = load_header(blob)
    assert header.byte_count(0) == 256
    refs = references(path, blob)
    assert refs["refs"]["band_data/0.0.0"][1:] == [header.offset(0) - 2, 258]   # two bytes early: not a right edge
    assert_exact(tmp_path, path, blob, refs, data)


def test_references_read_no_frame_with_a_blob(tmp_path, monkeypatch):
    data = sample_data("uint16", (1, 100, 100))
    path = str(tmp_path / "a.rumi")
    blob = xarray_rumi.write(path, data, tile_size=32, **UTM)
    reads = []
    from xarray_rumi.io.source import ByteSource

    read, read_many = ByteSource.read, ByteSource.read_many
    monkeypatch.setattr(ByteSource, "read", lambda self, a, b, **kw: reads.append((a, b)) or read(self, a, b, **kw))
    monkeypatch.setattr(ByteSource, "read_many",
                        lambda self, starts, stops: reads.extend(zip(starts, stops)) or read_many(self, starts, stops))
    refs = references(path, blob)
    # the IFD head the blob is checked against, and the georeferencing tags, in one batched read
    assert [b - a for a, b in reads] == [252, 160]
    reads.clear()
    assert references(path, blob, verify=False) == refs and [b - a for a, b in reads] == [160]
    reads.clear()
    refs_given = references(path, blob, **UTM)
    assert reads == [] and refs_given == refs


@pytest.mark.parametrize(("shape", "tile"), [((2, 3, 5), 256), ((1, 70, 70), 32)])
def test_dataset_opened_from_references_copies_to_zarr(tmp_path, shape, tile):
    # xarray carries the codec (and its configuration) into the copy, whose
    # edge chunks zarr writes padded to full size: those must read back too
    data = sample_data("uint16", shape)
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=tile)
    open_refs(refs).to_zarr(tmp_path / "copy.zarr", zarr_format=2, consolidated=False)
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "copy.zarr", consolidated=False).band_data.values, data)


def test_references_without_blob_parse_the_ifd(tmp_path):
    data = sample_data("int16", (2, 50, 60))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=16)
    assert references(path) == refs


def test_coordinates_match_rioxarray(tmp_path):
    rioxarray = pytest.importorskip("rioxarray")
    data = sample_data("uint8", (2, 30, 40))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=16, **UTM)
    tif = tmp_path / "same.tif"
    da = xr.DataArray(data, dims=("band", "y", "x")).rio.write_crs(32633)
    da = da.rio.write_transform(__import__("affine").Affine(*UTM["transform"]))
    da.rio.to_raster(tif)
    expected = rioxarray.open_rasterio(tif)
    ds = open_refs(refs)
    for name in ("x", "y", "band"):
        np.testing.assert_array_equal(ds[name].values, expected[name].values)
    assert ds.band_data.rio.crs == expected.rio.crs
    assert ds.band_data.rio.transform() == expected.rio.transform()


@pytest.mark.parametrize("georef", [
    dict(crs=32633, transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 6000000.0), raster_type="point"),
    dict(crs=4326, transform=(0.001, 0.0002, 10.0, 0.0003, -0.001, 50.0)),   # rotated: 2-D xc / yc
], ids=["point", "rotated"])
def test_point_and_rotated_georeferencing(tmp_path, georef):
    data = sample_data("uint8", (1, 20, 30))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=16, **georef)
    ds = assert_exact(tmp_path, path, blob, refs, data)
    if "transform" in georef and georef["transform"][1]:
        assert set(ds.coords) == {"band", "xc", "yc", "spatial_ref"}
        assert ds.xc.dims == ("y", "x")
        if rumi_engine_available():
            rumi = xr.open_dataset(path, engine="rumi", header=blob)
            np.testing.assert_array_equal(ds.xc.values, rumi.xc.values)
            np.testing.assert_array_equal(ds.yc.values, rumi.yc.values)
    else:
        assert ds.band_data.attrs["AREA_OR_POINT"] == "Point"


def test_no_georeferencing_gives_pixel_coordinates(tmp_path):
    data = sample_data("uint8", (1, 4, 6))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=4)
    ds = open_refs(refs)
    assert ds.x.values.tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
    assert ds.spatial_ref.attrs == {"GeoTransform": "0.0 1.0 0.0 0.0 0.0 1.0"}
    assert "AREA_OR_POINT" not in ds.band_data.attrs


def test_damaged_frame_raises_never_wrong_values(tmp_path):
    data = sample_data("uint16", (1, 64, 64))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=32, **UTM)
    header = load_header(blob)
    with open(path, "r+b") as f:   # flip a byte inside frame 3's payload
        f.seek(header.offset(3) + header.byte_count(3) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    ds = open_refs(refs)
    np.testing.assert_array_equal(ds.band_data[:, :32, :32].values, data[:, :32, :32])  # other frames still read
    with pytest.raises(RumiFormatError, match="frame"):
        ds.band_data[:, 32:, 32:].values


def test_truncated_reference_raises(tmp_path):
    data = sample_data("uint16", (1, 64, 64))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=32)
    key = "band_data/0.0.1"
    refs["refs"][key] = [refs["refs"][key][0], refs["refs"][key][1], refs["refs"][key][2] - 5]
    with pytest.raises(RumiFormatError):
        open_refs(refs).band_data[:, :32, 32:].values


def test_http_references_read_only_the_frames_a_selection_touches(tmp_path, http_server):
    data = sample_data("uint16", (2, 200, 200))
    blob = xarray_rumi.write(str(tmp_path / "a.rumi"), data, tile_size=64, compression="portable", **UTM)
    url = f"{http_server.url}/a.rumi"
    refs = references(url, blob)
    http_server.requests.clear()
    # zarr drives the reference file system asynchronously, so the HTTP one must be too
    ds = open_refs(refs, remote_protocol="http", remote_options={"asynchronous": True})
    assert http_server.get_requests() == []   # opening reads nothing: coordinates are inline
    window = ds.band_data.isel(band=1, y=slice(70, 130), x=slice(0, 10)).values  # rows 1-2, column 0
    np.testing.assert_array_equal(window, data[1, 70:130, :10])
    header = load_header(blob)
    wanted = {(header.offset(k), header.offset(k) + header.byte_count(k)) for k in (9, 17)}
    assert {r.range for r in http_server.get_requests()} == wanted


def test_cube_stacks_aligned_images(tmp_path):
    images = [sample_data("int16", (2, 70, 70), seed=s) for s in range(3)]
    images[1][:] = 0   # equal lengths across files: the shared table still keeps every edge exact
    paths, blobs = [], []
    for n, image in enumerate(images):
        paths.append(str(tmp_path / f"t{n}.rumi"))
        blobs.append(xarray_rumi.write(paths[-1], image, tile_size=32, compression="portable", **UTM))
    refs = cube_references(paths, "time", blobs)
    ds = open_refs(refs)
    assert ds.band_data.dims == ("time", "band", "y", "x")
    np.testing.assert_array_equal(ds.band_data.values, np.stack(images))
    assert ds.band_data.attrs["rumi_sources"] == paths


def test_cube_refuses_images_on_different_grids(tmp_path):
    a, b = str(tmp_path / "a.rumi"), str(tmp_path / "b.rumi")
    xarray_rumi.write(a, np.zeros((1, 32, 32), "uint8"), tile_size=16, **UTM)
    xarray_rumi.write(b, np.zeros((1, 32, 32), "uint8"), tile_size=16, crs=32633,
                      transform=(10.0, 0.0, 500010.0, 0.0, -10.0, 6000000.0))
    with pytest.raises(ValueError, match="cannot stack into a Cube: image 1 .* has transform"):
        cube_references([a, b], "time")
    xarray_rumi.write(b, np.zeros((1, 32, 32), "uint8"), tile_size=8, **UTM)
    with pytest.raises(ValueError, match="cannot stack into a Cube: image 1 .* has tile size"):
        cube_references([a, b], "time")
    with pytest.raises(ValueError, match="a Cube needs at least one image"):
        cube_references([], "time")


@pytest.mark.parametrize(("name", "tile"), [("RGB.byte.tif", 256), ("small_dem_3m_merged.tif", 128),
                                          ("cint16.tif", 64), ("shade.tif", 100)])
def test_real_rasters(shared_data, tmp_path, name, tile):
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(shared_data / name) as src:
        data, crs, transform = src.read(), src.crs, tuple(src.transform)[:6]
    georef = dict(crs=crs.to_epsg(), transform=transform) if crs else {}
    sample = "cint16" if name == "cint16.tif" else None
    path = str(tmp_path / "real.rumi")
    blob = xarray_rumi.write(path, data, tile_size=tile, sample_type=sample, **georef)
    assert_exact(tmp_path, path, blob, references(path, blob), data)


def test_public_references_works_whatever_was_imported_first(tmp_path):
    import importlib

    importlib.import_module("xarray_rumi.virtual.kerchunk")   # importing the module must not shadow the function
    data = sample_data("uint8", (1, 8, 8))
    path, blob, refs = write_and_reference(tmp_path, data, tile_size=4)
    assert xarray_rumi.references(path, blob) == refs
    assert xarray_rumi.RumiParser.__name__ == "RumiParser"


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def grids(draw):
    if draw(st.booleans()):   # half the cases ambiguous: T = (a n, b n), edges (a m, b m), m < n
        a, b, n = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(2, 4))
        m = draw(st.integers(1, n - 1))
        tile_length, tile_width = a * n, b * n
        rows = tile_length * draw(st.integers(1, 3)) + a * m
        cols = tile_width * draw(st.integers(1, 3)) + b * m
    else:
        tile_length, tile_width = draw(st.integers(1, 12)), draw(st.integers(1, 12))
        rows, cols = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    return draw(st.integers(1, 3)), rows, cols, (tile_length, tile_width), draw(st.sampled_from(["tile", "cell"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(grid=grids(), constant=st.booleans(), seed=st.integers(0, 2**16))
def test_any_grid_any_data_is_exact(tmp_path_factory, grid, constant, seed):
    bands, rows, cols, tile, unit = grid
    rng = np.random.default_rng(seed)
    data = np.full((bands, rows, cols), 3, np.uint8) if constant else rng.integers(0, 256, (bands, rows, cols)).astype(np.uint8)
    path = str(tmp_path_factory.mktemp("any") / "a.rumi")
    blob = xarray_rumi.write(path, data, tile_size=tile, frame_unit=unit, compression="id>zstd", write_header=False)
    np.testing.assert_array_equal(open_refs(references(path, blob)).band_data.values, data)
