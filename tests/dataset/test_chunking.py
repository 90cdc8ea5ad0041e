"""Chunks in whole frames, one task a chunk, and graphs whose size does not grow with the blobs."""

from __future__ import annotations

import pickle
import warnings

import dask
import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi.dataset.chunking import cube_auto_chunks, dask_array, frame_chunks
from xarray_rumi.dataset.engine import RumiCubeArray
from xarray_rumi.datamodel.variable import cube_layout, image_layout


@pytest.fixture
def open_images(write_images):
    """``open_images(count, shape=(2, 100, 70), tile=32, directory=None)``: opened images without georeferencing."""

    def opened(count, shape=(2, 100, 70), tile=32, directory=None):
        paths = write_images(range(count), shape, directory=directory, tile_size=tile, crs=None, transform=None)
        return [xarray_rumi.open_image(path, georeferencing=False) for path in paths]

    return opened


def test_frame_chunks_by_dimension(open_images):
    layout = image_layout(open_images(1)[0])
    assert frame_chunks(layout, {}) == ((1, 1), (32, 32, 32, 4), (32, 32, 6))
    assert frame_chunks(layout, {"x": 64}) == ((1, 1), (32, 32, 32, 4), (64, 6))  # left out: one frame
    assert frame_chunks(layout, {"band": -1, "y": None, "x": 32}) == ((2,), (32, 32, 32, 4), (32, 32, 6))
    assert frame_chunks(layout, 64) == ((2,), (64, 36), (64, 6))  # an int: every dimension


def test_chunks_that_are_not_chunks_are_refused_naming_what_is_taken(open_images):
    layout = image_layout(open_images(1)[0])
    with pytest.raises(ValueError, match=r"dimensions the array does not have: \['time'\]"):
        frame_chunks(layout, {"time": 1})
    with pytest.raises(ValueError, match="None \\(no Dask\\), \\{\\}, 'auto', an int or a dict .*'whole'"):
        frame_chunks(layout, "whole")
    for not_chunks in (False, True, None, [64]):  # chunks=False was never published: no other meaning
        with pytest.raises(TypeError, match=f"an int or a dict of sizes by dimension, not {type(not_chunks).__name__}"):
            frame_chunks(layout, not_chunks)


@pytest.mark.parametrize("chunks", [
    {}, "auto", 128, -1, {"x": 128}, {"band": -1, "y": None, "x": 32}, {"y": "auto"}, {"y": 100, "x": 0},
], ids=repr)
def test_chunks_mean_for_an_image_what_xr_open_dataset_makes_of_them(tmp_path, chunks):
    path = tmp_path / "big.rumi"
    blob = xarray_rumi.write(path, np.zeros((3, 700, 900), "uint16"), tile_size=64)
    image = xarray_rumi.open_image(path, header=blob)
    with dask.config.set({"array.chunk-size": "1MiB"}), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sizes that cut frames: the warning has a test of its own
        ours = frame_chunks(image_layout(image), chunks)
        theirs = xr.open_dataset(path, engine="rumi", header=blob, chunks=chunks).band_data.chunks
    assert ours == theirs
    assert ours != frame_chunks(image_layout(image), {}) or chunks == {}  # each case asks for chunks of its own


def test_sizes_that_cut_frames_warn_as_xarray_does(open_images):
    layout = image_layout(open_images(1)[0])
    with pytest.warns(UserWarning, match="separate the stored chunks along dimension 'x' starting at index 48"):
        frame_chunks(layout, {"x": 48})


@pytest.mark.parametrize("chunk_size", ["64KiB", "300KiB", "1MiB", "128MiB"])
def test_cube_auto_is_columns_of_whole_frames_through_the_stack(open_images, chunk_size):
    images = open_images(5, shape=(2, 300, 260), tile=64)
    layout = cube_layout(images, "time")
    frame_bytes = 64 * 64 * 2
    with dask.config.set({"array.chunk-size": chunk_size}):
        chunks = cube_auto_chunks(layout)
        limit = dask.utils.parse_bytes(chunk_size)
    for sizes, frame, extent in zip(chunks[1:], layout.chunks[1:], layout.shape[1:]):
        assert all(s % frame == 0 for s in sizes[:-1]) and sum(sizes) == extent
    depth = min(5, max(1, limit // frame_bytes))
    assert chunks[0][0] == depth  # as many images deep as fit
    if depth < 5:
        assert chunks[1:] == layout_frames(layout)  # one frame wide, not wider
    largest = chunks[0][0] * max(chunks[1]) * max(chunks[2]) * max(chunks[3]) * 2
    assert largest <= max(limit, frame_bytes)


def layout_frames(layout):
    return frame_chunks(layout, {})[1:]


def test_open_cube_auto_takes_those_chunks(open_images):
    images = open_images(4, shape=(1, 128, 128), tile=64)
    paths = [i.source.url for i in images]
    blobs = [i.header.to_bytes() for i in images]
    with dask.config.set({"array.chunk-size": "16KiB"}):  # two frames: two images deep
        cube = xarray_rumi.open_cube(paths, blobs, chunks="auto", georeferencing=False)
    assert cube.band_data.chunks == ((2, 2), (1,), (64, 64), (64, 64))


def test_dask_names_say_what_is_read(open_images):
    images = open_images(2)
    layout = cube_layout(images, "time")
    array = RumiCubeArray(images)
    same = dask_array(array, layout, {}, verify=True).name
    assert dask_array(RumiCubeArray(images), layout, {}, verify=True).name == same  # stable: the same keys
    assert dask_array(array, layout, "auto", verify=True).name != same  # other chunks, other keys
    assert dask_array(array, layout, {}, verify=False).name != same  # unverified never stands in


def _chunk_task_bytes(data) -> int:
    """The pickled size of one chunk-reading task; the backend array is one value of the graph, apart."""
    graph = data.__dask_graph__()
    (original,) = [name for name in graph.layers if name.startswith("original-")]
    (value,) = dict(graph.layers[original]).values()
    assert isinstance(value, RumiCubeArray)
    task = dict(graph.layers[data.name])[(data.name,) + (0,) * data.ndim]
    return len(pickle.dumps(task))


def test_tasks_refer_to_the_images_and_do_not_carry_their_blobs(tmp_path, open_images):
    sizes = []
    for count in (2, 40):
        (tmp_path / str(count)).mkdir()
        images = open_images(count, directory=tmp_path / str(count))
        cube = xarray_rumi.open_cube([i.source.url for i in images], [i.header.to_bytes() for i in images],
                                     georeferencing=False, chunks={"time": -1})
        sizes.append(_chunk_task_bytes(cube.band_data.data))
    # A task names its chunk and the array's key: 20 times more images, the same task.
    assert sizes[0] == sizes[1] < 400


def test_the_graph_is_not_materialised_while_it_is_built(tmp_path, monkeypatch):
    """A Cube of many frames builds its graph (and a reduction on it) without a task per chunk."""
    path = tmp_path / "one.rumi"
    blob = xarray_rumi.write(path, np.zeros((1, 64, 64), "uint8"), tile_size=16)
    # 300 images of 16 x 16 frames, 4,800 chunks, from one file: opening reads nothing.
    cube = xarray_rumi.open_cube([path] * 300, [blob] * 300, georeferencing=False, chunks={})
    layer = cube.band_data.data.__dask_graph__().layers[cube.band_data.data.name]
    assert not layer.is_materialized()
    mean = cube.band_data.mean("time")
    assert not layer.is_materialized()
    np.testing.assert_array_equal(mean.values, np.zeros((1, 64, 64)))
