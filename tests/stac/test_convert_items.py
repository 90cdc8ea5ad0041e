"""convert_items: STAC Items of GeoTIFFs to rumi files and new Items, every pixel and every band field kept."""

from __future__ import annotations

import json
import os
import warnings

import dask
import numpy as np
import pytest

rasterio = pytest.importorskip("rasterio", reason="rasterio is not installed (the geo extra)")
pystac = pytest.importorskip("pystac", reason="pystac is not installed (the stac extra)")

import xarray as xr  # noqa: E402

import xarray_rumi  # noqa: E402
import xarray_rumi.stac  # noqa: E402
from migration_samples import ASSETS, NODATA, OFFSET, SCALE, asset_pixels, make_items  # noqa: E402
from xarray_rumi.stac import convert_items  # noqa: E402
from xarray_rumi.stac.convert_files import FileJob, convert_file  # noqa: E402
from xarray_rumi.stac.convert_items import REFUSED  # noqa: E402

#: Every file in this process, in order: the tests of where files run are test_convert_items_cluster.py's.
HERE = "synchronous"


def rumi_pixels(asset) -> np.ndarray:
    with xr.open_dataset(asset.href, engine="rumi") as ds:
        return ds.band_data.values


def tif_pixels(path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read()


@pytest.fixture
def sources(tmp_path):
    return make_items(str(tmp_path / "cogs"))


@pytest.fixture
def sources_dir(tmp_path):
    os.makedirs(tmp_path / "cogs")
    return tmp_path


def test_every_asset_converts_pixel_for_pixel_and_keeps_its_key(sources_dir):
    items = make_items(str(sources_dir / "cogs"))
    converted = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    assert [item.id for item in converted] == ["scene-0", "scene-1"]
    for index, item in enumerate(converted):
        for key in ASSETS:
            asset = item.assets[key]
            assert asset.media_type == "application/vnd.rumi+tiff"
            assert asset.href == str(sources_dir / "rumi" / item.id / f"{key}.rumi")
            np.testing.assert_array_equal(rumi_pixels(asset), asset_pixels(index, key))
            assert os.path.exists(asset.href + ".header")


def test_new_items_keep_properties_dates_geometry_and_other_assets(sources_dir):
    items = make_items(str(sources_dir / "cogs"))
    [first, _] = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    assert first.properties["platform"] == "test-sat" and first.properties["eo:cloud_cover"] == 3
    assert first.datetime == items[0].datetime and first.geometry == items[0].geometry
    assert first.assets["thumbnail"].to_dict() == items[0].assets["thumbnail"].to_dict()


def test_band_names_nodata_scale_offset_unit_and_type_are_carried(sources_dir):
    items = make_items(str(sources_dir / "cogs"))
    [first, _] = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    swir = first.assets["SWIR"].extra_fields
    assert [band["name"] for band in swir["eo:bands"]] == ["SWIR_1", "SWIR_2"]
    assert swir["raster:bands"] == [{"data_type": "int16", "nodata": NODATA["int16"], "scale": SCALE,
                                     "offset": OFFSET, "unit": "reflectance"}] * 2
    # each asset's own grid, as the projection extension puts it on assets
    assert swir["proj:shape"] == [48, 48] and first.assets["B02"].extra_fields["proj:shape"] == [96, 96]
    assert swir["proj:code"] == "EPSG:32633"


def test_what_the_item_does_not_say_is_taken_from_the_geotiff(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    for asset in items[0].assets.values():
        asset.extra_fields.pop("raster:bands", None)
        asset.extra_fields.pop("eo:bands", None)
    with rasterio.open(items[0].assets["B02"].href, "r+") as f:
        f.set_band_description(1, "blue")
    [new] = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    b02 = new.assets["B02"].extra_fields
    assert b02["raster:bands"] == [{"data_type": "uint16", "nodata": 0, "scale": SCALE, "offset": OFFSET,
                                    "unit": "reflectance"}]
    assert b02["eo:bands"] == [{"name": "blue"}]
    assert "eo:bands" not in new.assets["B03"].extra_fields  # no description: no name invented


def test_itemcollection_file_with_relative_hrefs_and_stac_geoparquet_are_read(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    collection = pystac.ItemCollection(items).to_dict()
    for asset in collection["features"][0]["assets"].values():
        if asset["href"].startswith(str(sources_dir)):
            asset["href"] = os.path.relpath(asset["href"], sources_dir)
    (sources_dir / "items.json").write_text(json.dumps(collection))
    [from_json] = convert_items(sources_dir / "items.json", sources_dir / "a", scheduler=HERE)
    np.testing.assert_array_equal(rumi_pixels(from_json.assets["B03"]), asset_pixels(0, "B03"))

    pytest.importorskip("stac_geoparquet", reason="stac-geoparquet is not installed (the stac extra)")
    from xarray_rumi.stac import write_stac_geoparquet

    write_stac_geoparquet(items, sources_dir / "items.parquet")
    [from_parquet] = convert_items(str(sources_dir / "items.parquet"), sources_dir / "b", scheduler=HERE)
    np.testing.assert_array_equal(rumi_pixels(from_parquet.assets["SWIR"]), asset_pixels(0, "SWIR"))


def test_real_rasters_convert_pixel_for_pixel_and_a_refused_one_says_why(shared_data, tmp_path):
    names = ["RGB.byte.tif", "shade.tif", "RGBA.uint16.tif", "small_dem_3m_merged.tif", "cog.tif", "cint16.tif"]
    item = pystac.Item("real", None, None, pystac.utils.str_to_datetime("2024-01-01T00:00:00Z"), {})
    for name in names:
        item.add_asset(name.split(".")[0], pystac.Asset(str(shared_data / name), media_type="image/tiff"))
    [new] = convert_items([item], tmp_path / "rumi", scheduler=HERE)
    for name in names[:-2]:
        with rasterio.open(shared_data / name) as src:
            expected = src.read()
        got = rumi_pixels(new.assets[name.split(".")[0]])
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    for key, reason in (("cog", "EPSG"), ("cint16", "ground control points")):  # a custom CRS; GCPs
        assert new.assets[key].href == str(shared_data / f"{key}.tif") and reason in new.assets[key].extra_fields[REFUSED]
        assert not os.path.exists(tmp_path / "rumi" / "real" / f"{key}.rumi")


def _items_with_a_gcp_asset(sources_dir) -> list:
    """One Item of the sample assets plus ``gcps``: a GeoTIFF georeferenced by ground control points."""
    from rasterio.control import GroundControlPoint

    items = make_items(str(sources_dir / "cogs"), count=1)
    gcp_path = str(sources_dir / "gcps.tif")
    with rasterio.open(gcp_path, "w", driver="GTiff", width=16, height=16, count=1, dtype="uint8",
                       gcps=[GroundControlPoint(0, 0, 15.0, 45.0), GroundControlPoint(16, 0, 15.1, 45.0),
                             GroundControlPoint(0, 16, 15.0, 44.9)], crs="EPSG:4326") as f:
        f.write(np.ones((1, 16, 16), "uint8"))
    items[0].add_asset("gcps", pystac.Asset(gcp_path, media_type="image/tiff"))
    return items


def test_a_gcp_source_is_refused_with_its_reason_and_the_others_convert(sources_dir):
    items = _items_with_a_gcp_asset(sources_dir)
    [new] = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    assert "ground control points" in new.assets["gcps"].extra_fields[REFUSED]
    assert all(new.assets[key].media_type == "application/vnd.rumi+tiff" for key in ASSETS)


def test_a_rerun_keeps_valid_outputs_without_writing_them(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    progress = []
    first = convert_items(items, sources_dir / "rumi", scheduler=HERE, progress=progress.append)
    assert {r.status for r in progress} == {"converted"}
    stamps = {p: os.stat(p).st_mtime_ns for p in _outputs(sources_dir / "rumi")}
    progress.clear()
    again = convert_items(items, sources_dir / "rumi", scheduler=HERE, progress=progress.append)
    assert {r.status for r in progress} == {"kept"}
    assert {p: os.stat(p).st_mtime_ns for p in _outputs(sources_dir / "rumi")} == stamps
    assert [i.to_dict() for i in again] == [i.to_dict() for i in first]


def test_a_rerun_checks_outputs_where_it_runs_and_sends_the_scheduler_only_what_is_left(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    convert_items(items, sources_dir / "rumi", scheduler=HERE)
    handed = []

    def scheduler(graph, keys, **kwargs):  # a Dask scheduler that notes what it is given, then runs it here
        handed.append(len(keys))
        return dask.get(graph, keys, **kwargs)

    convert_items(items, sources_dir / "rumi", scheduler=scheduler)
    assert handed == []  # every output valid: nothing for the scheduler
    os.remove(str(sources_dir / "rumi" / "scene-0" / "B02.rumi.header"))
    progress = []
    convert_items(items, sources_dir / "rumi", scheduler=scheduler, progress=progress.append)
    assert handed == [1] and sorted(r.status for r in progress).count("converted") == 1


def test_a_rerun_reads_pam_sidecars_as_the_first_run_did_and_warns_of_nothing(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    for asset in items[0].assets.values():
        asset.extra_fields.pop("raster:bands", None)
        asset.extra_fields.pop("eo:bands", None)
    source = items[0].assets["B03"].href
    with open(source + ".aux.xml", "w") as f:  # what GDAL writes beside a file it may not rewrite
        f.write('<PAMDataset><PAMRasterBand band="1"><Description>green</Description><NoDataValue>7</NoDataValue>'
                '<Offset>-2</Offset><Scale>0.5</Scale><UnitType>m</UnitType></PAMRasterBand></PAMDataset>')
    [first] = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    assert first.assets["B03"].extra_fields["raster:bands"] == [{"data_type": "uint16", "nodata": 7, "scale": 0.5,
                                                                "offset": -2.0, "unit": "m"}]
    assert first.assets["B03"].extra_fields["eo:bands"] == [{"name": "green"}]
    handed = []

    def scheduler(graph, keys, **kwargs):
        handed.append(len(keys))
        return dask.get(graph, keys, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the check opens sources without their georeferencing: rasterio would warn
        [again] = convert_items(items, sources_dir / "rumi", scheduler=scheduler)
    assert handed == [] and again.to_dict() == first.to_dict()  # every output kept by the check where it runs


def test_a_rerun_does_not_keep_an_output_without_georeferencing_of_a_gcp_source(sources_dir):
    items = _items_with_a_gcp_asset(sources_dir)
    target = sources_dir / "rumi" / "scene-0" / "gcps.rumi"
    os.makedirs(target.parent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # rumi convert's answer: the pixels, no georeferencing
        xarray_rumi.convert(items[0].assets["gcps"].href, str(target))
    assert os.path.exists(str(target) + ".header")
    [new] = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    assert "ground control points" in new.assets["gcps"].extra_fields[REFUSED]


def test_a_rerun_keeps_the_output_of_a_source_without_georeferencing_through_its_task(tmp_path):
    path = str(tmp_path / "plain.tif")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rasterio: no geotransform
        with rasterio.open(path, "w", driver="GTiff", width=16, height=16, count=1, dtype="uint8") as f:
            f.write(np.arange(256, dtype="uint8").reshape(1, 16, 16))
    item = pystac.Item("plain", None, None, pystac.utils.str_to_datetime("2024-01-01T00:00:00Z"), {})
    item.add_asset("data", pystac.Asset(path, media_type="image/tiff"))
    convert_items([item], tmp_path / "rumi", scheduler=HERE)
    stamps = {p: os.stat(p).st_mtime_ns for p in _outputs(tmp_path / "rumi")}
    progress = []
    convert_items([item], tmp_path / "rumi", scheduler=HERE, progress=progress.append)
    assert [r.status for r in progress] == ["kept"]  # checked by its task, which reads the source whole
    assert {p: os.stat(p).st_mtime_ns for p in _outputs(tmp_path / "rumi")} == stamps


@pytest.mark.parametrize("damage", ["truncated", "other blob", "no blob", "other source"])
def test_a_rerun_redoes_an_output_its_blob_does_not_vouch_for(sources_dir, damage):
    items = make_items(str(sources_dir / "cogs"), count=1)
    convert_items(items, sources_dir / "rumi", scheduler=HERE)
    target = str(sources_dir / "rumi" / "scene-0" / "B02.rumi")
    if damage == "truncated":
        os.truncate(target, os.path.getsize(target) - 1)
    elif damage == "other blob":
        with open(target + ".header", "wb") as f:
            f.write(xarray_rumi.write(str(sources_dir / "x.rumi"), np.zeros((1, 96, 96), "uint16"), tile_size=32))
    elif damage == "no blob":
        os.remove(target + ".header")
    else:  # a file of another shape from an earlier, different source: the name alone does not vouch for it
        xarray_rumi.write(target, np.zeros((1, 8, 8), "uint16"))
    progress = []
    [new] = convert_items(items, sources_dir / "rumi", scheduler=HERE, progress=progress.append)
    assert [(r.job.asset, r.status) for r in progress if r.status == "converted"] == [("B02", "converted")]
    np.testing.assert_array_equal(rumi_pixels(new.assets["B02"]), asset_pixels(0, "B02"))


def test_a_rerun_converts_again_a_source_replaced_after_its_output(sources_dir):
    # the same grid and type, other pixels: only the source's time tells (make's rule)
    items = make_items(str(sources_dir / "cogs"), count=1)
    convert_items(items, sources_dir / "rumi", scheduler=HERE)
    source = items[0].assets["B02"].href
    with rasterio.open(source, "r+") as f:
        replaced = f.read() + 1
        f.write(replaced)
    target = str(sources_dir / "rumi" / "scene-0" / "B02.rumi")
    later = os.stat(target).st_mtime_ns + 10**9
    os.utime(source, ns=(later, later))
    progress = []
    [new] = convert_items(items, sources_dir / "rumi", scheduler=HERE, progress=progress.append)
    assert [(r.job.asset, r.status) for r in progress if r.status == "converted"] == [("B02", "converted")]
    np.testing.assert_array_equal(rumi_pixels(new.assets["B02"]), replaced)
    earlier = os.stat(target).st_mtime_ns - 10**9
    os.utime(source, ns=(earlier, earlier))
    assert convert_file(FileJob("scene-0", "B02", source, target)).status == "kept"  # the output is the newer


def test_stac_1_1_bands_give_raster_bands_and_keep_their_names_with_the_rumi_data_type(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    fields = items[0].assets["B02"].extra_fields
    fields["bands"] = [{"name": "blue", "data_type": "uint16", "nodata": 1, "raster:scale": 2.0, "unit": "K"}]
    del fields["raster:bands"], fields["eo:bands"]
    [new] = convert_items(items, sources_dir / "rumi", assets=["B02"], scheduler=HERE)
    b02 = new.assets["B02"].extra_fields
    assert b02["raster:bands"] == [{"nodata": 1, "scale": 2.0, "unit": "K", "data_type": "uint16", "offset": OFFSET}]
    assert b02["bands"] == [{"name": "blue", "data_type": "uint16", "nodata": 1, "raster:scale": 2.0, "unit": "K"}]


def test_a_complex_int16_output_is_kept_as_the_cint16_file_rumi_convert_made(tmp_path):
    source = str(tmp_path / "c.tif")
    with rasterio.open(source, "w", driver="GTiff", width=32, height=32, count=1, dtype="complex_int16",
                       crs="EPSG:32633", transform=rasterio.Affine(10, 0, 5e5, 0, -10, 5e6)) as f:
        f.write(np.ones((1, 32, 32), "complex64"))
    job = FileJob("a", "data", source, str(tmp_path / "c.rumi"))
    assert [convert_file(job).status for _ in range(2)] == ["converted", "kept"]


@pytest.mark.parametrize(("asset", "expected"), [
    ({"href": "b.tif", "type": "image/tiff; application=geotiff; profile=cloud-optimized"}, True),
    ({"href": "thumb.png", "type": "image/png"}, False),
    ({"href": "s3://b/x.TIF"}, True),   # no media type: the href says
    ({"href": "x.tif", "type": "image/tiff", "rumi:header": "AAAA"}, False),   # converted already
])
def test_a_geotiff_asset_is_told_by_media_type_or_else_by_href(asset, expected):
    from xarray_rumi.stac.convert_items import is_geotiff_asset

    assert is_geotiff_asset(asset) is expected


def test_unsafe_item_ids_are_refused_before_any_file(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    items[0].id = "../escape"
    with pytest.raises(ValueError, match=r"Item id '../escape' cannot name a folder"):
        convert_items(items, sources_dir / "rumi", scheduler=HERE)
    assert not os.path.exists(sources_dir / "rumi")


def test_a_missing_source_is_a_failed_result_not_an_error(tmp_path):
    result = convert_file(FileJob("a", "data", str(tmp_path / "missing.tif"), str(tmp_path / "out.rumi")))
    assert result.status == "failed" and "missing.tif" in result.reason
    assert not os.path.exists(tmp_path / "out.rumi")


def _outputs(root) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files)


@pytest.mark.parametrize("load", [dict(crs="EPSG:32633", resolution=10), dict(crs="EPSG:3857", resolution=15),
                                  dict(crs="EPSG:32633", resolution=20, bands=["B02", "SWIR_2"])])
def test_odc_stac_loads_converted_items_as_it_loads_the_originals(sources_dir, load):
    odc_stac = pytest.importorskip("odc.stac", reason="odc-stac is not installed (the odc extra)")
    items = make_items(str(sources_dir / "cogs"))
    converted = convert_items(items, sources_dir / "rumi", scheduler=HERE)
    expected = odc_stac.load(items, chunks={}, **load).compute()
    got = xarray_rumi.stac.load(converted, chunks={}, **load).compute()
    assert list(got.data_vars) == list(expected.data_vars) and got.odc.geobox == expected.odc.geobox
    for name in expected.data_vars:  # band names from eo:bands, nodata from raster:bands, every pixel
        assert got[name].attrs == expected[name].attrs and got[name].dtype == expected[name].dtype
        np.testing.assert_array_equal(got[name].values, expected[name].values)


def test_a_destination_url_gets_the_files_and_the_items_point_there(sources_dir):
    fsspec = pytest.importorskip("fsspec")
    items = make_items(str(sources_dir / "cogs"), count=1)
    [new] = convert_items(items, "memory://migrated", scheduler=HERE)
    assert new.assets["B03"].href == "memory://migrated/scene-0/B03.rumi"
    blob = fsspec.filesystem("memory").cat("/migrated/scene-0/B03.rumi.header")
    image = xarray_rumi.open_image(new.assets["B03"].href, blob)
    np.testing.assert_array_equal(image.read(), asset_pixels(0, "B03"))


def test_assets_names_what_to_convert_and_the_rest_stays(sources_dir):
    items = make_items(str(sources_dir / "cogs"), count=1)
    [new] = convert_items(items, sources_dir / "rumi", assets=["SWIR"], scheduler=HERE)
    assert new.assets["SWIR"].media_type == "application/vnd.rumi+tiff"
    assert new.assets["B02"].to_dict() == items[0].assets["B02"].to_dict()
    assert sorted(os.listdir(sources_dir / "rumi" / "scene-0")) == ["SWIR.rumi", "SWIR.rumi.header"]


def test_open_cube_of_an_item_of_several_rumi_files_says_how_to_load_it(sources_dir):
    [new] = convert_items(make_items(str(sources_dir / "cogs"), count=1), sources_dir / "rumi", scheduler=HERE)
    with pytest.raises(ValueError, match=r"has 3 assets with a rumi:header blob.*choose with assets=.*stac.load"):
        xarray_rumi.open_cube([new])
