"""GeoTIFF to rumi: every real raster rumi can hold, and the one it cannot."""

from __future__ import annotations

import os

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.cli import main
from xarray_rumi.writing.convert import convert
from xarray_rumi.reading.open import open_image

rasterio = pytest.importorskip("rasterio")

STORABLE = ["RGB.byte.tif", "shade.tif", "RGBA.uint16.tif", "small_dem_3m_merged.tif", "cint16.tif"]


@pytest.mark.parametrize("name", STORABLE)
def test_real_rasters_convert_exactly(shared_data, tmp_path, name):
    target = tmp_path / "out.rumi"
    result = convert(shared_data / name, target, tile_size=256)
    blob = (tmp_path / "out.rumi.header").read_bytes()
    xarray_rumi.validate(target, blob)
    image = open_image(target, blob)
    with rasterio.open(shared_data / name) as src:
        expected = src.read()
        crs, transform = src.crs, tuple(src.transform)[:6]
    assert np.array_equal(image.read(), expected)
    assert result.ratio == pytest.approx(expected.size * (4 if name == "cint16.tif" else expected.dtype.itemsize)
                                         / os.path.getsize(target))
    if crs is None:
        assert not image.georeferencing.is_defined
    else:
        assert image.georeferencing.epsg == crs.to_epsg()
        assert image.georeferencing.transform == pytest.approx(transform)


def test_cint16_keeps_its_on_disk_type(shared_data, tmp_path):
    convert(shared_data / "cint16.tif", tmp_path / "c.rumi")
    assert open_image(tmp_path / "c.rumi").sample_type.name == "cint16"


def test_a_crs_without_epsg_is_refused_with_no_output(shared_data, tmp_path):
    with pytest.raises(ValueError, match="EPSG") as info:
        convert(shared_data / "cog.tif", tmp_path / "cog.rumi")
    assert "--drop-georeferencing" in str(info.value)
    assert os.listdir(tmp_path) == []


def test_drop_georeferencing_writes_the_pixels_only(shared_data, tmp_path):
    convert(shared_data / "cog.tif", tmp_path / "cog.rumi", drop_georeferencing=True)
    image = open_image(tmp_path / "cog.rumi")
    assert not image.georeferencing.is_defined
    with rasterio.open(shared_data / "cog.tif") as src:
        assert np.array_equal(image.read(), src.read())


def test_point_rasters_keep_their_geolocation(tmp_path):
    source = tmp_path / "point.tif"
    profile = dict(driver="GTiff", width=20, height=10, count=1, dtype="int16", crs="EPSG:32633",
                   transform=rasterio.Affine(10, 0, 1000, 0, -10, 2000))
    with rasterio.open(source, "w", **profile) as dst:
        dst.write(np.arange(200, dtype="int16").reshape(1, 10, 20))
        dst.update_tags(AREA_OR_POINT="Point")
    convert(source, tmp_path / "point.rumi", tile_size=16)
    georef = open_image(tmp_path / "point.rumi").georeferencing
    assert georef.raster_type.name == "POINT"
    # GDAL reports corners for a point file; rumi stores the first pixel's centre
    assert georef.transform == (10, 0, 1005, 0, -10, 1995)


def test_cli_converts_many_files_and_reports(shared_data, tmp_path, capsys):
    out = tmp_path / "out"
    status = main(["convert", str(shared_data / "shade.tif"), str(shared_data / "small_dem_3m_merged.tif"),
                   str(shared_data / "cog.tif"), str(out), "--tile-size", "256", "-j", "2"])
    captured = capsys.readouterr()
    assert status == 1  # cog.tif could not be converted
    assert "cog.tif" in captured.err and "EPSG" in captured.err
    assert sorted(os.listdir(out)) == ["shade.rumi", "shade.rumi.header", "small_dem_3m_merged.rumi",
                                       "small_dem_3m_merged.rumi.header"]
    assert "shade.tif" in captured.out and "vs raw" in captured.out
    assert "nodata" in captured.out
    for name in ("shade.rumi", "small_dem_3m_merged.rumi"):
        xarray_rumi.validate(out / name, (out / f"{name}.header").read_bytes())
