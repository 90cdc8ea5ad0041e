"""VirtualiZarr: RumiParser's ManifestStore, written to Kerchunk and to Icechunk, reopened exact."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

virtualizarr = pytest.importorskip("virtualizarr")
icechunk = pytest.importorskip("icechunk")
obstore = pytest.importorskip("obstore")

from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from virtualizarr.manifests import ManifestArray, ManifestStore  # noqa: E402

import xarray_rumi  # noqa: E402
from xarray_rumi import RumiParser  # noqa: E402
from xarray_rumi.reading.open import load_header, open_image  # noqa: E402
from xarray_rumi.virtual.edges import chunk_references  # noqa: E402
from xarray_rumi.virtual.kerchunk import references  # noqa: E402

UTM = dict(crs=32633, transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 6000000.0))


def registry() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": obstore.store.LocalStore()})


def open_virtual(path, **parser_kwargs) -> xr.Dataset:
    return virtualizarr.open_virtual_dataset(f"file://{path}", registry=registry(), parser=RumiParser(**parser_kwargs))


def reopen_kerchunk(vds) -> xr.Dataset:
    refs = vds.vz.to_kerchunk(format="dict")
    # VirtualiZarr writes the v3 fill value (0) into .zarray, which xarray reads
    # as _FillValue: turn masking off to see the stored values.
    return xr.open_dataset("reference://", engine="zarr", mask_and_scale=False,
                           backend_kwargs={"consolidated": False, "storage_options": {"fo": refs}})


#: What authorises local virtual chunks: an explicit sentinel since Icechunk 2 (None is deprecated there).
LOCAL_ACCESS = getattr(icechunk.credentials, "LocalFileSystemAccess", None)


def reopen_icechunk(vds, tmp_path) -> xr.Dataset:
    prefix = f"file://{tmp_path}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(tmp_path))))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")), config,
                                      authorize_virtual_chunk_access={prefix: LOCAL_ACCESS})
    session = repo.writable_session("main")
    vds.vz.to_icechunk(session.store)
    session.commit("virtual rumi")
    return xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3)


CASES = [
    # (bands, Y, X, tile, frame unit, sample type, constant data)
    (2, 1000, 1000, 256, "tile", "uint16", True),    # ambiguous edges with equal lengths: moved references
    (1, 1000, 1000, 256, "tile", "uint16", False),
    (3, 70, 70, 32, "cell", "uint8", False),
    (1, 1, 1, 256, "tile", "float32", False),
    (2, 9, 18, (4, 8), "tile", "cint16", False),
    (1, 40, 50, 16, "tile", "bfloat16", False),
    (2, 33, 20, 16, "cell", "bool", False),
]


def make(tmp_path, bands, rows, cols, tile, unit, sample, constant):
    rng = np.random.default_rng(1)
    shape = (bands, rows, cols)
    if constant:
        data = np.zeros(shape, np.uint16)
    elif sample == "cint16":
        data = (rng.integers(-99, 99, shape) + 1j * rng.integers(-99, 99, shape)).astype(np.complex64)
    elif sample == "bool":
        data = rng.integers(0, 2, shape).astype(bool)
    elif sample == "bfloat16":
        data = rng.normal(0, 10, shape).astype(np.float32).astype(__import__("ml_dtypes").bfloat16)
    else:
        data = rng.integers(0, 200, shape).astype(sample)
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(str(path), data, tile_size=tile, frame_unit=unit, sample_type=sample,
                             compression="portable", **UTM)
    return str(path), blob, data


def assert_same(ds, path, blob, data):
    expected = open_image(path, blob).read()
    got = ds.band_data.values
    np.testing.assert_array_equal(got, expected.astype(got.dtype))
    np.testing.assert_array_equal(got.astype(data.dtype), data)
    refs = xr.open_dataset("reference://", engine="zarr",
                           backend_kwargs={"consolidated": False, "storage_options": {"fo": references(path, blob)}})
    for name in ("band", "x", "y"):
        np.testing.assert_array_equal(ds[name].values, refs[name].values)
    assert int(ds.spatial_ref) == 0
    # VirtualiZarr's Kerchunk writer turns the v3 fill value into _FillValue (see reopen_kerchunk)
    assert {k: v for k, v in ds.spatial_ref.attrs.items() if k != "_FillValue"} == refs.spatial_ref.attrs
    assert "spatial_ref" in ds.coords
    if "rumi" in xr.backends.list_engines():
        rumi = xr.open_dataset(path, engine="rumi", header=blob)
        np.testing.assert_array_equal(got, rumi.band_data.values.astype(got.dtype))
        np.testing.assert_array_equal(ds.x.values, rumi.x.values)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-{c[4]}-{c[5]}{'-const' if c[6] else ''}")
@pytest.mark.parametrize("codec", [None, "openzl"], ids=["default", "array-to-bytes"])
def test_icechunk_round_trip_is_exact(tmp_path, case, codec):
    path, blob, data = make(tmp_path, *case)
    vds = open_virtual(path, header=blob, **({"codec": codec} if codec else {}))
    assert isinstance(vds.band_data.data, ManifestArray)
    names = [c.to_dict()["name"] for c in vds.band_data.data.metadata.codecs]
    assert names == (["openzl"] if codec else ["bytes", "numcodecs.openzl"])
    assert_same(reopen_icechunk(vds, tmp_path), path, blob, data)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-{c[4]}-{c[5]}{'-const' if c[6] else ''}")
def test_kerchunk_round_trip_with_the_default_parser_is_exact(tmp_path, case):
    """VirtualiZarr's own Kerchunk writer keeps the default codec: nothing to choose for it."""
    path, blob, data = make(tmp_path, *case)
    vds = open_virtual(path, header=blob)
    assert_same(reopen_kerchunk(vds), path, blob, data)


