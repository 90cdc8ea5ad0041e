"""The rumi engine: values of every sample encoding, both frame units, every way to open.

Each file is opened with the blob as bytes, with the blob file beside it, and
with no blob (the IFD), from a local path and over HTTP from a Range server
started here; values must be byte-for-byte what was written, both through the
lazy (non-Dask) path and through ``chunks={}`` (one Dask chunk per frame).
"""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
import xarray as xr
from backend_samples import SAMPLE_NAMES, same_values, sample_values
from servers import RangeServer

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.dataset.engine import RumiBackendEntrypoint
from xarray_rumi.format.dtypes import sample_type_from_name

SHAPE = (3, 37, 45)  # 3 x 3 grid positions of 16 px with cut edges (5 rows, 13 columns)
TILE = 16
UNITS = ("tile", "cell")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Every sample type in both frame units: ``{(name, unit): (path, blob, values)}``."""
    root = tmp_path_factory.mktemp("samples")
    out = {}
    for seed, name in enumerate(SAMPLE_NAMES):
        values = sample_values(sample_type_from_name(name), SHAPE, seed)
        for unit in UNITS:
            path = root / f"{name}-{unit}.rumi"
            blob = xarray_rumi.write(path, values, tile_size=TILE, frame_unit=unit, sample_type=name)
            out[name, unit] = (path, blob, values)
    return root, out


@pytest.fixture(scope="module")
def server(written):
    root, _ = written
    with RangeServer(str(root)) as running:
        yield running


def _open(location: str, how: str, blob: bytes, **kwargs) -> xr.Dataset:
    header = {"blob": blob, "blob-file": f"{location}.header", "ifd": None}[how]
    return xr.open_dataset(location, engine="rumi", header=header, **kwargs)


@pytest.mark.parametrize("source", ["local", "http"])
@pytest.mark.parametrize("how", ["blob", "blob-file", "ifd"])
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_values_round_trip(written, server, name, unit, how, source):
    _, files = written
    path, blob, values = files[name, unit]
    location = str(path) if source == "local" else f"{server.url}/{path.name}"
    sample = sample_type_from_name(name)

    lazy = _open(location, how, blob)
    assert lazy.band_data.dims == ("band", "y", "x")
    assert same_values(lazy.band_data.values, values)
    encoding = lazy.band_data.encoding
    assert (encoding["sample_type"], encoding["frame_unit"], encoding["tile_size"]) == (name, unit, (TILE, TILE))
    assert encoding["header"] == blob

    chunked = _open(location, how, blob, chunks={})
    bands_per_chunk = SHAPE[0] if unit == "cell" else 1
    assert chunked.band_data.chunks == (
        (bands_per_chunk,) * (SHAPE[0] // bands_per_chunk), (16, 16, 5), (16, 16, 13)
    )
    assert same_values(chunked.band_data.data.compute(scheduler="threads"), values)
    assert chunked.band_data.dtype == sample.dtype


@pytest.mark.parametrize("unit", UNITS)
def test_outer_indexing_matches_numpy(written, unit):
    """Integer arrays, strides and scalars select exactly what numpy selects."""
    _, files = written
    path, blob, values = files["int16", unit]
    da = xr.open_dataset(path, engine="rumi", header=blob).band_data
    rows, cols = np.array([36, 0, 17, 17, 5]), np.array([44, 3, 20])
    assert same_values(da[:, rows, :].values, values[:, rows, :])
    assert same_values(da.isel(band=[2, 0], y=rows, x=cols).values, values[[2, 0]][:, rows][:, :, cols])
    assert same_values(da[::2, 3:30:7, ::-5].values, values[::2, 3:30:7, ::-5])
    assert same_values(da[1, 20, 44].values, values[1, 20, 44])
    assert same_values(da[-1, -2, -3].values, values[-1, -2, -3])
    assert same_values(da[-2:, -20:-3, 30].values, values[-2:, -20:-3, 30])
    assert same_values(da[:, 36:, 40:].values, values[:, 36:, 40:])
    assert da[:, 5:5, :].values.shape == (3, 0, 45)


def test_dataset_layout(written):
    _, files = written
    path, blob, _ = files["uint8", "tile"]
    ds = xr.open_dataset(path, engine="rumi", header=blob)
    assert list(ds.data_vars) == ["band_data"]
    assert ds.band.values.tolist() == [1, 2, 3] and ds.band.dtype == np.int64
    # No georeferencing: pixel centres in pixel units, no CRS, identity GeoTransform.
    assert ds.x.values.tolist() == [i + 0.5 for i in range(45)]
    assert ds.y.values.tolist() == [i + 0.5 for i in range(37)]
    assert ds.spatial_ref.attrs == {"GeoTransform": "0.0 1.0 0.0 0.0 0.0 1.0"}
    assert "AREA_OR_POINT" not in ds.band_data.attrs
    assert ds.band_data.encoding["grid_mapping"] == "spatial_ref"
    assert ds.band_data.encoding["preferred_chunks"] == {"band": 1, "y": 16, "x": 16}
    cell = xr.open_dataset(files["uint8", "cell"][0], engine="rumi")
    assert cell.band_data.encoding["preferred_chunks"] == {"band": 3, "y": 16, "x": 16}


def test_drop_variables(written):
    _, files = written
    ds = xr.open_dataset(files["uint8", "tile"][0], engine="rumi", drop_variables=["band_data"])
    assert "band_data" not in ds and "spatial_ref" in ds.coords


def test_engine_is_registered_and_guesses_rumi_files(written):
    assert isinstance(xr.backends.list_engines()["rumi"], RumiBackendEntrypoint)
    path, blob, values = written[1]["uint8", "tile"]
    assert same_values(xr.open_dataset(path, header=blob).band_data.values, values)  # no engine= needed
    entry = RumiBackendEntrypoint()
    assert entry.guess_can_open("scene.rumi") and entry.guess_can_open("https://host/a/B.RUMI?sig=1")
    assert not entry.guess_can_open("scene.tif") and not entry.guess_can_open(b"bytes")
    assert "header" in entry.open_dataset_parameters and entry.description and entry.url


def test_graph_is_one_small_picklable_task_per_frame(written):
    _, files = written
    path, blob, values = files["float32", "tile"]
    data = xr.open_dataset(path, engine="rumi", header=blob, chunks={}).band_data.data
    frames = 3 * 3 * 3
    assert data.npartitions == frames
    graph = dict(data.__dask_graph__())
    # One task per frame plus the (shared) lazily indexed array they all read from.
    assert len(graph) == frames + 1
    pickled = pickle.dumps(graph)
    assert len(pickled) < 20_000  # an address, the blob and slices: no frame data
    assert path.read_bytes()[-200:] not in pickled
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(data)).compute(scheduler="sync"), values)


def test_blob_of_another_file_is_refused_not_misread(written, tmp_path):
    """A blob whose frame sizes do not fit this file fails loudly at decode."""
    _, files = written
    path, _, values = files["uint16", "tile"]
    # Constant frames compress to far fewer bytes than this file's random ones.
    other = xarray_rumi.write(tmp_path / "o.rumi", np.zeros_like(values), tile_size=TILE)
    with pytest.raises(RumiFormatError, match="frame"):
        xr.open_dataset(path, engine="rumi", header=other).band_data.values


def test_bad_input_errors(written, tmp_path):
    _, files = written
    path, blob, _ = files["uint8", "tile"]
    with pytest.raises(RumiFormatError, match="blob.magic"):
        xr.open_dataset(path, engine="rumi", header=b"\0" * 28)
    with pytest.raises(FileNotFoundError):
        xr.open_dataset(tmp_path / "missing.rumi", engine="rumi")
    not_rumi = tmp_path / "x.rumi"
    not_rumi.write_bytes(b"II*\0" + b"\0" * 400)
    with pytest.raises(RumiFormatError):
        xr.open_dataset(not_rumi, engine="rumi")
    truncated = tmp_path / "t.rumi"
    truncated.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(RumiFormatError, match="frames.truncated"):  # refused at open: it checks the file's size
        xr.open_dataset(truncated, engine="rumi", header=blob)
    with pytest.raises(TypeError, match="path or an fsspec URL, not BytesIO"):
        xr.open_dataset(io.BytesIO(path.read_bytes()), engine="rumi")
    with pytest.raises(TypeError, match="header"):
        xr.open_dataset(path, engine="rumi", header=12)
    with pytest.raises(ValueError, match="transform"):
        xr.open_dataset(path, engine="rumi", header=blob, crs=4326)
    with pytest.raises(ValueError, match="raster_type"):
        xr.open_dataset(path, engine="rumi", header=blob, raster_type="point")
    with pytest.raises(ValueError, match="georeferencing=False"):
        xr.open_dataset(path, engine="rumi", header=blob, georeferencing=False, crs=4326, transform=(1, 0, 0, 0, -1, 0))


def test_dataset_writes_to_zarr(written, tmp_path):
    """The engine's extra encoding keys (header, tile_size, ...) do not get in the way of to_zarr."""
    pytest.importorskip("zarr")
    _, files = written
    path, blob, values = files["int32", "cell"]
    ds = xr.open_dataset(path, engine="rumi", header=blob, chunks={})
    ds.to_zarr(tmp_path / "copy.zarr", mode="w")
    back = xr.open_zarr(tmp_path / "copy.zarr")
    assert back.band_data.chunks == ds.band_data.chunks
    assert same_values(back.band_data.values, values)


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize(("shape", "tile"), [
    ((1, 1, 1), 16),        # one pixel, one frame
    ((5, 7, 9), 16),        # tile larger than the image; B >= 5 moves BitsPerSample out of line
    ((2, 64, 64), 32),      # square image, square tiles, no cut edges
    ((3, 33, 31), (8, 16)),  # non-square tiles, cut edges on both axes
])
def test_grid_shapes(tmp_path, shape, tile, unit):
    values = (np.arange(np.prod(shape)).reshape(shape) * 7919 % 4099).astype("uint32")
    blob = xarray_rumi.write(tmp_path / "g.rumi", values, tile_size=tile, frame_unit=unit)
    tile_length, tile_width = (tile, tile) if isinstance(tile, int) else tile
    for header in (blob, None):
        ds = xr.open_dataset(tmp_path / "g.rumi", engine="rumi", header=header, chunks={})
        bands = shape[0] if unit == "cell" else 1

        def cut(size, step):
            return tuple(min(step, size - start) for start in range(0, size, step))

        assert ds.band_data.chunks == (cut(shape[0], bands), cut(shape[1], tile_length), cut(shape[2], tile_width))
        assert same_values(ds.band_data.values, values)
        assert same_values(ds.band_data.isel(x=[shape[2] - 1, 0]).values, values[:, :, [shape[2] - 1, 0]])


def test_an_unknown_index_is_refused_before_the_file_is_opened(tmp_path):
    missing = str(tmp_path / "not-there.rumi")
    with pytest.raises(ValueError, match=r"index='pandas' is not one of None, 'default', 'raster'"):
        xr.open_dataset(missing, engine="rumi", index="pandas")
