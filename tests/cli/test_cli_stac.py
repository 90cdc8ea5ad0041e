"""rumi stac and rumi quicklook; DataArray.rumi.quicklook."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import numpy as np
import pytest
import xarray as xr

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


def test_stac_command_one_file_writes_an_item(capsys, tmp_path):
    pystac = pytest.importorskip("pystac")
    path, blob, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    out = tmp_path / "item.json"
    status, _, err = run(capsys, "stac", path, "-o", out, "--datetime", "2024-06-01T00:00:00Z",
                         "--href-prefix", "https://example.com/data")
    assert status == 0 and "wrote" in err
    it = pystac.Item.from_dict(json.loads(out.read_text()))
    assert it.assets["data"].href == "https://example.com/data/scene.rumi"
    assert base64.b64decode(it.assets["data"].extra_fields["rumi:header"]) == blob
    assert it.datetime.isoformat() == "2024-06-01T00:00:00+00:00"


def test_stac_command_several_files_to_stdout(capsys, tmp_path):
    pystac = pytest.importorskip("pystac")
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"s{i}.rumi")
        xarray_rumi.write(paths[-1], np.full((1, 16, 16), i, np.uint8), crs=4326, transform=(1, 0, 0, 0, -1, 0))
    status, out, _ = run(capsys, "stac", *paths, "--datetime", "2024-06-01")
    assert status == 0
    collection = pystac.ItemCollection.from_dict(json.loads(out))
    assert [i.id for i in collection] == ["s0", "s1"]
    cube = xarray_rumi.open_cube(collection)
    assert cube.band_data.values[:, 0, 0, 0].tolist() == [0, 1]


def test_stac_command_nodata(capsys, tmp_path):
    pytest.importorskip("pystac")
    path, _, _ = scene(tmp_path, bands=2, rows=64, cols=64, tile=32)
    status, out, _ = run(capsys, "stac", path, "--datetime", "2024-06-01", "--nodata", "0")
    assert status == 0
    bands = json.loads(out)["assets"]["data"]["raster:bands"]
    assert bands == [{"data_type": "uint16", "nodata": 0}] * 2
    status, out, _ = run(capsys, "stac", path, "--datetime", "2024-06-01")
    assert status == 0 and all("nodata" not in b for b in json.loads(out)["assets"]["data"]["raster:bands"])
    status, _, err = run(capsys, "stac", path, "--datetime", "2024-06-01", "--nodata", "-1")
    assert status == 2 and "nodata -1 is not a value of uint16 samples" in err
    with pytest.raises(SystemExit) as exit_:
        main(["stac", str(path), "--nodata", "none"])
    assert exit_.value.code == 2 and "not a number: 'none'" in capsys.readouterr().err


def test_stac_command_nodata_of_floats(capsys, tmp_path):
    pytest.importorskip("pystac")
    path = tmp_path / "f.rumi"
    xarray_rumi.write(path, np.zeros((1, 16, 16), np.float32), crs=4326, transform=(1, 0, 0, 0, -1, 0))
    for given, recorded in (("nan", "nan"), ("-inf", "-inf"), ("-9999.5", -9999.5)):
        status, out, _ = run(capsys, "stac", path, "--datetime", "2024-06-01", f"--nodata={given}")
        assert status == 0 and json.loads(out)["assets"]["data"]["raster:bands"][0]["nodata"] == recorded


def test_stac_command_on_a_broken_file(capsys, tmp_path):
    pytest.importorskip("pystac")
    bad = tmp_path / "bad.rumi"
    bad.write_bytes(b"II+\x00" + bytes(100))
    status, _, err = run(capsys, "stac", bad)
    assert status == 1 and "rumi stac" in err


def _demo_module():
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location("_cli_demo_helpers", pathlib.Path(__file__).with_name(
        "test_cli_demo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stac_without_pystac_says_what_to_install_and_quicklook_needs_nothing(tmp_path):
    demo = _demo_module()
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    done = demo.rumi_without(["pystac"], "stac", path, "-o", tmp_path / "item.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "rumi stac: needs pystac, which is not installed: pip install \"xarray-rumi[stac]\" (in a clone: " \
           "pip install \".[stac]\")" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "item.json").exists()
    hidden = ["pystac", "PIL", "matplotlib", "imageio", *demo.GEO_EXTRA, *demo.ZARR_EXTRA]
    done = demo.rumi_without(hidden, "quicklook", path, tmp_path / "look.png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_png((tmp_path / "look.png").read_bytes()).shape == (64, 64, 3)
