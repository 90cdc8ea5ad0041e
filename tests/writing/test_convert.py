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


# --- CRS identification, --crs ------------------------------------------------------------------------------

def _wkt(name="UTM Zone 33, Northern Hemisphere", false_easting="500000"):
    """EPSG:32633 as WKT1 without its codes, renamed: equivalent to EPSG:32633 but naming no code.

    Another ``false_easting`` makes it a CRS that only resembles EPSG:32633.
    """
    import re

    from pyproj import CRS

    wkt = CRS.from_epsg(32633).to_wkt("WKT1_GDAL").replace("WGS 84 / UTM zone 33N", name)
    wkt = wkt.replace('PARAMETER["false_easting",500000]', f'PARAMETER["false_easting",{false_easting}]')
    return re.sub(r',\s*AUTHORITY\["EPSG","\d+"\]', "", wkt)


def _vrt(tmp_path, wkt, name="wkt.vrt", transform="500000, 10, 0, 5000000, 0, -10"):
    """A VRT whose CRS is exactly ``wkt`` (a GeoTIFF writer would put GDAL's own EPSG guess in its keys)."""
    from xml.sax.saxutils import escape

    data = np.arange(3 * 40 * 50, dtype=np.uint16).reshape(3, 40, 50)
    with rasterio.open(tmp_path / "pixels.tif", "w", driver="GTiff", width=50, height=40, count=3,
                       dtype="uint16") as dst:
        dst.write(data)
    srs = f"<SRS>{escape(wkt)}</SRS>" if wkt else ""
    bands = "".join(
        f'<VRTRasterBand dataType="UInt16" band="{b}"><SimpleSource><SourceFilename relativeToVRT="1">pixels.tif'
        f"</SourceFilename><SourceBand>{b}</SourceBand></SimpleSource></VRTRasterBand>" for b in (1, 2, 3))
    (tmp_path / name).write_text(f'<VRTDataset rasterXSize="50" rasterYSize="40">{srs}'
                                 f"<GeoTransform>{transform}</GeoTransform>{bands}</VRTDataset>")
    return tmp_path / name, data


def test_a_wkt_crs_equivalent_to_an_epsg_code_converts_and_the_summary_names_it(tmp_path, capsys):
    from pyproj import CRS

    source, data = _vrt(tmp_path, _wkt())
    with rasterio.open(source) as src:
        assert CRS.from_wkt(src.crs.to_wkt()).to_epsg(min_confidence=100) is None  # no code of its own
    status = main(["convert", str(source), str(tmp_path / "out.rumi"), "--tile-size", "16"])
    out = capsys.readouterr().out
    assert status == 0
    assert "EPSG:32633" in out and "identifies as equivalent" in out
    image = open_image(tmp_path / "out.rumi")
    assert image.georeferencing.epsg == 32633
    assert image.georeferencing.transform == (10, 0, 500000, 0, -10, 5000000)
    assert np.array_equal(image.read(), data)
    result = convert(source, tmp_path / "again.rumi")
    assert (result.crs, result.crs_source) == ("EPSG:32633", "identified")


def test_identification_takes_only_equivalent_codes():
    from xarray_rumi.writing.convert import CRS_CONFIDENCE, identify_epsg

    assert CRS_CONFIDENCE == 70
    assert identify_epsg(_wkt()) == (32633, "identified")
    assert identify_epsg("EPSG:32633") == (32633, "named")
    resembling = _wkt(false_easting="500000.001")
    # Asked loosely enough, pyproj proposes EPSG:32633 for it; the equivalence check still refuses.
    with pytest.raises(ValueError, match="EPSG"):
        identify_epsg(resembling, min_confidence=25)
    with pytest.raises(ValueError, match="EPSG"):
        identify_epsg(resembling)


def test_a_wkt_crs_with_no_equivalent_is_still_refused(tmp_path, capsys):
    source, _ = _vrt(tmp_path, _wkt(false_easting="500000.001"))
    with pytest.raises(ValueError, match="EPSG") as info:
        convert(source, tmp_path / "out.rumi")
    assert "--crs" in str(info.value) and not (tmp_path / "out.rumi").exists()
    status = main(["convert", str(source), str(tmp_path / "out.rumi")])
    captured = capsys.readouterr()
    assert status == 1 and "EPSG" in captured.err and "%" not in captured.err  # and no progress bar
    assert not (tmp_path / "out.rumi").exists()


