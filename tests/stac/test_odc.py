"""odc-stac's reader driver: rumi Items load as their GeoTIFF twins do, reading only what they must."""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

odc_stac = pytest.importorskip("odc.stac", reason="odc-stac is not installed (the odc extra)")
rasterio = pytest.importorskip("rasterio", reason="rasterio is not installed (odc-stac brings it)")
pytest.importorskip("pystac", reason="pystac is not installed (the stac extra)")

import dask  # noqa: E402
from affine import Affine  # noqa: E402

import xarray_rumi  # noqa: E402
import xarray_rumi.stac  # noqa: E402
from xarray_rumi.format.blob import Header  # noqa: E402
from xarray_rumi.format.head import ifd_head_ranges  # noqa: E402
from xarray_rumi.stac.odc import RumiDriver  # noqa: E402

#: Three images in two UTM zones near 12 degrees east: two on zone 32's grid (the second offset by whole
#: pixels), one in zone 33, a day later.
SCENES = [(32632, 700000, 5560000, "2024-05-01"), (32632, 701280, 5558720, "2024-05-01"),
          (32633, 275000, 5555000, "2024-05-02")]
SIZE, TILE = 300, 128
#: The share of pixels a reprojected rumi load may differ from its GeoTIFF twins' (docs/stac.md): none measured.
REPROJECTION_TOLERANCE = 1e-4


def _pixels(index, bands=2, dtype="uint16", zeros=False):
    rows, cols = np.mgrid[0:SIZE, 0:SIZE]
    noise = np.random.default_rng(index).integers(0, 50, (bands, SIZE, SIZE))
    data = np.stack([(rows * 3 + cols * (b + 2) + index * 100) % 3000 for b in range(bands)]) + noise
    if zeros:
        data[:, 100:140, 60:90] = 0
    return data.astype(dtype)


def make_scenes(root, *, bands=2, dtype="uint16", frame_unit="tile", nodata=None, href_prefix=None, zeros=False,
                twin_dtype=None):
    """Three rumi Items and their GeoTIFF twins (same pixels, same tiling, ZSTD, the same Item fields).

    ``twin_dtype``: the twins' sample type, holding the same values, when GDAL has no ``dtype``.
    """
    items, twins = [], []
    for index, (epsg, x0, y0, day) in enumerate(SCENES):
        data = _pixels(index, bands, dtype, zeros)
        transform = (10, 0, x0, 0, -10, y0)
        path = os.path.join(root, f"scene-{index}.rumi")
        blob = xarray_rumi.write(path, data, tile_size=TILE, crs=epsg, transform=transform, frame_unit=frame_unit)
        href = f"{href_prefix}/scene-{index}.rumi" if href_prefix else None
        item = xarray_rumi.stac.item(path, blob, href=href, datetime=f"{day}T10:00:00Z", nodata=nodata)
        items.append(item)
        tif = os.path.join(root, f"scene-{index}.tif")
        twin_data = data.astype(twin_dtype or dtype)
        with rasterio.open(tif, "w", driver="GTiff", width=SIZE, height=SIZE, count=bands, dtype=twin_data.dtype,
                           crs=f"EPSG:{epsg}", transform=Affine(*transform), tiled=True, blockxsize=TILE,
                           blockysize=TILE, compress="zstd", nodata=nodata) as out:
            out.write(twin_data)
        twin = item.clone()
        twin.id = f"{item.id}-tif"
        twin.assets["data"].href = tif
        twin.assets["data"].media_type = "image/tiff; application=geotiff; profile=cloud-optimized"
        for field in ("rumi:header", "rumi:raster_type"):
            twin.assets["data"].extra_fields.pop(field)
        twins.append(twin)
    return items, twins


@pytest.fixture
def scenes(tmp_path):
    return make_scenes(str(tmp_path))


