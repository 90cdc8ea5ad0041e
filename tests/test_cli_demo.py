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
