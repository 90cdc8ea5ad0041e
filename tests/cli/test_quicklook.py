"""`rumi quicklook`, and what it calls: stac/quicklook.py's sampling and PNG writer, DataArray.rumi.quicklook."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
import xarray as xr
from without_extras import GEO_EXTRA, ZARR_EXTRA, rumi_without

import xarray_rumi
from xarray_rumi.cli import main
from xarray_rumi.stac.quicklook import encode_png


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def read_png(data: bytes) -> np.ndarray:
    """Decode what encode_png writes (8-bit grey or RGB, filter 0), checking every chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind, body = data[position + 4:position + 8], data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        position += 12 + length
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and colour in (0, 2) and b"IEND" in chunks
    channels = 3 if colour == 2 else 1
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + width * channels)
    assert (raw[:, 0] == 0).all()
    pixels = raw[:, 1:].reshape(height, width, channels)
    return pixels[..., 0] if channels == 1 else pixels


def scene(tmp_path, bands=4, rows=600, cols=900, tile=128, **kwargs):
    y, x = np.mgrid[0:rows, 0:cols]
    data = np.stack([(x * (b + 1) + y * 3) % 4000 for b in range(bands)]).astype(np.uint16)
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, data, tile_size=tile, crs=32633, transform=(10, 0, 500000, 0, -10, 5000000),
                             **kwargs)
    return path, blob, data


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


def test_quicklook_command_rgb(capsys, tmp_path):
    path, _, _ = scene(tmp_path)
    out = tmp_path / "look.png"
    status, text, _ = run(capsys, "quicklook", path, out, "--size", 300, "--bands", "3,2,1")
    assert status == 0 and "300 x 200 px, RGB" in text
    pixels = read_png(out.read_bytes())
    assert pixels.shape == (200, 300, 3)
    assert pixels.min() == 0 and pixels.max() == 255 and len(np.unique(pixels)) > 50
    assert not np.array_equal(pixels[..., 0], pixels[..., 2])  # bands 3 and 1 differ


def test_quicklook_default_size_and_grey(capsys, tmp_path):
    path, _, _ = scene(tmp_path, bands=1, rows=2100, cols=1500, tile=512)
    out = tmp_path / "look.png"
    assert run(capsys, "quicklook", path, out)[0] == 0
    pixels = read_png(out.read_bytes())
    assert pixels.ndim == 2 and max(pixels.shape) <= 1024 and max(pixels.shape) > 512
    assert pixels.std() > 10


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


def test_quicklook_refuses_two_bands(capsys, tmp_path):
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    status, _, err = run(capsys, "quicklook", path, tmp_path / "x.png", "--bands", "1,2")
    assert status == 2 and "one band (grey) or three (RGB)" in err
    status, _, err = run(capsys, "quicklook", path, tmp_path / "x.png", "--bands", "9")
    assert status == 2 and "not among the image's bands" in err


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


def test_quicklook_needs_no_extra(tmp_path):
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    hidden = ["pystac", "PIL", "matplotlib", "imageio", *GEO_EXTRA, *ZARR_EXTRA]
    done = rumi_without(hidden, "quicklook", path, tmp_path / "look.png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_png((tmp_path / "look.png").read_bytes()).shape == (64, 64, 3)