def _differing(a, b) -> int:
    assert list(a.data_vars) == list(b.data_vars) and a.sizes == b.sizes
    assert a.odc.geobox == b.odc.geobox
    count = 0
    for name in a.data_vars:
        x, y = a[name].values, b[name].values
        assert x.dtype == y.dtype
        count += int(np.sum((x != y) & ~(np.isnan(x) & np.isnan(y)) if x.dtype.kind == "f" else x != y))
    return count


LOAD_FORMS = {
    "driver=RumiDriver()": lambda items, **kw: odc_stac.load(items, driver=RumiDriver(), **kw),
    "driver='xarray_rumi.stac.RumiDriver'": lambda items, **kw: odc_stac.load(
        items, driver="xarray_rumi.stac.RumiDriver", **kw),
    "xarray_rumi.stac.load": lambda items, **kw: xarray_rumi.stac.load(items, **kw),
}


@pytest.mark.parametrize("form", LOAD_FORMS)
def test_on_the_source_grid_every_form_loads_the_twins_pixels_bit_for_bit(scenes, form):
    items, twins = scenes
    kwargs = dict(crs="EPSG:32632", resolution=10, chunks={"x": 256, "y": 256})
    expected = odc_stac.load(twins, **kwargs).compute()
    loaded = LOAD_FORMS[form](items, **kwargs)
    assert loaded["data.1"].dtype == np.uint16 and loaded.sizes["time"] == 2
    assert _differing(expected, loaded.compute()) == 0


@pytest.mark.parametrize(("resampling", "resolution", "chunk"), [
    ("nearest", 10, 512), ("nearest", 30, 200), ("bilinear", 10, 512), ("bilinear", 30, 256), ("bilinear", 45, 128),
    ("cubic", 10, 200), ("cubic", 45, 256), ("average", 25, 512), ("mode", 30, 256)])
def test_reprojected_across_zones_the_pixels_are_the_twins(scenes, resampling, resolution, chunk):
    """Shrinking chunks cut slivers of the images: there GDAL needs more of the file than odc's window (odc_read)."""
    items, twins = scenes
    kwargs = dict(crs="EPSG:3857", resolution=resolution, resampling=resampling, chunks={"x": chunk, "y": chunk})
    expected = odc_stac.load(twins, **kwargs).compute()
    loaded = xarray_rumi.stac.load(items, **kwargs).compute()
    size = sum(loaded[name].size for name in loaded.data_vars)
    assert _differing(expected, loaded) <= REPROJECTION_TOLERANCE * size


def test_without_dask_the_pixels_are_the_twins(scenes):
    items, twins = scenes
    kwargs = dict(crs="EPSG:3857", resolution=10, resampling="bilinear")
    assert _differing(odc_stac.load(twins, **kwargs), xarray_rumi.stac.load(items, **kwargs)) == 0


def test_bbox_groupby_dtype_and_nodata_work_as_for_geotiffs(tmp_path):
    items, twins = make_scenes(str(tmp_path), nodata=0, zeros=True)
    kwargs = dict(crs="EPSG:3857", resolution=15, resampling="bilinear", bbox=(11.83, 50.13, 11.9, 50.18),
                  groupby="solar_day", dtype="float32", chunks={"x": 300, "y": 300})
    expected = odc_stac.load(twins, **kwargs).compute()
    loaded = xarray_rumi.stac.load(items, **kwargs).compute()
    assert loaded["data.1"].dtype == np.float32 and loaded["data.1"].attrs["nodata"] == 0
    assert _differing(expected, loaded) == 0
    native = xarray_rumi.stac.load(items, bands=["data.2"], chunks={}, nodata=7)
    assert list(native.data_vars) == ["data.2"] and native["data.2"].attrs["nodata"] == 7


