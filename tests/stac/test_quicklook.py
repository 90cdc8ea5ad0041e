"""stac/quicklook.py: strided sampling (only the frames holding a sample are read), the PNG writer, DataArray.rumi.quicklook."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from quicklook_samples import read_png, scene

import xarray_rumi
from xarray_rumi.stac.quicklook import encode_png


def test_png_writer_round_trips():
    rng = np.random.default_rng(1)
    grey, rgb = rng.integers(0, 256, (7, 5), np.uint8), rng.integers(0, 256, (4, 9, 3), np.uint8)
    np.testing.assert_array_equal(read_png(encode_png(grey)), grey)
    np.testing.assert_array_equal(read_png(encode_png(rgb)), rgb)
    with pytest.raises(ValueError):
        encode_png(np.zeros((2, 2, 2), np.uint8))


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

    assert (quicklook(path) == 0).all()