def test_moved_references_survive_both_writers(tmp_path):
    path, blob, data = make(tmp_path, *CASES[0])
    assert chunk_references([load_header(blob)]).moved == 6
    vds = open_virtual(path, header=blob)
    entry = vds.band_data.data.manifest.dict()["0.0.3"]   # a right-edge frame sharing a bottom-edge length
    assert entry["offset"] == load_header(blob).offset(6) - 1
    assert_same(reopen_icechunk(vds, tmp_path), path, blob, data)


def test_manifest_store_and_parser_without_blob(tmp_path):
    path, blob, data = make(tmp_path, 2, 50, 60, 16, "tile", "int16", False)
    store = RumiParser()(f"file://{path}", registry())   # no blob: the IFD, read through the registry
    assert isinstance(store, ManifestStore)
    with_blob = open_virtual(path, header=blob)
    without = open_virtual(path)
    assert without.band_data.data.manifest.dict() == with_blob.band_data.data.manifest.dict()
    xr.testing.assert_identical(without.drop_vars("band_data"), with_blob.drop_vars("band_data"))


def test_parser_reads_nothing_with_blob_and_georeferencing(tmp_path, monkeypatch):
    from xarray_rumi.io.registry import RegistrySource

    path, blob, data = make(tmp_path, 1, 40, 40, 16, "tile", "uint8", False)
    reads = []
    get = RegistrySource._get   # what goes to the object store
    monkeypatch.setattr(RegistrySource, "_get", lambda self, starts, stops: reads.extend(
        b - a for a, b in zip(starts, stops)) or get(self, starts, stops))
    open_virtual(path, header=blob)
    assert reads == [252, 160]   # the IFD head the blob is checked against, and the georeferencing
    reads.clear()
    open_virtual(path, header=blob, verify=False)
    assert reads == [160]
    reads.clear()
    vds = open_virtual(path, header=blob, **UTM)
    assert reads == []
    assert_same(reopen_icechunk(vds, tmp_path), path, blob, data)


def test_parser_refuses_an_unknown_codec_name():
    with pytest.raises(ValueError, match="codec"):
        RumiParser(codec="zstd")


