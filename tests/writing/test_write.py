"""The writer: inputs it takes, compression modes, Dask, atomicity."""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import openzl.ext
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi.frames.recipes import FALLBACK, Recipes
from xarray_rumi.frames.codec import FORMAT_VERSION, PORTABLE_RECIPES
from xarray_rumi.reading.open import open_image


def _smooth(shape, dtype="uint16", seed=0):
    rng = np.random.default_rng(seed)
    bands, rows, cols = shape
    y, x = np.mgrid[0:rows, 0:cols]
    base = 1000 + 300 * np.sin(x / 17.0) * np.cos(y / 13.0)
    return np.stack([base + 40 * b + rng.normal(0, 3, base.shape) for b in range(bands)]).astype(dtype)


def _frames(path):
    image = open_image(path)
    starts, stops = image.header.ranges(np.arange(image.grid.frame_count))
    return image.source.read_many(starts, stops)


def test_two_dimensional_input_is_one_band(tmp_path):
    data = _smooth((1, 40, 30))[0]
    xarray_rumi.write(tmp_path / "a.rumi", data, tile_size=16)
    assert np.array_equal(open_image(tmp_path / "a.rumi").read(), data[None])


def test_portable_frames_decode_with_plain_openzl(tmp_path):
    data = _smooth((2, 70, 50))
    xarray_rumi.write(tmp_path / "p.rumi", data, tile_size=32, compression="portable")
    bare = openzl.ext.DCtx()  # no GeoZL decoders registered
    for frame in _frames(tmp_path / "p.rumi"):
        assert frame[0] == 0xC0 + FORMAT_VERSION
        decoded = bare.decompress(frame)
        assert sum(out.content_size for out in decoded) > 0
    assert np.array_equal(open_image(tmp_path / "p.rumi").read(), data)


def test_auto_is_lossless_pinned_and_no_larger_than_portable(tmp_path):
    data = _smooth((3, 300, 260))
    xarray_rumi.write(tmp_path / "auto.rumi", data, tile_size=128, compression="auto")
    xarray_rumi.write(tmp_path / "portable.rumi", data, tile_size=128, compression="portable")
    assert np.array_equal(open_image(tmp_path / "auto.rumi").read(), data)
    assert {f[0] for f in _frames(tmp_path / "auto.rumi")} == {0xC0 + FORMAT_VERSION}
    assert os.path.getsize(tmp_path / "auto.rumi") <= os.path.getsize(tmp_path / "portable.rumi")


def test_recipes_fall_back_when_no_candidate_applies():
    stored = np.arange(64, dtype=np.uint8).reshape(1, 8, 8)
    frame = Recipes("id>transpose>zstd").encode(stored)  # transpose needs 2..8-byte elements
    assert frame == Recipes(FALLBACK).encode(stored)


def test_explicit_recipe_is_used_for_every_frame(tmp_path):
    data = _smooth((1, 64, 64))
    xarray_rumi.write(tmp_path / "r.rumi", data, tile_size=32, compression="planar>zigzag>zstd")
    assert np.array_equal(open_image(tmp_path / "r.rumi").read(), data)
    with pytest.raises(ValueError, match="compression must be"):
        xarray_rumi.write(tmp_path / "bad.rumi", data, compression="best")
    assert not (tmp_path / "bad.rumi").exists()


def test_portable_recipes_are_plain_openzl():
    assert all(r.split(">")[0] in ("id", "delta_1d") for r in PORTABLE_RECIPES)


def test_dask_input_writes_the_same_bytes_as_numpy(tmp_path):
    data = _smooth((3, 333, 277))
    blob_np = xarray_rumi.write(tmp_path / "np.rumi", data, tile_size=64)
    lazy = da.from_array(data, chunks=(2, 100, 150))  # chunks that do not match frames
    blob_dask = xarray_rumi.write(tmp_path / "dask.rumi", lazy, tile_size=64)
    assert blob_np == blob_dask
    assert (tmp_path / "np.rumi").read_bytes() == (tmp_path / "dask.rumi").read_bytes()
    cell = xarray_rumi.write(tmp_path / "cell.rumi", lazy, tile_size=64, frame_unit="cell")
    assert np.array_equal(open_image(tmp_path / "cell.rumi", cell).read(), data)


