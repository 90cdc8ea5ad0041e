"""docs/stac.md runs: every ```python block, in order, in one namespace; and what it says of other readers holds."""

from __future__ import annotations

import numpy as np
import pytest
from doc_blocks import run_blocks

import xarray_rumi
import xarray_rumi.stac

#: What Items of xarray-rumi 0.1.0's first builds said for the media type; still read.
LEGACY_MEDIA_TYPE = "image/tiff; application=rumi"


def test_stac_page_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("pystac")
    pytest.importorskip("stac_geoparquet")
    monkeypatch.chdir(tmp_path)
    assert run_blocks("docs/stac.md") >= 2


# What docs/stac.md ("Media type, and what odc-stac and stackstac do with it") says of other readers.
# These assert other packages' behaviour as it is today: when one fails, that package changed, and the
# page must say what it does now.
UPDATE_THE_PAGE = "update docs/stac.md, section 'Media type, and what odc-stac and stackstac do with it'"


def _tile_byte_counts(path):
    import tifffile

    with tifffile.TiffFile(path) as tiff:
        return list(tiff.pages[0].tags["TileByteCounts"].value)


def test_gdal_fails_on_frames_shorter_than_a_raw_tile(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    path = str(tmp_path / "smooth.rumi")
    xarray_rumi.write(path, np.zeros((1, 256, 256), "uint16"), tile_size=128, crs=32633,
                      transform=(10, 0, 399960, 0, -10, 5000040))
    assert max(_tile_byte_counts(path)) < 128 * 128 * 2
    with rasterio.open(path) as dataset:
        try:
            dataset.read(1)
        except rasterio.errors.RasterioIOError:
            return
    pytest.fail(f"GDAL reads frames shorter than a raw tile now: {UPDATE_THE_PAGE}")


def test_gdal_reads_frames_as_long_as_a_raw_tile_as_wrong_pixels(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    path = str(tmp_path / "noise.rumi")
    noise = np.random.default_rng(0).integers(0, 256, (1, 256, 256)).astype("uint8")
    xarray_rumi.write(path, noise, tile_size=128, crs=32633, transform=(10, 0, 399960, 0, -10, 5000040))
    assert min(_tile_byte_counts(path)) >= 128 * 128   # OpenZL cannot shrink noise
    with rasterio.open(path) as dataset:
        read = dataset.read(1)   # no error
    assert (read != noise[0]).mean() > 0.9, f"GDAL no longer returns the frames' bytes as pixels: {UPDATE_THE_PAGE}"


def test_odc_stac_alone_leaves_a_rumi_asset_out_and_takes_an_old_image_tiff_one(tmp_path):
    odc_stac = pytest.importorskip("odc.stac")   # the odc extra
    pytest.importorskip("pystac")

    path = str(tmp_path / "scene.rumi")
    blob = xarray_rumi.write(path, np.zeros((2, 64, 64), "uint16"), tile_size=32, crs=32633,
                             transform=(10, 0, 399960, 0, -10, 5000040))
    item = xarray_rumi.stac.item(path, blob, datetime="2024-05-01T10:00:00Z")
    assert set(odc_stac.parse_item(item).bands) == set(), f"odc-stac takes non-image assets now: {UPDATE_THE_PAGE}"
    item.assets["data"].media_type = LEGACY_MEDIA_TYPE   # what Items said before: odc-stac takes them for GeoTIFFs
    parsed = odc_stac.parse_item(item)
    assert set(parsed.bands) == {("data", 1), ("data", 2)}, f"odc-stac skips image/tiff assets now: {UPDATE_THE_PAGE}"