def test_rotated_raster_with_loaded_2d_coordinates(tmp_path):
    data = np.arange(20 * 30, dtype=np.uint8).reshape(1, 20, 30)
    path = str(tmp_path / "rotated.rumi")
    blob = xarray_rumi.write(path, data, tile_size=16, crs=4326, transform=(0.001, 0.0002, 10.0, 0.0003, -0.001, 50.0))
    vds = virtualizarr.open_virtual_dataset(f"file://{path}", registry=registry(), parser=RumiParser(header=blob),
                                            loadable_variables=["band", "xc", "yc"])
    back = reopen_icechunk(vds, tmp_path)
    rumi = xr.open_dataset(path, engine="rumi", header=blob)
    np.testing.assert_array_equal(back.band_data.values, data)
    np.testing.assert_array_equal(back.xc.values, rumi.xc.values)
    assert set(back.coords) == {"band", "xc", "yc", "spatial_ref"}


def test_manifest_store_over_http_reads_only_touched_frames(tmp_path, http_server):
    from obstore.store import HTTPStore

    data = np.arange(2 * 100 * 100, dtype=np.uint16).reshape(2, 100, 100)
    blob = xarray_rumi.write(str(tmp_path / "a.rumi"), data, tile_size=32, compression="portable", **UTM)
    http = ObjectStoreRegistry({http_server.url: HTTPStore.from_url(http_server.url, client_options={"allow_http": True})})
    http_server.requests.clear()
    store = RumiParser(header=blob)(f"{http_server.url}/a.rumi", http)
    # the IFD head and the georeferencing, which the object store fetches in one request; no frame
    (request,) = http_server.get_requests()
    assert request.range[0] == 0 and request.range[1] <= load_header(blob).base_frame_offset
    http_server.requests.clear()
    ds = xr.open_zarr(store, consolidated=False, zarr_format=3)
    window = ds.band_data.isel(band=0, y=slice(40, 60), x=slice(70, 100)).values   # row 1, columns 2 and 3
    np.testing.assert_array_equal(window, data[0, 40:60, 70:100])
    plan = chunk_references([load_header(blob)])   # frame 14 is a right edge: its reference starts a byte early
    frames = {(int(plan.starts[0][k]), int(plan.starts[0][k] + plan.lengths[0][k])) for k in (12, 14)}
    assert {r.range for r in http_server.get_requests()} == frames


def test_damaged_frame_behind_icechunk_raises(tmp_path):
    from xarray_rumi import RumiFormatError

    path, blob, data = make(tmp_path, 1, 64, 64, 32, "tile", "uint16", False)
    back = reopen_icechunk(open_virtual(path, header=blob), tmp_path)
    header = load_header(blob)
    written = os.stat(path)
    with open(path, "r+b") as f:   # damage frame 2 (row 1, column 0) after the repository was written
        f.seek(header.offset(2) + header.byte_count(2) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x55]))
    # Silent damage (bit rot, a bad copy) leaves the modification time as it was. Icechunk refuses
    # every chunk of a file modified after the commit, so without this the test would depend on
    # whether the write above landed in a later clock tick than the commit.
    os.utime(path, ns=(written.st_atime_ns, written.st_mtime_ns))
    np.testing.assert_array_equal(back.band_data[:, :32, :].values, data[:, :32, :])
    with pytest.raises(RumiFormatError, match="frame"):
        back.band_data[:, 32:, :32].values


def test_concatenating_virtual_datasets(tmp_path):
    rng = np.random.default_rng(3)
    stacks = {}
    for width in (70, 60):   # 70 x 70 in 32 px tiles has ambiguous edges, 70 x 60 has none
        images = [np.zeros((1, 70, width), np.uint16), rng.integers(0, 100, (1, 70, width)).astype(np.uint16)]
        parts = []
        for n, image in enumerate(images):
            (tmp_path / f"w{width}").mkdir(exist_ok=True)
            path = tmp_path / f"w{width}" / f"{n}.rumi"
            blob = xarray_rumi.write(str(path), image, tile_size=32, compression="portable", **UTM)
            parts.append(open_virtual(path, header=blob))
        stacks[width] = (images, parts)
    for width, (images, parts) in stacks.items():
        # one codec configuration per grid, so VirtualiZarr concatenates them, ambiguous edges included
        cube = xr.concat(parts, dim="time", coords="minimal", compat="override")
        np.testing.assert_array_equal(reopen_icechunk(cube, tmp_path / f"w{width}").band_data.values,
                                      np.stack(images))
