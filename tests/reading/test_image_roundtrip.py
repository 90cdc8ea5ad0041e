"""write() then read(): every sample encoding, both frame units, every kind of shape.

Each case also checks that ``validate`` accepts the file, with and without its
blob, and that ``header_from_file`` rebuilds exactly the blob ``write`` returned.
"""

from __future__ import annotations

import numpy as np
import pytest
from _rumi_bytes import make, ramp, representable

import xarray_rumi
from xarray_rumi.format.dtypes import SAMPLE_TYPES, sample_type_from_name


def check_round_trip(path, blob, expected: np.ndarray, dtype) -> None:
    xarray_rumi.validate(path)
    xarray_rumi.validate(path, blob)
    assert xarray_rumi.header_from_file(path) == blob
    data = path.read_bytes()
    header = xarray_rumi.open_image(path, blob, georeferencing=False).header
    assert {data[o] for o in header.offsets().tolist()} == {0xC0 + 24}  # every frame at the pinned version
    for header in (blob, None):
        image = xarray_rumi.open_image(path, header)
        back = image.read()
        assert back.dtype == np.dtype(dtype)
        assert back.shape == expected.shape
        assert back.tobytes() == np.asarray(expected, dtype).tobytes()  # bit-exact, NaN payloads included


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("shape, tile", [((3, 37, 21), (16, 8)), ((1, 1, 1), 16)], ids=["rect", "pixel"])
@pytest.mark.parametrize("t", SAMPLE_TYPES.values(), ids=lambda t: t.name)
def test_every_sample_encoding(tmp_path, t, shape, tile, unit):
    values = representable(t, shape, np.random.default_rng(t.sample_format * 131 + t.bits_per_sample))
    path, blob, _ = make(tmp_path, values, tile_size=tile, frame_unit=unit, sample_type=t.name)
    assert blob[20:22] == bytes([t.bits_per_sample, t.sample_format])
    check_round_trip(path, blob, values, t.dtype)


SHAPES = {
    "one-pixel": ((1, 1, 1), 16),
    "smaller-than-a-tile": ((2, 5, 7), 16),
    "exact-multiple": ((2, 32, 48), 16),
    "not-a-multiple": ((2, 33, 49), 16),
    "rectangular-tiles": ((3, 40, 50), (8, 32)),
    "tall-tiles": ((1, 50, 40), (32, 8)),
    "square-edges-alike": ((2, 20, 20), 16),      # right edge (16, 4) and bottom edge (4, 16): same size
    "odd-tiles-not-16": ((2, 23, 19), (5, 3)),
    "one-row": ((1, 1, 300), 64),
    "one-column": ((1, 300, 1), 64),
    "tile-of-one": ((2, 3, 4), 1),
    **{f"{b}-bands": ((b, 20, 30), 16) for b in range(1, 9)},
}


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("dtype", ["uint16", "float32"])
@pytest.mark.parametrize("name", SHAPES)
def test_every_shape(tmp_path, name, dtype, unit):
    shape, tile = SHAPES[name]
    values = ramp(shape, dtype)
    path, blob, data = make(tmp_path, values, tile_size=tile, frame_unit=unit)
    check_round_trip(path, blob, values, dtype)
    grid = xarray_rumi.open_image(path, blob).grid
    # Each frame holds exactly its cut window: check it against the array, frame by frame.
    image = xarray_rumi.open_image(path, blob)
    for k in range(grid.frame_count):
        window = grid.frame_window(k)
        assert np.array_equal(image.read(*window), values[window])


def test_auto_compression_round_trips(tmp_path):
    y, x = np.mgrid[0:70, 0:90]
    smooth = np.stack([(1000 + 3 * y + 2 * x + b * 7) for b in range(3)]).astype(np.uint16)
    for unit in ("tile", "cell"):
        path, blob, _ = make(tmp_path, smooth, name=f"{unit}.rumi", tile_size=32, frame_unit=unit,
                             compression="auto")
        check_round_trip(path, blob, smooth, np.uint16)