def test_dataarray_georeferencing_and_accessor_round_trip(tmp_path):
    pytest.importorskip("rioxarray")
    data = _smooth((2, 50, 40))
    array = xr.DataArray(data, dims=("band", "y", "x"),
                         coords={"band": [1, 2], "y": 5000 - 10 * (np.arange(50) + 0.5),
                                 "x": 300 + 10 * (np.arange(40) + 0.5)})
    array = array.rio.write_crs("EPSG:32633")
    blob = array.rumi.to_rumi(tmp_path / "a.rumi", tile_size=16)
    image = open_image(tmp_path / "a.rumi", blob)
    assert image.georeferencing.epsg == 32633
    assert image.georeferencing.transform == (10.0, 0.0, 300.0, 0.0, -10.0, 5000.0)
    back = xr.open_dataset(tmp_path / "a.rumi", engine="rumi").band_data
    # the accessor takes tile size, frame unit and sample type from what it read
    back.rumi.to_rumi(tmp_path / "b.rumi")
    assert open_image(tmp_path / "b.rumi").grid == image.grid
    assert (tmp_path / "b.rumi").read_bytes() == (tmp_path / "a.rumi").read_bytes()


def test_point_rasters_store_pixel_centres(tmp_path):
    pytest.importorskip("rioxarray")
    array = xr.DataArray(np.zeros((1, 4, 4), "uint8"), dims=("band", "y", "x"),
                         coords={"y": [35.0, 25.0, 15.0, 5.0], "x": [5.0, 15.0, 25.0, 35.0]}).rio.write_crs(4326)
    xarray_rumi.write(tmp_path / "p.rumi", array, tile_size=4, raster_type="point")
    georef = open_image(tmp_path / "p.rumi").georeferencing
    # the matrix maps pixel index (0, 0) to the centre of the first pixel
    assert georef.transform == (10.0, 0.0, 5.0, 0.0, -10.0, 35.0)
    assert georef.raster_type.name == "POINT"


def test_cint16_round_trip_keeps_the_on_disk_type(tmp_path):
    values = (np.arange(-50, 50).reshape(10, 10) + 1j * np.arange(100).reshape(10, 10)).astype(np.complex64)
    blob = xarray_rumi.write(tmp_path / "c.rumi", values, tile_size=8, sample_type="cint16")
    image = open_image(tmp_path / "c.rumi", blob)
    assert image.sample_type.name == "cint16"
    assert np.array_equal(image.read()[0], values)
    with pytest.raises(ValueError, match="fit"):
        xarray_rumi.write(tmp_path / "d.rumi", values + 0.5, sample_type="cint16")
    assert not (tmp_path / "d.rumi").exists()


def test_progress_is_called_once_per_frame(tmp_path):
    calls = []
    xarray_rumi.write(tmp_path / "a.rumi", np.zeros((2, 40, 40), "uint8"), tile_size=16, progress=calls.append)
    assert calls == [1] * (2 * 3 * 3)


def test_header_file_is_written_unless_asked_not_to(tmp_path):
    blob = xarray_rumi.write(tmp_path / "a.rumi", np.zeros((8, 8), "uint8"))
    assert (tmp_path / "a.rumi.header").read_bytes() == blob
    xarray_rumi.write(tmp_path / "b.rumi", np.zeros((8, 8), "uint8"), write_header=False)
    assert not (tmp_path / "b.rumi.header").exists()