def test_nodata_comes_from_raster_bands(tmp_path):
    items, twins = make_scenes(str(tmp_path), nodata=0, zeros=True)
    assert items[0].assets["data"].extra_fields["raster:bands"][0]["nodata"] == 0
    kwargs = dict(crs="EPSG:3857", resolution=10, resampling="bilinear", chunks={"x": 512, "y": 512})
    loaded = xarray_rumi.stac.load(items, **kwargs).compute()
    assert loaded["data.1"].attrs["nodata"] == 0
    assert _differing(odc_stac.load(twins, **kwargs).compute(), loaded) == 0
    # the zeros inside the first image are nodata: another image's pixels show through them when fused
    pasted = xarray_rumi.stac.load(items, crs="EPSG:32632", resolution=10, chunks={}).compute()
    assert _differing(odc_stac.load(twins, crs="EPSG:32632", resolution=10, chunks={}).compute(), pasted) == 0


def test_a_mixed_search_reads_the_geotiff_with_odcs_reader(scenes):
    items, twins = scenes
    mixed = [twins[0], items[1], items[2]]
    kwargs = dict(crs="EPSG:3857", resolution=10, resampling="bilinear", chunks={"x": 512, "y": 512})
    assert _differing(odc_stac.load(twins, **kwargs).compute(), xarray_rumi.stac.load(mixed, **kwargs).compute()) == 0


def test_stac_cfg_goes_to_the_drivers_parser(scenes):
    items, _ = scenes
    cfg = {"assets": {"data": {"nodata": 5}}}   # Items without a collection: one configuration for all
    for loaded in (xarray_rumi.stac.load(items, stac_cfg=cfg, chunks={}),
                   odc_stac.load(items, driver=RumiDriver(stac_cfg=cfg), chunks={})):
        assert [loaded[name].attrs["nodata"] for name in ("data.1", "data.2")] == [5, 5]
    assert "nodata" not in xarray_rumi.stac.load(items, chunks={})["data.1"].attrs
    with pytest.raises(TypeError, match="rumi driver"):
        xarray_rumi.stac.load(items, driver="rio")


def test_building_the_load_reads_nothing_and_a_small_window_reads_only_its_frame(tmp_path, http_server):
    pytest.importorskip("aiohttp", reason="reading over HTTP needs the http extra")
    items, _ = make_scenes(str(tmp_path), href_prefix=http_server.url)
    http_server.requests.clear()
    # pixels 10..40 (rows and columns) of the first image: inside its first frame, and in no other image
    x0, y0 = SCENES[0][1], SCENES[0][2]
    area = dict(crs="EPSG:32632", resolution=10, x=(x0 + 100, x0 + 400), y=(y0 - 400, y0 - 100), chunks={})
    lazy = xarray_rumi.stac.load(items, **area)
    assert http_server.get_requests() == []
    values = lazy["data.1"].values
    assert np.array_equal(values[0], _pixels(0)[0, 10:40, 10:40])
    header = Header.from_bytes(base64.b64decode(items[0].assets["data"].extra_fields["rumi:header"]))
    # the frames at the first tile position, one a band, and the IFD head the blob is checked against
    frames = {(header.offset(k), header.offset(k) + header.byte_count(k))
              for k in (header.grid.frame_index(0, 0, band) for band in (0, 1))}
    head = {tuple(r) for r in ifd_head_ranges(header.grid, georeferencing=True)}  # and the tags the Item's match
    requested = [(r.path, r.range) for r in http_server.get_requests()]
    assert {path for path, _ in requested} == {"/scene-0.rumi"}
    # in the read engine's requests (xarray_rumi.io.engine), which may share one or read through a small gap
    wanted = sorted(frames | head)
    assert all(any(a <= s and e <= b for _, (a, b) in requested) for s, e in wanted)
    assert all(a >= wanted[0][0] and b <= max(e for _, e in wanted) for _, (a, b) in requested)


