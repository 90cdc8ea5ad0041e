"""`rumi demo`: the README's first command does what it says."""

from __future__ import annotations

import numpy as np

import xarray_rumi
from xarray_rumi.cli import demo_raster, main


def test_demo_writes_validates_and_reads_back(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    path = tmp_path / "demo.rumi"
    blob = (tmp_path / "demo.rumi.header").read_bytes()
    xarray_rumi.validate(path, blob)
    assert np.array_equal(xarray_rumi.open_image(path, blob).read(), demo_raster())
    assert "read back identical to what was written" in out
    assert "CRS EPSG:32633" in out and "48 chunks of (1, 256, 256)" in out
    assert f"{len(blob)} bytes locate all frames" in out


def test_a_command_without_its_extra_says_what_to_install(monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def without_refs(name, *args, **kwargs):
        if name == "xarray_rumi.virtual.kerchunk":
            raise ModuleNotFoundError("No module named 'kerchunk'", name="kerchunk")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_refs)
    assert main(["refs", "scene.rumi", "-o", "x.json"]) == 2
    err = capsys.readouterr().err
    assert "rumi refs: needs kerchunk" in err and "pip install 'xarray-rumi[zarr]'" in err