def test_crs_option_assigns_like_a_srs(tmp_path, capsys):
    source, data = _vrt(tmp_path, _wkt(false_easting="500000.001"))
    status = main(["convert", str(source), str(tmp_path / "out.rumi"), "--crs", "EPSG:32633"])
    out = capsys.readouterr().out
    assert status == 0 and "EPSG:32633 assigned" in out
    image = open_image(tmp_path / "out.rumi")
    assert image.georeferencing.epsg == 32633 and image.georeferencing.transform[2] == 500000
    assert np.array_equal(image.read(), data)
    # also where the source has a transform and no CRS at all
    bare, _ = _vrt(tmp_path, None, name="bare.vrt")
    with pytest.raises(ValueError, match="no CRS"):
        convert(bare, tmp_path / "bare.rumi")
    assert convert(bare, tmp_path / "bare.rumi", crs=4326).crs == "EPSG:4326"
    with pytest.raises(ValueError, match="EPSG"):
        convert(bare, tmp_path / "x.rumi", crs="+proj=ortho +lat_0=10 +lon_0=20")
    with pytest.raises(ValueError, match="one of them"):
        convert(bare, tmp_path / "x.rumi", crs=4326, drop_georeferencing=True)


def test_scales_and_offsets_are_reported_and_the_raw_values_written(tmp_path):
    source = tmp_path / "kelvin.tif"
    georeferenced = dict(crs="EPSG:4326", transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45))
    with rasterio.open(source, "w", driver="GTiff", width=20, height=10, count=2, dtype="int16", **georeferenced) as dst:
        dst.write(np.full((2, 10, 20), 29315, "int16"))
        dst.scales, dst.offsets = (0.01, 0.01), (-273.15, -273.15)
    result = convert(source, tmp_path / "raw.rumi", tile_size=16)
    assert result.scaling == {"scale_factor": 0.01, "add_offset": -273.15}
    assert (open_image(tmp_path / "raw.rumi").read() == 29315).all()
    plain = tmp_path / "plain.tif"
    with rasterio.open(plain, "w", driver="GTiff", width=20, height=10, count=1, dtype="uint8", **georeferenced) as dst:
        dst.write(np.ones((1, 10, 20), "uint8"))
    assert convert(plain, tmp_path / "plain.rumi").scaling is None


# --- what a GeoTIFF holds beside its pixels that rumi cannot store: a mask band, a colour table ---------------


def _masked_geotiff(path, *, internal: bool):
    """A 32 x 32 uint8 GeoTIFF whose GDAL mask band masks its top half: inside the file, or in ``<path>.msk``."""
    mask = np.zeros((32, 32), "uint8")
    mask[16:] = 255
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=internal):
        with rasterio.open(path, "w", driver="GTiff", width=32, height=32, count=1, dtype="uint8",
                           crs="EPSG:4326", transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45)) as dst:
            dst.write(np.arange(32 * 32, dtype="uint16").reshape(1, 32, 32).astype("uint8"))
            dst.write_mask(mask)
    return path


def _palette_geotiff(path):
    with rasterio.open(path, "w", driver="GTiff", width=32, height=32, count=1, dtype="uint8", crs="EPSG:4326",
                       transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45)) as dst:
        dst.write(np.tile(np.arange(3, dtype="uint8"), (1, 32, 11))[:, :, :32])
        dst.write_colormap(1, {0: (0, 0, 0, 255), 1: (255, 0, 0, 255), 2: (0, 255, 0, 255)})
    return path


@pytest.mark.parametrize("internal, where", [(True, "internal"), (False, "in.tif.msk")])
def test_a_gdal_mask_band_is_reported_and_the_stored_pixels_written(tmp_path, internal, where):
    source = _masked_geotiff(tmp_path / "in.tif", internal=internal)
    assert (tmp_path / "in.tif.msk").exists() != internal
    conversion = convert(source, tmp_path / "out.rumi", tile_size=16)
    assert conversion.mask == where
    with rasterio.open(source) as src:
        assert np.array_equal(open_image(tmp_path / "out.rumi").read(), src.read())   # masked pixels as stored
    assert conversion.palette == ()


def test_a_colour_table_is_reported_and_the_indices_written(tmp_path):
    source = _palette_geotiff(tmp_path / "in.tif")
    conversion = convert(source, tmp_path / "out.rumi", tile_size=16)
    assert conversion.palette == (1,) and conversion.mask is None
    with rasterio.open(source) as src:
        assert np.array_equal(open_image(tmp_path / "out.rumi").read(), src.read())


