"""`rumi stac`: an Item for one file, an ItemCollection for several, --nodata, broken files, no pystac."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from cli_runs import run
from quicklook_samples import scene
from without_extras import rumi_without

import xarray_rumi
from xarray_rumi.cli import main


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


def test_stac_without_pystac_says_what_to_install(tmp_path):
    path, _, _ = scene(tmp_path, rows=64, cols=64, tile=32)
    done = rumi_without(["pystac"], "stac", path, "-o", tmp_path / "item.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "rumi stac: needs pystac, which is not installed: pip install \"xarray-rumi[stac]\" (in a clone: " \
           "pip install \".[stac]\")" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "item.json").exists()
