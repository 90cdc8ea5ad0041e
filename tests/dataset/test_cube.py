"""Cubes: stacking grid-aligned images keeps one Dask chunk per frame; misalignment is named."""

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
        cube = open_cube(paths, headers)
        assert cube.band_data.dims == ("time", "band", "y", "x")
        assert cube.band_data.chunks == ((1, 1, 1), *FRAME_CHUNKS)
        np.testing.assert_array_equal(cube.band_data.values, values)
    assert cube.rio.crs.to_epsg() == CRS and tuple(cube.rio.transform())[:6] == TRANSFORM
    assert cube.band_data.encoding["headers"] == blobs
    assert cube.band_data.encoding["sources"] == [str(p) for p in paths]
    assert "header" not in cube.band_data.encoding  # one blob per image, not the first one's


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
    cube = open_cube(paths, blobs, dim=dim)
    xr.testing.assert_identical(cube, expected)
    assert cube.band_data.chunks == expected.band_data.chunks
    assert list(cube.xindexes) == list(expected.xindexes)


def test_open_cube_with_other_chunks_rechunks_each_image(scenes):
    paths, blobs, values = scenes
    cube = open_cube(paths, blobs, chunks={"x": 64, "y": 64})
    assert cube.band_data.chunks[2:] == ((45,), (64, 6))
    np.testing.assert_array_equal(cube.band_data.values, values)


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
    with pytest.raises(ValueError, match="at least one"):
        open_cube([])
    with pytest.raises(ValueError, match="3 paths but 2 headers"):
        open_cube(paths, blobs[:2])
    with pytest.raises(TypeError, match="one header per path"):
        open_cube(paths, blobs[0])
