"""stac/quicklook.py: strided sampling (only the frames holding a sample are read), the PNG writer, DataArray.rumi.quicklook."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from quicklook_samples import read_png, scene

import xarray_rumi
from xarray_rumi.stac.quicklook import encode_png, write_quicklook


def test_png_writer_round_trips():
    rng = np.random.default_rng(1)
    grey, rgb = rng.integers(0, 256, (7, 5), np.uint8), rng.integers(0, 256, (4, 9, 3), np.uint8)
    np.testing.assert_array_equal(read_png(encode_png(grey)), grey)
    np.testing.assert_array_equal(read_png(encode_png(rgb)), rgb)
    with pytest.raises(ValueError):
        encode_png(np.zeros((2, 2, 5), np.uint8))


def test_a_quicklook_replaces_its_file_whole(tmp_path):
    """Staged and renamed into place: a reader holding the previous file keeps it whole, never a half-written PNG."""
    out = tmp_path / "look.png"
    out.write_bytes(b"previous")
    (tmp_path / "held.png").hardlink_to(out)
    pixels = np.arange(6, dtype=np.uint8).reshape(2, 3)
    write_quicklook(str(out), pixels)
    assert (tmp_path / "held.png").read_bytes() == b"previous"
    np.testing.assert_array_equal(read_png(out.read_bytes()), pixels)
    with pytest.raises(FileNotFoundError):
        write_quicklook(str(tmp_path / "no" / "such" / "look.png"), pixels)


def test_png_opens_in_pillow_when_it_is_there(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    path = tmp_path / "a.png"
    path.write_bytes(encode_png(np.arange(12, dtype=np.uint8).reshape(3, 4)))
    with image_module.open(path) as image:
        assert image.size == (4, 3) and image.mode == "L"


def test_quicklook_reads_only_frames_holding_samples(tmp_path, monkeypatch):
    from xarray_rumi.reading.image import RumiImage
    from xarray_rumi.stac.quicklook import quicklook

    path, blob, _ = scene(tmp_path, bands=4, rows=1024, cols=1024, tile=64, frame_unit="cell")
    decoded = []
    original = RumiImage.decode
    monkeypatch.setattr(RumiImage, "decode", lambda self, k, payload, out=None: decoded.append(k) or
                        original(self, k, payload, out))
    pixels = quicklook(path, blob, bands=[2], size=8)  # stride 128: every other tile row and column
    assert pixels.shape == (8, 8)
    assert len(decoded) == 8 * 8  # of 16 x 16 positions x 4 bands = 1024 frames


def test_data_array_quicklook(tmp_path):
    path, blob, data = scene(tmp_path, rows=300, cols=200, tile=64)
    da = xr.open_dataset(path, engine="rumi", header=blob).band_data
    pixels = da.rumi.quicklook(size=100, bands=[1, 2, 3])
    assert pixels.shape == (100, 67, 3) and pixels.dtype == np.uint8 and pixels.std() > 10
    grey = xr.DataArray(data[0], dims=("y", "x")).rumi.quicklook(size=50)
    assert grey.shape == (50, 33)
    out = tmp_path / "da.png"
    assert da.rumi.quicklook(out, size=100) is None
    assert read_png(out.read_bytes()).shape == (100, 67, 3)


def test_constant_band_is_not_an_error(tmp_path):
    path = tmp_path / "c.rumi"
    xarray_rumi.write(path, np.full((1, 32, 32), 7, np.uint16), tile_size=16)
    from xarray_rumi.stac.quicklook import quicklook

    pixels = quicklook(path)
    assert pixels.shape == (32, 32) and (pixels == 128).all()   # one value: mid grey, not "the lowest" black



def test_a_single_pixel_is_mid_grey(tmp_path):
    from xarray_rumi.stac.quicklook import quicklook

    path = tmp_path / "one.rumi"
    xarray_rumi.write(path, np.array([[[40000]]], np.uint16), tile_size=16)
    assert quicklook(path).tolist() == [[128]]
    xarray_rumi.write(path, np.array([[[1.0]], [[2.0]], [[3.0]]], np.float32), tile_size=16)
    assert quicklook(path).tolist() == [[[128, 128, 128]]]


@pytest.mark.parametrize("no_data", [np.inf, -np.inf, np.nan])
def test_samples_that_are_not_finite_are_transparent_not_the_minimum(tmp_path, no_data):
    from xarray_rumi.stac.quicklook import quicklook

    data = np.tile(np.linspace(0, 100, 32, dtype=np.float32), (1, 32, 1))
    data[0, :4, :4] = no_data
    path = tmp_path / "f.rumi"
    xarray_rumi.write(path, data, tile_size=16)
    pixels = quicklook(path)
    assert pixels.shape == (32, 32, 2)   # grey and alpha
    grey, alpha = pixels[..., 0], pixels[..., 1]
    assert (alpha[:4, :4] == 0).all() and (alpha[4:] == 255).all() and (alpha[:, 4:] == 255).all()
    assert grey[10, 0] == 0 and grey[10, -1] == 255   # the stretch is of the finite samples


def test_no_data_in_rgb_and_in_the_png(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    from xarray_rumi.stac.quicklook import stretch

    samples = np.arange(3 * 4 * 5, dtype=np.float64).reshape(3, 4, 5)
    samples[1, 2, 3] = np.inf   # one band of one pixel: the pixel has no data
    pixels = stretch(samples)
    assert pixels.shape == (4, 5, 4) and pixels[..., 3].tolist() == [
        [255] * 5, [255] * 5, [255, 255, 255, 0, 255], [255] * 5]
    out = tmp_path / "a.png"
    out.write_bytes(encode_png(pixels))
    with image_module.open(out) as image:
        assert image.mode == "RGBA" and np.array_equal(np.asarray(image), pixels)
    with image_module.open(__import__("io").BytesIO(encode_png(pixels[..., [0, 3]]))) as image:
        assert image.mode == "LA"


def test_a_ramp_across_the_float64_range_is_stretched_without_overflow(tmp_path, recwarn):
    from xarray_rumi.stac.quicklook import quicklook

    path = tmp_path / "wide.rumi"
    ramp = np.linspace(-1.0, 1.0, 64 * 64).reshape(1, 64, 64) * 1.5e308
    xarray_rumi.write(path, ramp, tile_size=32)
    pixels = quicklook(path, percentiles=(0, 100))
    assert [w.message for w in recwarn if issubclass(w.category, RuntimeWarning)] == []
    assert pixels.min() == 0 and pixels.max() == 255 and len(np.unique(pixels)) == 256
    assert pixels[32, 0] == 128 or pixels[32, 0] == 127   # zero is half-way


@pytest.mark.parametrize("percentiles", [(98, 2), (50, 50), (5,), (-1, 50), (2, 101), "ab"])
def test_percentiles_out_of_order_or_range_are_refused(tmp_path, percentiles):
    from xarray_rumi.stac.quicklook import quicklook

    path, blob, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    with pytest.raises(ValueError, match=r"percentiles are \(low, high\) with 0 <= low < high <= 100"):
        quicklook(path, blob, percentiles=percentiles)


def test_a_size_under_one_pixel_is_refused(tmp_path):
    da = xr.DataArray(np.arange(12.0).reshape(3, 4), dims=("y", "x"))
    with pytest.raises(ValueError, match="a quicklook's size must be at least 1 pixel, got 0"):
        da.rumi.quicklook(size=0)


def test_a_quicklook_makes_no_missing_folder(tmp_path):
    da = xr.DataArray(np.arange(12.0).reshape(3, 4), dims=("y", "x"))
    with pytest.raises(FileNotFoundError):
        da.rumi.quicklook(tmp_path / "missing" / "look.png")
    assert not (tmp_path / "missing").exists()
