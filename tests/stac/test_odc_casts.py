"""odc-stac's ``dtype=`` through the rumi driver: every cast is odc's GeoTIFF path's, pasted or warped, bit for bit.

odc's GeoTIFF reader leaves the cast to GDAL: pasted, ``rasterio``'s read
into an array of the output type (GDAL rounds half away from zero, clamps to
the type's range, makes NaN 0 and takes a complex value's real part); warped,
GDAL's warper writing into it.  Each test writes one rumi file whose bands
hold the same awkward values, and its GeoTIFF twin (the same values, in the
type GDAL holds them in), asks each band for another type, and compares.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

odc_stac = pytest.importorskip("odc.stac", reason="odc-stac is not installed (the odc extra)")
rasterio = pytest.importorskip("rasterio", reason="rasterio is not installed (odc-stac brings it)")
pytest.importorskip("pystac", reason="pystac is not installed (the stac extra)")

import ml_dtypes  # noqa: E402
from affine import Affine  # noqa: E402

import xarray_rumi  # noqa: E402
import xarray_rumi.stac  # noqa: E402

#: Every type GDAL reads into, so every type odc's GeoTIFF path can load as.
GDAL_TYPES = ("uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64")
INTEGER_EDGES = [-2**63, -2**31 - 1, -2**31, -40000, -32769, -32768, -300, -129, -128, -1, 0, 1, 127, 128, 255, 256,
                 32767, 32768, 40000, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**60 + 2**36 + 1,
                 2**63 - 1, 2**63 + 2**39 + 1, 2**64 - 1]
FLOAT_EDGES = [1.6, -5.0, 300.7, 1e6, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 254.5, 255.49, -128.5, 127.5, 8388609.0,
               -8388609.0, 2147483520.0, 3e9, -3e9, 1e20, -1e20, float("nan"), float("inf"), float("-inf"), 0.0]
DOUBLE_EDGES = [*FLOAT_EDGES, 0.49999999999999994, 4503599627370497.0, 9223372036854774784.0, 2.0**63, 2.0**64,
                1e39, -1e39, 3.4028235677973366e38, 1e-46]
#: (the values of a source type; the type its GeoTIFF twin holds them in, where GDAL has no such type)
SOURCES = {
    "uint8": ([0, 1, 127, 128, 255], None),
    "int8": ([-128, -1, 0, 1, 127], None),
    "uint16": ([256, 32768, 40000, 65535, 0, 127, 128, 255], None),
    "int16": ([-32768, -300, -129, -128, -1, 0, 127, 128, 255, 256, 32767], None),
    "int32": ([v for v in INTEGER_EDGES if -2**31 <= v < 2**31], None),
    "uint32": ([v for v in INTEGER_EDGES if 0 <= v < 2**32], None),
    "int64": ([v for v in INTEGER_EDGES if -2**63 <= v < 2**63], None),
    "uint64": ([v for v in INTEGER_EDGES if 0 <= v], None),
    "float32": (FLOAT_EDGES, None),
    "float64": (DOUBLE_EDGES, None),
    "complex64": ([1.6 + 2j, -5 - 1j, 300.7, 1e6 - 3j, complex("nan+1j"), -0.5, 2.5 + 0.5j, 0j], None),
    "bool": ([False, True], "uint8"),
    "uint4": ([0, 1, 7, 15], "uint8"),
    "int4": ([-8, -1, 0, 7], "int8"),
    "float16": ([1.5, -5.0, 300.75, 65504.0, 2.5, -2.5, float("nan"), float("inf"), float("-inf"), 0.5], "float32"),
    "bfloat16": ([1.59375, -5.0, 300.0, 1e6, 2.5, -0.5, float("nan"), float("inf"), 3.3e38], "float32"),
}
#: A source nodata for each source type, one of its values: odc makes it the output's nodata with
#: ``dtype.type(value)``, which refuses an integer out of the output type's range (for GeoTIFFs as for rumi), so
#: they are ones every type holds (floats ones GDAL rounds: the cast pixel is then no longer nodata).
NODATA = {"uint8": 0, "int8": 0, "uint16": 127, "int16": 0, "int32": 127, "uint32": 1, "int64": 0, "uint64": 1,
          "float32": 2.5, "float64": 0.5, "complex64": None, "bool": 0, "uint4": 7, "int4": 0, "float16": 2.5,
          "bfloat16": 2.5}
SIZE, TILE = 40, 16
EPSG, X0, Y0 = 32632, 700000, 5560000


def _dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name) if name in ("int4", "uint4", "bfloat16") else name)


def _values(source: str) -> np.ndarray:
    """The source's values on the image, each one in every 5-pixel run, so that a warp mixes them."""
    values, _ = SOURCES[source]
    dtype = _dtype(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        array = np.array(values, dtype=np.complex128 if dtype.kind == "c" else object).astype(dtype)
    rows, cols = np.mgrid[0:SIZE, 0:SIZE]
    return array[(rows * 3 + cols) % len(array)]


def _targets(source: str) -> list[str]:
    return [t for t in GDAL_TYPES if t != source]


def _scene(root, source: str, nodata):
    """One rumi Item with a band per output type, all holding ``_values(source)``, and its GeoTIFF twin's Item."""
    targets = _targets(source)
    data = np.stack([_values(source)] * len(targets))
    transform = (10, 0, X0, 0, -10, Y0)
    path = root / f"{source}.rumi"
    blob = xarray_rumi.write(str(path), data, tile_size=TILE, crs=EPSG, transform=transform)
    item = xarray_rumi.stac.item(str(path), blob, datetime="2024-05-01T10:00:00Z", nodata=nodata)
    twin_type = np.dtype(SOURCES[source][1] or source)
    tif = root / f"{source}.tif"
    with rasterio.open(tif, "w", driver="GTiff", width=SIZE, height=SIZE, count=len(targets), dtype=twin_type,
                       crs=f"EPSG:{EPSG}", transform=Affine(*transform), tiled=True, blockxsize=TILE,
                       blockysize=TILE, nodata=nodata) as out:
        out.write(data.astype(twin_type))
    twin = item.clone()
    twin.id = f"{item.id}-tif"
    asset = twin.assets["data"]
    asset.href, asset.media_type = str(tif), "image/tiff; application=geotiff"
    for field in ("rumi:header", "rumi:raster_type"):
        asset.extra_fields.pop(field)
    for band in asset.extra_fields["raster:bands"]:
        band["data_type"] = twin_type.name
    return item, twin, {f"data.{b}": t for b, t in enumerate(targets, start=1)}


PASTED = dict(crs=f"EPSG:{EPSG}", resolution=10)
WARPED = dict(crs="EPSG:3857", resolution=12, resampling="nearest")
WARPED_BILINEAR = dict(crs="EPSG:3857", resolution=15, resampling="bilinear")


def _assert_same(expected, loaded):
    assert list(expected.data_vars) == list(loaded.data_vars)
    for name in expected.data_vars:
        x, y = expected[name].values, loaded[name].values
        assert x.dtype == y.dtype, name
        # bit for bit: NaN where NaN, the same signed zeros
        assert x.tobytes() == y.tobytes(), f"{name} ({x.dtype}): {np.unique(x)} != {np.unique(y)}"
        assert expected[name].attrs.get("nodata") == loaded[name].attrs.get("nodata") or (
            np.isnan(expected[name].attrs["nodata"]) and np.isnan(loaded[name].attrs["nodata"]))


def _load_both(item, twin, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # odc's own dtype.type(nodata) of a value out of range
        expected = odc_stac.load([twin], **kwargs).compute()
        loaded = xarray_rumi.stac.load([item], **kwargs).compute()
    return expected, loaded


@pytest.mark.parametrize("grid", ["pasted", "warped"])
@pytest.mark.parametrize(("source", "nodata"), [
    pytest.param(source, nodata, id=f"{source}-{'no-nodata' if nodata is None else 'nodata'}")
    for source in SOURCES for nodata in dict.fromkeys([None, NODATA[source]])])   # complex: no nodata
def test_every_output_type_is_the_geotiff_paths(tmp_path, source, nodata, grid):
    item, twin, dtypes = _scene(tmp_path, source, nodata)
    area = PASTED if grid == "pasted" else WARPED
    # odc takes a dtype per band only without Dask (with chunks=, Dask is handed the dict as a type)
    _assert_same(*_load_both(item, twin, dtype=dtypes, **area))


@pytest.mark.parametrize("source", ["uint16", "float32", "bfloat16"])
def test_on_dask_every_output_type_is_the_geotiff_paths(tmp_path, source):
    item, twin, dtypes = _scene(tmp_path, source, NODATA[source])
    for name, dtype in dtypes.items():
        for area in (PASTED, WARPED):
            expected, loaded = _load_both(item, twin, bands=[name], dtype=dtype, chunks={"x": 32, "y": 32}, **area)
            _assert_same(expected, loaded)


@pytest.mark.parametrize("source", ["uint16", "float32", "float64", "int16"])
def test_a_fill_value_and_bilinear_warps_are_the_geotiff_paths(tmp_path, source):
    item, twin, dtypes = _scene(tmp_path, source, NODATA[source])
    for area in (PASTED, WARPED_BILINEAR):
        _assert_same(*_load_both(item, twin, dtype=dtypes, nodata=7, **area))


def test_the_issues_narrowings_clamp_and_round(tmp_path):
    """The values of issue 27, as odc's GeoTIFF path gives them (and the driver wrapped them)."""
    item, _, dtypes = _scene(tmp_path, "uint16", None)
    loaded = xarray_rumi.stac.load([item], dtype=dtypes, **PASTED)
    band = {t: name for name, t in dtypes.items()}
    first = slice(0, 4)   # the first four pixels of the first row are [256, 32768, 40000, 65535]
    assert loaded[band["int16"]].values[0, 0, first].tolist() == [256, 32767, 32767, 32767]
    assert loaded[band["uint8"]].values[0, 0, first].tolist() == [255, 255, 255, 255]
    item, _, dtypes = _scene(tmp_path, "float32", None)
    loaded = xarray_rumi.stac.load([item], dtype=dtypes, **PASTED)
    band = {t: name for name, t in dtypes.items()}
    assert loaded[band["uint8"]].values[0, 0, first].tolist() == [2, 0, 255, 255]


def test_a_type_gdal_lacks_is_given_only_where_every_value_fits(tmp_path):
    """odc's GeoTIFF path cannot load as float16 at all (rasterio has no such buffer type): no behaviour to follow,
    so the driver casts exactly or refuses, naming the file and the dtype."""
    item, _, _ = _scene(tmp_path, "uint8", None)
    exact = xarray_rumi.stac.load([item], bands=["data.1"], dtype="float16", **PASTED)
    assert exact["data.1"].dtype == np.float16
    assert np.array_equal(exact["data.1"].values[0], _values("uint8").astype("float16"))
    item, _, _ = _scene(tmp_path, "uint16", None)
    refused = r"uint16\.rumi: uint16 samples cannot be loaded as dtype='float16' on their own grid: not every value"
    with pytest.raises(ValueError, match=refused):
        xarray_rumi.stac.load([item], bands=["data.1"], dtype="float16", **PASTED)
    with pytest.raises(ValueError, match=r"uint16\.rumi: uint16 samples cannot be reprojected into dtype='float16'"):
        xarray_rumi.stac.load([item], bands=["data.1"], dtype="float16", **WARPED)
    with pytest.raises(ValueError, match=refused):   # on Dask, while the load is built: no chunk could give it
        xarray_rumi.stac.load([item], bands=["data.1"], dtype="float16", chunks={}, **WARPED)


@pytest.mark.parametrize("width", [16, 21])
@pytest.mark.parametrize("source", ["float32", "float64", "complex64", "int16", "uint16", "int32", "int64", "uint64"])
def test_cast_as_gdal_is_gdals_read_into_another_type(source, width):
    """Many values of every magnitude, read by GDAL from a GeoTIFF into each type, in rows of 16 and of 21 values."""
    from rasterio.io import MemoryFile

    from xarray_rumi.stac.odc_read import cast_as_gdal, one_value_columns

    pixels = _many_values(np.dtype(source))
    pixels = np.resize(pixels, (pixels.size // width + 1) * width).reshape(-1, width)
    with MemoryFile() as memory:   # striped: a block is a whole row
        with memory.open(driver="GTiff", width=width, height=pixels.shape[0], count=1, dtype=pixels.dtype) as tif:
            tif.write(pixels[None])
        with memory.open() as tif:
            for target in GDAL_TYPES:
                expected = tif.read(1, out=np.empty(pixels.shape, target))
                cast = cast_as_gdal(pixels, target, one_at_a_time=one_value_columns(range(width), width))
                assert cast.tobytes() == expected.tobytes(), (source, target)


@pytest.mark.parametrize("chunk", [12, 20])
def test_chunks_that_cut_tiles_are_the_geotiff_paths(tmp_path, chunk):
    """GDAL converts float32 to int16 eight values at a time, the rest of a run one at a time, otherwise."""
    item, twin, dtypes = _scene(tmp_path, "float32", None)
    for name, dtype in dtypes.items():
        _assert_same(*_load_both(item, twin, bands=[name], dtype=dtype, chunks={"x": chunk, "y": chunk}, **PASTED))


def _many_values(dtype: np.dtype) -> np.ndarray:
    """Random values of every magnitude the type holds, halves and the edges among them."""
    rng = np.random.default_rng(27)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        edges = [v for v in INTEGER_EDGES if info.min <= v <= info.max]
        small = np.clip(rng.integers(-70000, 70000, 4096), max(info.min, -70000), info.max)
        return np.concatenate([rng.integers(info.min, info.max, 4096, dtype=dtype, endpoint=True),
                               small.astype(dtype), np.array(edges, dtype)])
    values = rng.uniform(-1, 1, 4096) * 10.0 ** rng.integers(-3, 21, 4096)
    values = np.concatenate([values, np.round(values[:1024]) + 0.5, DOUBLE_EDGES])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return (values + 1j * values[::-1] if dtype.kind == "c" else values).astype(dtype)