def test_cell_frames_are_decoded_once_per_chunk_not_once_per_band(tmp_path, monkeypatch):
    import xarray_rumi.reading.image as image_module

    items, _ = make_scenes(str(tmp_path), bands=3, frame_unit="cell")
    decoded = []
    decode = image_module.decode_frame

    def counting(payload, *args, **kwargs):
        decoded.append(len(payload))
        return decode(payload, *args, **kwargs)

    monkeypatch.setattr(image_module, "decode_frame", counting)
    loaded = xarray_rumi.stac.load(items[:1], crs="EPSG:32632", resolution=10, chunks={"x": TILE, "y": TILE})
    loaded.compute()
    frames = Header.from_bytes(xarray_rumi.header_from_file(str(tmp_path / "scene-0.rumi"))).grid.frame_count
    assert len(decoded) == frames   # each frame of the three bands once; once per band would be 3 times that
    assert np.array_equal(np.stack([loaded[f"data.{b}"].values[0] for b in (1, 2, 3)]), _pixels(0, 3))


def test_a_type_gdal_cannot_warp_is_pasted_and_refused_or_upcast_when_reprojected(tmp_path):
    items, float_twins = make_scenes(str(tmp_path), bands=1, dtype="bfloat16", twin_dtype="float32")
    assert items[0].assets["data"].extra_fields["raster:bands"][0]["data_type"] == "other"
    pasted = xarray_rumi.stac.load(items[:1], crs="EPSG:32632", resolution=10, chunks={})
    assert pasted["data"].dtype == np.dtype("bfloat16")
    assert np.array_equal(pasted["data"].values[0].view("uint16"), _pixels(0, 1, "bfloat16")[0].view("uint16"))
    reprojected = dict(crs="EPSG:3857", resolution=10, resampling="bilinear", chunks={})
    refused = r"scene-\d\.rumi: bfloat16 samples cannot be reprojected into dtype='bfloat16'"
    with pytest.raises(ValueError, match=refused):
        xarray_rumi.stac.load(items, **reprojected).compute()
    # upcast exactly: the same pixels as float32 GeoTIFFs holding the bfloat16 values
    upcast = xarray_rumi.stac.load(items, dtype="float32", **reprojected).compute()
    assert _differing(odc_stac.load(float_twins, dtype="float32", **reprojected).compute(), upcast) == 0


def test_fail_on_error_false_skips_a_file_it_cannot_read(tmp_path):
    items, twins = make_scenes(str(tmp_path))
    os.remove(tmp_path / "scene-1.rumi")
    os.remove(tmp_path / "scene-1.tif")
    kwargs = dict(crs="EPSG:3857", resolution=10, chunks={"x": 512, "y": 512})
    with pytest.raises(FileNotFoundError):
        xarray_rumi.stac.load(items, **kwargs).compute()
    loaded = xarray_rumi.stac.load(items, fail_on_error=False, **kwargs).compute()
    assert _differing(odc_stac.load(twins, fail_on_error=False, **kwargs).compute(), loaded) == 0


def test_the_driver_its_readers_and_the_load_pickle_and_run_in_other_processes(scenes):
    items, twins = scenes
    driver = pickle.loads(pickle.dumps(RumiDriver(stac_cfg={"*": {"aliases": {"red": "data.2"}}})))
    assert driver.stac_cfg == {"*": {"aliases": {"red": "data.2"}}}
    parsed = odc_stac.parse_item(items[0], md_plugin=driver.md_parser)
    source = parsed[("data", 1)]
    load = driver.new_load(source.geobox, chunks={"x": 128, "y": 128})
    reader = pickle.loads(pickle.dumps(driver.open(source, load)))
    cfg = odc_stac.RasterLoadParams(dtype="uint16")
    roi, pixels = reader.read(cfg, source.geobox)
    assert np.array_equal(pixels, _pixels(0)[0])
    dask_reader = pickle.loads(pickle.dumps(driver.dask_reader.open(source, cfg, load, layer_name="l", idx=0)))
    assert pickle.loads(pickle.dumps(load)).asked == load.asked
    roi2, pixels2 = dask_reader.read(source.geobox, idx=(0, 0, 0, 0)).compute()
    assert roi2 == roi and np.array_equal(pixels2, pixels)
    kwargs = dict(crs="EPSG:3857", resolution=10, resampling="bilinear", chunks={"x": 512, "y": 512})
    with dask.config.set(scheduler="processes", num_workers=2):
        loaded = xarray_rumi.stac.load(items, **kwargs).compute()
    assert _differing(odc_stac.load(twins, **kwargs).compute(), loaded) == 0