@pytest.mark.parametrize("name", ["RGB.byte.tif", "RGBA.uint16.tif", "shade.tif"])
def test_nodata_and_alpha_masks_are_not_mask_bands(shared_data, tmp_path, name):
    # a nodata is noted on its own, and an alpha band is written as a band: neither is a mask rumi drops
    conversion = convert(shared_data / name, tmp_path / "out.rumi", tile_size=256)
    assert conversion.mask is None and conversion.palette == ()


def test_a_rumi_source_is_refused_in_one_line_before_gdal_opens_it(tmp_path, capfd):
    xarray_rumi.write(tmp_path / "a.rumi", np.arange(2 * 40 * 30, dtype="uint16").reshape(2, 40, 30), tile_size=16)
    with pytest.raises(ValueError, match=r"a\.rumi: already a rumi file \(a BigTIFF whose tiles are OpenZL frames\); "
                                         "there is nothing to convert"):
        convert(tmp_path / "a.rumi", tmp_path / "b.rumi")
    assert capfd.readouterr().err == ""   # GDAL printed a page of TIFFReadDirectory warnings
    assert sorted(os.listdir(tmp_path)) == ["a.rumi", "a.rumi.header"]


def test_a_bigtiff_that_is_not_rumi_still_converts(tmp_path):
    source = tmp_path / "big.tif"
    with rasterio.open(source, "w", driver="GTiff", width=40, height=30, count=1, dtype="uint16", BIGTIFF="YES",
                       tiled=True, blockxsize=16, blockysize=16, crs="EPSG:4326",
                       transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45)) as dst:
        dst.write(np.arange(1200, dtype="uint16").reshape(1, 30, 40))
    convert(source, tmp_path / "out.rumi", tile_size=16)
    assert np.array_equal(open_image(tmp_path / "out.rumi").read(), np.arange(1200, dtype="uint16").reshape(1, 30, 40))


def _cint32_geotiff(folder, values) -> str:
    """A CInt32 GeoTIFF (rasterio cannot make one itself: GDAL copies it from a raw VRT)."""
    import rasterio.shutil

    raw, vrt, tif = (os.path.join(folder, name) for name in ("x.raw", "x.vrt", "cint32.tif"))
    parts = np.stack([values.real, values.imag], axis=-1).astype("<i4")
    parts.tofile(raw)
    rows, cols = values.shape
    with open(vrt, "w") as f:
        f.write(f'<VRTDataset rasterXSize="{cols}" rasterYSize="{rows}"><SRS>EPSG:4326</SRS>'
                f"<GeoTransform>0, 1, 0, {rows}, 0, -1</GeoTransform>"
                '<VRTRasterBand dataType="CInt32" band="1" subClass="VRTRawRasterBand">'
                '<SourceFilename relativetoVRT="1">x.raw</SourceFilename><ImageOffset>0</ImageOffset>'
                f"<PixelOffset>8</PixelOffset><LineOffset>{8 * cols}</LineOffset><ByteOrder>LSB</ByteOrder>"
                "</VRTRasterBand></VRTDataset>")
    rasterio.shutil.copy(vrt, tif, driver="GTiff")
    return tif


def test_a_cint32_source_is_refused_rather_than_rounded_through_float32(tmp_path):
    values = np.full((4, 4), 2**24 + 1, np.int64) + 1j * np.full((4, 4), -(2**30) + 3, np.int64)
    source = _cint32_geotiff(str(tmp_path), values)
    target = tmp_path / "out.rumi"
    with pytest.raises(ValueError, match="CInt32 samples, which rasterio reads as complex64"):
        convert(source, str(target))
    assert sorted(os.listdir(tmp_path)) == ["cint32.tif", "x.raw", "x.vrt"]  # nothing written


def test_a_cfloat32_source_still_converts(tmp_path):
    import rasterio

    source = str(tmp_path / "cf32.tif")
    values = (np.arange(16) + 1j * np.arange(16)).reshape(1, 4, 4).astype("complex64")
    with rasterio.open(source, "w", driver="GTiff", width=4, height=4, count=1, dtype="complex64",
                       crs="EPSG:4326", transform=rasterio.Affine(1, 0, 0, 0, -1, 4)) as f:
        f.write(values)
    convert(source, str(tmp_path / "out.rumi"))
    np.testing.assert_array_equal(open_image(str(tmp_path / "out.rumi")).read(), values)
