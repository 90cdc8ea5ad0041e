"""`rumi quicklook` (the library's sampling and PNG writer are tested in tests/stac/test_quicklook.py)."""

from __future__ import annotations

import numpy as np
import pytest
from quicklook_samples import read_png, scene
from without_extras import GEO_EXTRA, ZARR_EXTRA, rumi_without
from cli_runs import run

import xarray_rumi
from xarray_rumi.cli import main


def test_quicklook_command_rgb(capsys, tmp_path):
    path, _, _ = scene(tmp_path)
    out = tmp_path / "look.png"
    status, text, _ = run(capsys, "quicklook", path, "-o", out, "--size", 300, "--bands", "3,2,1")
    assert status == 0 and "300 x 200 px, RGB" in text
    pixels = read_png(out.read_bytes())
    assert pixels.shape == (200, 300, 3)
    assert pixels.min() == 0 and pixels.max() == 255 and len(np.unique(pixels)) > 50
    assert not np.array_equal(pixels[..., 0], pixels[..., 2])  # bands 3 and 1 differ


def test_quicklook_default_size_and_grey(capsys, tmp_path):
    path, _, _ = scene(tmp_path, bands=1, rows=2100, cols=1500, tile=512)
    out = tmp_path / "look.png"
    assert run(capsys, "quicklook", path, "-o", out)[0] == 0
    pixels = read_png(out.read_bytes())
    assert pixels.ndim == 2 and max(pixels.shape) <= 1024 and max(pixels.shape) > 512
    assert pixels.std() > 10


def test_quicklook_refuses_two_bands(capsys, tmp_path):
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    status, _, err = run(capsys, "quicklook", path, "-o", tmp_path / "x.png", "--bands", "1,2")
    assert status == 2 and "one band (grey) or three (RGB)" in err
    status, _, err = run(capsys, "quicklook", path, "-o", tmp_path / "x.png", "--bands", "9")
    assert status == 2 and "not among the image's bands" in err


def test_quicklook_refuses_a_size_below_one(capsys, tmp_path):
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    with pytest.raises(SystemExit) as exit_:  # argparse's usage error
        main(["quicklook", str(path), "-o", str(tmp_path / "x.png"), "--size", "0"])
    assert exit_.value.code == 2
    assert "--size: must be a whole number of at least 1, got '0'" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_quicklook_needs_no_extra(tmp_path):
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    hidden = ["pystac", "PIL", "matplotlib", "imageio", *GEO_EXTRA, *ZARR_EXTRA]
    done = rumi_without(hidden, "quicklook", path, "-o", tmp_path / "look.png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_png((tmp_path / "look.png").read_bytes()).shape == (64, 64, 3)


@pytest.mark.parametrize("option, value, expected", [
    ("--percentiles", "98,2", "argument --percentiles: must be two percentiles LOW,HIGH with 0 <= LOW < HIGH <= 100 "
                              "(e.g. 2,98), got '98,2'"),
    ("--percentiles", "5", "argument --percentiles: must be two percentiles LOW,HIGH with 0 <= LOW < HIGH <= 100 "
                           "(e.g. 2,98), got '5'"),
    ("--bands", "a", "argument --bands: must be 1-based band numbers, one or three comma-separated (e.g. 4,3,2), "
                     "got 'a'"),
    ("--bands", "0,1,2", "argument --bands: must be 1-based band numbers"),
    ("--header", "", "argument --header: must name a header blob file (a path or URL), got ''"),
])
def test_quicklook_says_what_it_expects(capsys, tmp_path, option, value, expected):
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    with pytest.raises(SystemExit) as exit_:   # argparse's usage error
        main(["quicklook", str(path), "-o", str(tmp_path / "x.png"), option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"rumi quicklook: error: {expected}" in err and "Traceback" not in err
    assert not (tmp_path / "x.png").exists()


def test_quicklook_of_a_constant_image_says_grey(capsys, tmp_path):
    path = tmp_path / "c.rumi"
    xarray_rumi.write(path, np.full((1, 20, 30), 3.5, np.float32), tile_size=16)
    out = tmp_path / "c.png"
    status, text, _ = run(capsys, "quicklook", path, "-o", out)
    assert status == 0 and "30 x 20 px, grey" in text
    assert (read_png(out.read_bytes()) == 128).all()


def test_quicklook_with_no_data_says_alpha(capsys, tmp_path):
    path = tmp_path / "n.rumi"
    data = np.arange(20 * 30, dtype=np.float64).reshape(1, 20, 30)
    data[0, 0, 0] = np.inf
    xarray_rumi.write(path, data, tile_size=16)
    status, text, _ = run(capsys, "quicklook", path, "-o", tmp_path / "n.png")
    assert status == 0 and "30 x 20 px, grey with alpha (no data transparent)" in text