def test_a_non_image_media_type_keeps_the_driver_working_and_odc_alone_refusing(scenes):
    """Evidence for a media type odc and GDAL leave alone (docs/stac.md): the driver keeps an asset by its blob."""
    items, _ = scenes
    for item in items:
        item.assets["data"].media_type = "application/vnd.rumi+tiff"
    with pytest.raises((KeyError, ValueError)):
        odc_stac.load(items, bands=["data.1"], chunks={})   # odc alone drops the asset: no such band
    loaded = xarray_rumi.stac.load(items, crs="EPSG:32632", resolution=10, chunks={})
    assert np.array_equal(loaded["data.1"].values[0, :SIZE, :SIZE], _pixels(0)[0])


def test_importing_xarray_rumi_stac_imports_no_odc():
    done = subprocess.run([sys.executable, "-c", "import sys, xarray_rumi.stac\n"
                           "assert not [m for m in sys.modules if m.split('.')[0] == 'odc'], 'odc imported'\n"
                           "assert xarray_rumi.stac.RumiDriver.__name__ == 'RumiDriver'"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_load_takes_what_open_cube_takes(scenes, tmp_path):
    """Item dicts, a FeatureCollection dict, a stac-geoparquet file, one Item, a generator (a search's items())."""
    pystac = pytest.importorskip("pystac")
    pytest.importorskip("stac_geoparquet", reason="stac-geoparquet is not installed (the stac extra)")
    items, _ = scenes
    kwargs = dict(crs="EPSG:32632", resolution=10, chunks={})
    expected = xarray_rumi.stac.load(items, **kwargs).compute()
    parquet = str(tmp_path / "items.parquet")
    xarray_rumi.stac.write_stac_geoparquet(items, parquet)
    forms = {
        "Item dicts": [item.to_dict() for item in items],
        "a FeatureCollection dict": pystac.ItemCollection(items).to_dict(),
        "an ItemCollection": pystac.ItemCollection(items),
        "a stac-geoparquet path": parquet,
        "a generator": (item for item in items),
    }
    for form, given in forms.items():
        assert _differing(expected, xarray_rumi.stac.load(given, **kwargs).compute()) == 0, form
    one = xarray_rumi.stac.load(items[0], **kwargs)
    assert one.sizes["time"] == 1 and np.array_equal(one["data.1"].values[0, :SIZE, :SIZE], _pixels(0)[0])


def test_load_refuses_a_path_that_is_not_stac_geoparquet_naming_it(scenes, tmp_path):
    items, _ = scenes
    not_parquet = tmp_path / "items.json"
    not_parquet.write_text("{}")
    with pytest.raises(ValueError, match=r"items\.json.*not a stac-geoparquet file"):
        xarray_rumi.stac.load(str(not_parquet), chunks={})
    with pytest.raises(ValueError, match=r"scene-0\.rumi.*not a stac-geoparquet file"):
        xarray_rumi.stac.load(items[0].assets["data"].href, chunks={})


def test_an_item_whose_georeferencing_the_file_contradicts_is_refused_naming_the_item(scenes):
    """A stale proj:transform is refused at the first read, naming the Item, not loaded at the wrong place."""
    items, _ = scenes
    stale = items[0].clone()
    stale.properties["proj:transform"] = [20, 0, SCENES[0][1], 0, -20, SCENES[0][2]]
    with pytest.raises(xarray_rumi.RumiFormatError, match=r"georeferencing\.matches-file.*STAC Item 'scene-0'"):
        xarray_rumi.stac.load([stale], crs=f"EPSG:{SCENES[0][0]}", resolution=10, chunks={}).compute()
