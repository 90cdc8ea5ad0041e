"""`rumi info`: what a file holds, as text; with a blob or without georeferencing; a broken file."""

from __future__ import annotations

import json

import numpy as np
from _rumi_bytes import make, ramp, save
from cli_runs import run

import xarray_rumi
from xarray_rumi.cli import main


def test_info(capsys, written):
    path, blob, data = written
    status, out, _ = run(capsys, "info", path)
    assert status == 0
    for expected in ("3 bands x 40 rows x 50 columns", "uint16 (sample_format 1, 16 bits)", "frame unit   tile",
                     "4 x 3 of 16 x 16 px, 36 frames", "EPSG:32618 (projected), pixel is area",
                     "30, 0, 500000, 0, -30, 4000000", f"{len(data)} bytes for {3 * 40 * 50 * 2} raw",
                     f"blob {len(blob)} bytes"):
        assert expected in out, expected
    header_path = save(written[0].parent, blob, "f.header")
    status, with_blob, _ = run(capsys, "info", path, "--header", header_path)
    assert status == 0 and with_blob == out


def test_info_without_georeferencing(capsys, tmp_path):
    path, _, _ = make(tmp_path, ramp((1, 8, 8), "float32"), tile_size=8, frame_unit="cell")
    status, out, _ = run(capsys, "info", path)
    assert status == 0 and "crs          none" in out and "float32" in out


def test_info_on_a_broken_file(capsys, written):
    path, _, data = written
    status, _, err = run(capsys, "info", save(path.parent, data[:200], "short.rumi"))
    assert status == 1 and "file-profile.truncated" in err


def test_info_json(capsys, tmp_path):
    path, blob, _ = make(tmp_path, ramp((3, 40, 50)), tile_size=16, crs=32618,
                         transform=(30, 0, 500000, 0, -30, 4000000))
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bands"] == 3 and info["rows"] == 40 and info["columns"] == 50
    assert info["sample_type"] == "uint16" and info["frame_count"] == 36 and info["tiles"] == [3, 4]
    assert info["crs"] == "EPSG:32618" and info["transform"] == [30, 0, 500000, 0, -30, 4000000]
    assert info["raster_type"] == "area" and info["blob_bytes"] == len(blob)
    assert info["file_size"] == path.stat().st_size


def test_info_json_without_crs(capsys, tmp_path):
    path, _, _ = make(tmp_path, ramp((1, 8, 8), "float32"), tile_size=8)
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["crs"] is None and info["transform"] is None and info["dtype"] == "float32"


def test_info_prints_the_transform_in_full(capsys, tmp_path):
    path = tmp_path / "swiss.rumi"
    transform = (0.1, 0.0, 2826915.0, 0.0, -0.1, 1181234.567890123)
    xarray_rumi.write(path, np.zeros((1, 8, 8), np.uint8), crs=2056, transform=transform)
    status, out, _ = run(capsys, "info", path)
    assert status == 0 and "transform    0.1, 0, 2826915, 0, -0.1, 1181234.567890123\n" in out
    status, out, _ = run(capsys, "info", path, "--json")
    assert status == 0 and json.loads(out)["transform"] == list(transform)
    assert "1181234.567890123" in out