@pytest.mark.parametrize("name, values, dtype", [
    ("uint4", np.array([[0, 15, 7]], np.uint16), "uint4"),
    ("uint2", np.array([[0, 3, 1]], np.int64), "uint2"),
    ("int2", np.array([[-2, 1, 0]], np.int64), "int2"),
    ("int4", np.array([[-8, 7, 0]], np.int32), "int4"),
    ("bool", np.array([[0, 1, 1]], np.uint8), "bool"),
    ("uint8", np.array([[0, 255, 9]], np.uint64), "uint8"),
    ("int16", np.array([[-32768, 32767, 0]], np.int64), "int16"),
    ("float16", np.array([[0.5, -2.0, 1024.0]], np.float64), "float16"),
    ("bfloat16", np.array([[0.5, -2.0, 256.0]], np.float32), "bfloat16"),
    ("cint16", np.array([[1 + 2j, -3 - 4j, 32767j]], np.complex128), "complex64"),
    ("cint32", np.array([[2**31 - 1 + 0j, -(2**31) * 1j, 5]], np.complex128), "complex128"),
    ("cfloat16", np.array([[0.5 + 0.25j, -2j, 1]], np.complex64), "complex64"),
])
def test_narrower_storage_when_values_fit(tmp_path, name, values, dtype):
    path, blob, _ = make(tmp_path, values, tile_size=2, sample_type=name)
    t = sample_type_from_name(name)
    assert blob[20:22] == bytes([t.bits_per_sample, t.sample_format])
    back = xarray_rumi.open_image(path, blob).read()
    assert back.dtype == np.dtype(t.dtype) == np.dtype(dtype if dtype != "bool" else np.bool_)
    assert back[0].astype(values.dtype).tolist() == values.tolist()


@pytest.mark.parametrize("name, values", [
    ("uint4", np.array([[0, 16]], np.uint16)),
    ("int2", np.array([[2]], np.int64)),
    ("bool", np.array([[2]], np.uint8)),
    ("uint8", np.array([[-1]], np.int16)),
    ("float16", np.array([[0.1]], np.float64)),
    ("cint16", np.array([[0.5 + 0j]], np.complex64)),
    ("cint16", np.array([[40000 + 0j]], np.complex128)),
    ("cfloat16", np.array([[1e-9 + 0j]], np.complex128)),
])
def test_narrower_storage_refused_when_values_do_not_fit(tmp_path, name, values):
    with pytest.raises(ValueError, match="do not fit"):
        xarray_rumi.write(tmp_path / "x.rumi", values, sample_type=name, compression="portable")
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_dataarray_keeps_its_on_disk_type(tmp_path):
    xr = pytest.importorskip("xarray")
    values = np.array([[[1 + 2j, 3 - 4j], [5, 6j]]], np.complex64)
    array = xr.DataArray(values, dims=("band", "y", "x"))
    array.encoding["sample_type"] = "cint16"
    path, blob, _ = make(tmp_path, array, tile_size=2)
    assert blob[20:22] == bytes([32, 5])
    assert xarray_rumi.open_image(path, blob).read().tolist() == values.tolist()


def test_georeferenced_round_trip(tmp_path):
    values = ramp((2, 30, 40))
    transform = (10.0, 0.5, 399960.0, -0.25, -10.0, 5000040.0)
    path, blob, _ = make(tmp_path, values, tile_size=16, crs="EPSG:32633", transform=transform,
                         raster_type="point")
    for header in (blob, None):
        georef = xarray_rumi.open_image(path, header).georeferencing
        assert (georef.epsg, georef.model_type.name, georef.raster_type.name) == (32633, "PROJECTED", "POINT")
        assert georef.transform == transform
    assert not xarray_rumi.open_image(path, blob, georeferencing=False).georeferencing.is_defined


def test_zero_pixel_images_are_refused(tmp_path):
    for shape in ((0, 4, 4), (1, 0, 4), (1, 4, 0)):
        with pytest.raises(ValueError):
            xarray_rumi.write(tmp_path / "empty.rumi", np.zeros(shape, np.uint8), compression="portable")
    assert not (tmp_path / "empty.rumi").exists()


def test_b1_written_as_cell_or_tile_is_one_file_with_one_blob(tmp_path):
    values = ramp((1, 40, 40))
    _, tile_blob, tile_bytes = make(tmp_path, values, name="t.rumi", tile_size=16, frame_unit="tile")
    _, cell_blob, cell_bytes = make(tmp_path, values, name="c.rumi", tile_size=16, frame_unit="cell")
    assert tile_bytes == cell_bytes
    assert tile_blob == cell_blob and tile_blob[22] == 0  # recorded as tile: see docs/format.md


def test_a_value_that_does_not_fit_midway_leaves_nothing_behind(tmp_path):
    values = np.zeros((3, 64, 64), np.uint16)
    values[1, 40, 40] = 99  # only one frame in the middle holds it
    keep = tmp_path / "keep.rumi"
    keep.write_bytes(b"old")
    for target in (tmp_path / "new.rumi", keep):
        with pytest.raises(ValueError, match="do not fit"):
            xarray_rumi.write(target, values, tile_size=8, sample_type="uint4", compression="portable")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.rumi"] and keep.read_bytes() == b"old"
