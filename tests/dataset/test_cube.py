"""Cubes: chunks of whole frames through the stack, one task each; misalignment is named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi import open_cube

CRS, TRANSFORM = 32618, (10.0, 0.0, 600000.0, 0.0, -10.0, 5000000.0)
SHAPE, TILE = (2, 45, 70), 32


def _scene(i):
    y, x = np.mgrid[0:SHAPE[1], 0:SHAPE[2]]
    return np.stack([y + x + i, (y * x) % 97 + 10 * i]).astype("int16")


@pytest.fixture
def scenes(tmp_path):
    """Three aligned images (cell frames), their blobs and values."""
    paths = [tmp_path / f"s{i}.rumi" for i in range(3)]
    blobs = [xarray_rumi.write(p, _scene(i), tile_size=TILE, frame_unit="cell", crs=CRS, transform=TRANSFORM)
             for i, p in enumerate(paths)]
    return paths, blobs, np.stack([_scene(i) for i in range(3)])


FRAME_CHUNKS = ((2,), (32, 13), (32, 32, 6))  # cell frames: all bands, cut edges


def test_open_cube_stacks_with_frame_chunks(scenes):
    paths, blobs, values = scenes
    for headers in (None, blobs, "sidecar"):
        cube = open_cube(paths, headers, chunks={})
        assert cube.band_data.dims == ("time", "band", "y", "x")
        assert cube.band_data.chunks == ((1, 1, 1), *FRAME_CHUNKS)
        np.testing.assert_array_equal(cube.band_data.values, values)
    assert cube.rio.crs.to_epsg() == CRS and tuple(cube.rio.transform())[:6] == TRANSFORM
    assert cube.band_data.encoding["headers"] == blobs
    assert cube.band_data.encoding["sources"] == [str(p) for p in paths]
    assert "header" not in cube.band_data.encoding  # one blob per image, not the first one's


def test_an_empty_selection_through_the_stack_reads_no_image(scenes):
    paths, blobs, values = scenes
    lazy = open_cube(paths, blobs).band_data   # no Dask: xarray hands the empty range to the backend array
    assert lazy[0:0].values.shape == (0, *SHAPE)   # a window
    assert lazy[0:0, :, [1, 3]].values.shape == (0, 2, 2, SHAPE[2])   # points
    np.testing.assert_array_equal(lazy[1:2, :, [1, 3]].values, values[1:2, :, [1, 3]])


def test_open_cube_dimension_coordinate(scenes):
    paths, blobs, values = scenes
    times = pd.Index(pd.to_datetime(["2024-01-01", "2024-02-01", "2024-03-01"]), name="time")
    cube = open_cube(paths, blobs, dim=times)
    assert cube.time.values.tolist() == times.values.tolist()
    np.testing.assert_array_equal(cube.band_data.sel(time="2024-02-01").values, values[1])
    assert cube.band_data.mean(("band", "y", "x")).compute().shape == (3,)


@pytest.mark.parametrize("dim", [
    "time",
    pd.Index([10, 20, 30], name="step"),
    pd.Index([10, 20, 30]),  # unnamed: xr.concat calls it "concat_dim"
    xr.DataArray([1.5, 2.5, 3.5], dims="depth", attrs={"units": "m"}),
], ids=["name", "index", "unnamed index", "dataarray"])
def test_open_cube_is_what_xr_concat_of_the_opened_images_gives(scenes, dim):
    paths, blobs, _ = scenes
    datasets = [xr.open_dataset(p, engine="rumi", header=b, chunks={}) for p, b in zip(paths, blobs)]
    expected = xr.concat(datasets, dim=dim, data_vars="all", coords="minimal", compat="override",
                         join="override", combine_attrs="override")
    cube = open_cube(paths, blobs, dim=dim, chunks={})
    xr.testing.assert_identical(cube, expected)
    assert cube.band_data.chunks == expected.band_data.chunks
    assert list(cube.xindexes) == list(expected.xindexes)


def test_open_cube_takes_sizes_by_dimension(scenes):
    paths, blobs, values = scenes
    cube = open_cube(paths, blobs, chunks={"x": 64, "y": 64})
    assert cube.band_data.chunks == ((1, 1, 1), (2,), (45,), (64, 6))
    np.testing.assert_array_equal(cube.band_data.values, values)


@pytest.mark.parametrize("chunks", ["auto", {"time": 2, "y": 32, "x": 64}, {"time": -1, "x": 32}])
def test_a_chunk_spanning_images_is_one_task_and_opening_reopens_nothing(scenes, monkeypatch, chunks):
    """One read per chunk, however many images it spans; the images are not opened again through xr.open_dataset."""
    from xarray_rumi.dataset.engine import RumiCubeArray

    paths, blobs, values = scenes
    monkeypatch.setattr(xr, "open_dataset", lambda *a, **k: pytest.fail("open_cube reopened an image"))
    cube = open_cube(paths, blobs, chunks=chunks)
    assert max(cube.band_data.chunks[0]) > 1  # several images a chunk
    reads = []
    read = RumiCubeArray.__getitem__
    monkeypatch.setattr(RumiCubeArray, "__getitem__", lambda self, key: reads.append(key) or read(self, key))
    np.testing.assert_array_equal(cube.band_data.compute(scheduler="sync").values, values)
    assert len(reads) == cube.band_data.data.npartitions


def test_frames_of_a_chunk_decode_together_on_the_idle_cores(scenes, monkeypatch):
    """A chunk over three images is one share_work: its 3 x 6 frames are spread over the threads."""
    import xarray_rumi.reading.image as reader

    paths, blobs, values = scenes
    calls = []
    share = reader.share_work
    monkeypatch.setattr(reader, "share_work", lambda *a, **k: calls.append(k.get("at_most")) or share(*a, **k))
    cube = open_cube(paths, blobs, chunks={"time": 3, "y": 64, "x": 96})
    np.testing.assert_array_equal(cube.band_data.values, values)
    assert calls == [3 * 2 * 3]  # one chunk, 3 images x (2 x 3 cell frames)


def test_a_cube_chunk_that_cuts_frames_warns_and_reads_right(scenes):
    paths, blobs, values = scenes
    with pytest.warns(UserWarning, match="separate the stored chunks along dimension 'x'"):
        cube = open_cube(paths, blobs, chunks={"time": 2, "x": 40})
    np.testing.assert_array_equal(cube.band_data.values, values)
    np.testing.assert_array_equal(cube.band_data[:, 1, 3:9, 30:50].values, values[:, 1, 3:9, 30:50])


def test_a_cube_indexes_like_numpy(scenes):
    paths, blobs, values = scenes
    cube = open_cube(paths, blobs, chunks="auto").band_data
    np.testing.assert_array_equal(cube.isel(time=[2, 0], x=[5, 1, 69]).values, values[[2, 0]][..., [5, 1, 69]])
    np.testing.assert_array_equal(cube.isel(time=1, band=0, y=slice(40, 2)).values, values[1, 0, 40:2])
    np.testing.assert_array_equal(cube[:, :, 44, ::7].values, values[:, :, 44, ::7])
    mean = cube.mean("time").values
    np.testing.assert_allclose(mean, values.mean(axis=0))


def test_xr_concat_and_open_mfdataset_keep_frame_chunks(scenes):
    paths, blobs, values = scenes
    datasets = [xr.open_dataset(p, engine="rumi", header=b, chunks={}) for p, b in zip(paths, blobs)]
    stacked = xr.concat(datasets, dim="time", data_vars="all", coords="minimal", compat="override", join="override")
    assert stacked.band_data.chunks == ((1, 1, 1), *FRAME_CHUNKS)
    np.testing.assert_array_equal(stacked.band_data.values, values)
    for parallel in (False, True):  # parallel: each open is a Dask task of its own
        mf = xr.open_mfdataset(paths, engine="rumi", combine="nested", concat_dim="time", chunks={},
                               data_vars="all", coords="minimal", compat="override", join="override",
                               parallel=parallel)
        assert mf.band_data.chunks == ((1, 1, 1), *FRAME_CHUNKS)
        np.testing.assert_array_equal(mf.band_data.values, values)


def _variant(tmp_path, **changes):
    kwargs = dict(tile_size=TILE, frame_unit="cell", crs=CRS, transform=TRANSFORM)
    values = changes.pop("values", _scene(9))
    kwargs.update(changes)
    path = tmp_path / "odd.rumi"
    xarray_rumi.write(path, values, **kwargs)
    return path


@pytest.mark.parametrize(("changes", "named"), [
    ({"values": _scene(9)[:, :40]}, "shape (2, 40, 70)"),
    ({"transform": (10.0, 0.0, 600010.0, 0.0, -10.0, 5000000.0)}, "has transform"),
    ({"raster_type": "point"}, "has transform"),
    ({"crs": 32619}, "crs EPSG:32619"),
    ({"crs": None, "transform": None}, "transform none"),
    ({"tile_size": 16}, "tile size (16, 16)"),
    ({"frame_unit": "tile"}, "frame unit tile"),
    ({"values": _scene(9).astype("int32")}, "sample type int32"),
])
def test_misaligned_images_name_the_first_mismatch(scenes, tmp_path, changes, named):
    paths, _, _ = scenes
    odd = _variant(tmp_path, **changes)
    with pytest.raises(ValueError, match="cannot stack into a Cube") as caught:
        open_cube([paths[0], paths[1], odd])
    message = str(caught.value)
    assert named in message and "image 2" in message and str(odd) in message


def test_open_cube_argument_errors(scenes):
    paths, blobs, _ = scenes
    with pytest.raises(ValueError, match="a Cube needs at least one image"):
        open_cube([])
    with pytest.raises(ValueError, match="3 paths but 2 headers"):
        open_cube(paths, blobs[:2])
    with pytest.raises(TypeError, match="one header per path"):
        open_cube(paths, blobs[0])


def test_a_cube_is_lazy_without_dask_by_default_and_reads_only_what_is_selected(scenes, monkeypatch):
    """chunks=None, as xr.open_dataset: a window reads once, decoding only the frames it touches, and equals numpy's."""
    import xarray_rumi.reading.image as reader

    paths, blobs, values = scenes
    cube = open_cube(paths, blobs)
    assert cube.band_data.chunks is None and not cube.band_data.variable._in_memory
    xr.testing.assert_identical(cube.coords.to_dataset(), open_cube(paths, blobs, chunks={}).coords.to_dataset())
    decoded = []
    decode = reader.decode_frame
    monkeypatch.setattr(reader, "decode_frame", lambda payload, *a, **k: decoded.append(a) or decode(payload, *a, **k))
    window = cube.band_data[2, :, 35:45, 30:40]
    assert not decoded  # selecting is lazy
    np.testing.assert_array_equal(window.values, values[2, :, 35:45, 30:40])
    assert len(decoded) == 2  # the two cell frames of the one image the window touches
    np.testing.assert_array_equal(cube.band_data.isel(time=[2, 0], x=[5, 1, 69]).values, values[[2, 0]][..., [5, 1, 69]])
    np.testing.assert_array_equal(cube.band_data[:, 1, 44, ::7].values, values[:, 1, 44, ::7])
    np.testing.assert_array_equal(cube.band_data[1:, :, 10:40, 20:60].values, values[1:, :, 10:40, 20:60])


def test_a_lazy_cube_pickles_for_worker_processes(scenes):
    import pickle

    paths, blobs, values = scenes
    cube = pickle.loads(pickle.dumps(open_cube(paths, blobs)))
    np.testing.assert_array_equal(cube.band_data[0, :, :5, :5].values, values[0, :, :5, :5])


def test_chunks_false_is_no_idiom(scenes):
    paths, blobs, _ = scenes
    with pytest.raises(TypeError, match=r"chunks must be None \(no Dask\), .*not bool"):
        open_cube(paths, blobs, chunks=False)


@pytest.mark.parametrize("as_given", [str, lambda p: p])
def test_one_path_where_a_list_belongs_is_refused_saying_so(scenes, tmp_path, monkeypatch, as_given):
    # A string is a sequence: each character was taken for a path ('s', '0', ...), which failed
    # as IsADirectoryError or FileNotFoundError: 'c', naming nothing the user wrote.
    paths, blobs, _ = scenes
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match=r"open_cube takes a list of paths or URLs, got one: .*s0\.rumi"):
        open_cube(as_given(paths[0]), [blobs[0]])
    assert open_cube([as_given(paths[0])], [blobs[0]]).sizes["time"] == 1