@pytest.mark.parametrize("bad, message", [
    (dict(crs="EPSG:4326"), "needs a transform"),
    (dict(transform=(2, 0, 0, 0, -2, 0)), "without a CRS"),
    (dict(crs="+proj=aea +lat_1=29.5 +lat_2=45.5 +lat_0=23 +lon_0=-96", transform=(1, 0, 0, 0, -1, 0)), "EPSG"),
    (dict(tile_size=0), "tile_size"),
    (dict(frame_unit="band"), "frame_unit"),
    (dict(raster_type="pixel"), "raster_type"),
    (dict(sample_type="uint4"), "fit"),
])
def test_impossible_requests_fail_clearly_and_leave_nothing(tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        xarray_rumi.write(tmp_path / "x.rumi", np.full((8, 8), 200, "uint8"), **bad)
    assert os.listdir(tmp_path) == []


def test_failure_mid_write_leaves_no_file_and_no_temporary(tmp_path):
    def exploding(block):
        raise RuntimeError("storage went away")

    # five frames down; the writer samples frames 0, 2 and 4, so frame 3 fails mid-write
    lazy = da.zeros((1, 160, 32), dtype="uint8", chunks=(1, 32, 32)).map_blocks(
        lambda b, block_info=None: exploding(b) if block_info[0]["chunk-location"][1] == 3 else b, dtype="uint8")
    with pytest.raises(RuntimeError, match="storage went away"):
        xarray_rumi.write(tmp_path / "x.rumi", lazy, tile_size=32, compression="portable")
    assert os.listdir(tmp_path) == []


def test_write_to_an_fsspec_url(tmp_path):
    data = _smooth((1, 30, 30))
    blob = xarray_rumi.write(f"file://{tmp_path}/u.rumi", data, tile_size=16)
    xarray_rumi.validate(tmp_path / "u.rumi", blob)
    memory = xarray_rumi.write("memory://bucket/m.rumi", data, tile_size=16)
    import fsspec

    fs = fsspec.filesystem("memory")
    assert fs.cat_file("/bucket/m.rumi") == (tmp_path / "u.rumi").read_bytes()
    assert fs.cat_file("/bucket/m.rumi.header") == memory == blob


def test_lossy_only_when_asked_and_within_its_bound(tmp_path):
    data = np.random.default_rng(1).normal(100, 10, (2, 150, 130)).astype(np.float32)
    xarray_rumi.write(tmp_path / "exact.rumi", data, tile_size=64)
    xarray_rumi.write(tmp_path / "abs.rumi", data, tile_size=64, compression="lossy:0.01")
    xarray_rumi.write(tmp_path / "rel.rumi", data, tile_size=64, compression="lossy:1%")
    assert np.array_equal(open_image(tmp_path / "exact.rumi").read(), data)
    absolute = open_image(tmp_path / "abs.rumi").read()
    relative = open_image(tmp_path / "rel.rumi").read()
    assert 0 < np.abs(absolute - data).max() <= 0.01
    assert 0 < np.abs((relative - data) / data).max() <= 0.01
    sizes = [os.path.getsize(tmp_path / f"{n}.rumi") for n in ("exact", "abs", "rel")]
    assert sizes[0] > sizes[1] > sizes[2]
    for name in ("abs", "rel"):
        xarray_rumi.validate(tmp_path / f"{name}.rumi")  # the bound lives in the frames only


def test_lossy_integers_and_refusals(tmp_path):
    data = np.random.default_rng(2).integers(0, 5000, (1, 64, 64)).astype(np.uint16)
    xarray_rumi.write(tmp_path / "int.rumi", data, tile_size=32, compression="lossy:3")
    back = open_image(tmp_path / "int.rumi").read().astype(int)
    assert 0 < np.abs(back - data).max() <= 3
    with pytest.raises(ValueError, match="greater than zero"):
        xarray_rumi.write(tmp_path / "zero.rumi", data, compression="lossy:0")
    with pytest.raises(ValueError, match="plain integer or float"):
        xarray_rumi.write(tmp_path / "c.rumi", np.ones((4, 4), np.complex64), compression="lossy:0.1")
    with pytest.raises(ValueError, match="lossy:nonsense"):
        xarray_rumi.write(tmp_path / "n.rumi", data, compression="lossy:nonsense")
    assert sorted(os.listdir(tmp_path)) == ["int.rumi", "int.rumi.header"]


def test_a_point_raster_read_back_writes_the_same_file(tmp_path):
    pytest.importorskip("rioxarray")
    data = _smooth((1, 30, 20))
    xarray_rumi.write(tmp_path / "p.rumi", data, tile_size=16, frame_unit="cell", raster_type="point",
                      crs=32633, transform=(10, 0, 1005, 0, -10, 1995))
    array = xr.open_dataset(tmp_path / "p.rumi", engine="rumi").band_data
    xarray_rumi.write(tmp_path / "again.rumi", array)  # tile size, frame unit, raster type from what was read
    assert (tmp_path / "again.rumi").read_bytes() == (tmp_path / "p.rumi").read_bytes()
    # explicit arguments still win over the encoding
    xarray_rumi.write(tmp_path / "area.rumi", array, raster_type="area", tile_size=8)
    image = open_image(tmp_path / "area.rumi")
    assert image.georeferencing.raster_type.name == "AREA" and image.grid.tile_width == 8
    assert image.georeferencing.transform == (10, 0, 1000, 0, -10, 2000)  # corners, as PixelIsArea needs


def test_an_openzl_graph_can_be_passed_through(tmp_path):
    compressor = openzl.ext.Compressor()
    compressor.select_starting_graph(openzl.ext.graphs.Zstd()(compressor))
    data = _smooth((2, 70, 90))
    xarray_rumi.write(tmp_path / "np.rumi", data, tile_size=32, compression=compressor)
    assert np.array_equal(open_image(tmp_path / "np.rumi").read(), data)
    xarray_rumi.validate(tmp_path / "np.rumi")
    bare = openzl.ext.DCtx()
    assert all(bare.decompress(frame) for frame in _frames(tmp_path / "np.rumi"))
    # a serialised form crosses to Dask tasks; the bytes are the same
    xarray_rumi.write(tmp_path / "dask.rumi", da.from_array(data, chunks=(1, 40, 40)), tile_size=32,
                      compression=compressor)
    assert (tmp_path / "dask.rumi").read_bytes() == (tmp_path / "np.rumi").read_bytes()


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_dask_windows_write_the_same_bytes_on_any_local_scheduler(tmp_path, monkeypatch, scheduler):
    import dask

    from xarray_rumi.writing import encoded as encoded_frames

    monkeypatch.setattr(encoded_frames, "LOCAL_WINDOW_BYTES", 1)  # a window of 2 x workers frames: many windows
    data = _smooth((2, 150, 170))
    xarray_rumi.write(tmp_path / "np.rumi", data, tile_size=32)
    with dask.config.set(scheduler=scheduler):
        xarray_rumi.write(tmp_path / "dask.rumi", da.from_array(data, chunks=(1, 50, 60)), tile_size=32)
    assert (tmp_path / "dask.rumi").read_bytes() == (tmp_path / "np.rumi").read_bytes()


def test_a_failed_background_flush_fails_the_write_and_keeps_the_old_file(tmp_path, monkeypatch):
    from xarray_rumi.writing import staging

    monkeypatch.setattr(staging, "WRITEBACK_BYTES", 1)  # flush after every frame

    def failing(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    target = tmp_path / "scene.rumi"
    target.write_bytes(b"the previous version")
    with pytest.raises(OSError, match="Input/output error"):
        xarray_rumi.write(target, np.random.default_rng(0).integers(0, 999, (1, 300, 300), "uint16"), tile_size=32)
    assert target.read_bytes() == b"the previous version"
    assert sorted(os.listdir(tmp_path)) == ["scene.rumi"]


def test_replacing_a_file_leaves_open_readers_the_old_one(tmp_path):
    target = tmp_path / "scene.rumi"
    old = _smooth((1, 64, 64))
    xarray_rumi.write(target, old, tile_size=32)
    previous = target.read_bytes()
    with open(target, "rb") as reader:
        target.chmod(0)  # the writer need not be able to read what it replaces
        new = old + 1
        xarray_rumi.write(target, new, tile_size=32)
        assert reader.read() == previous
    assert np.array_equal(open_image(target).read(), new)
    assert sorted(os.listdir(tmp_path)) == ["scene.rumi", "scene.rumi.header"]
