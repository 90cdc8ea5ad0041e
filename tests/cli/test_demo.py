"""`rumi demo [-o DIR]` works after a plain install (no extra) and writes where it is told."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from without_extras import GEO_EXTRA, ZARR_EXTRA, rumi_without

import xarray_rumi
from xarray_rumi.cli.demo import demo_raster


def test_demo_writes_validates_and_reads_back_without_any_extra(tmp_path):
    done = rumi_without(ZARR_EXTRA + GEO_EXTRA, "demo", "-o", tmp_path / "kept", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    out = done.stdout
    path = tmp_path / "kept" / "demo.rumi"
    blob = (tmp_path / "kept" / "demo.rumi.header").read_bytes()
    xarray_rumi.validate(path, blob)
    assert np.array_equal(xarray_rumi.open_image(path, blob).read(), demo_raster())
    assert "read back identical to what was written" in out
    assert "CRS EPSG:32633" in out and "48 chunks of (1, 256, 256)" in out
    assert f"{len(blob)} bytes locate all frames" in out
    assert f"wrote     {path}: " in out and f"kept      both in {tmp_path / 'kept'}" in out


def test_demo_writes_into_the_current_directory_and_leaves_nothing_elsewhere(tmp_path):
    """What the README does next (`rumi quicklook demo.rumi ...`) finds the demo's files where it runs."""
    here, temporary = tmp_path / "here", tmp_path / "tmp"
    here.mkdir(), temporary.mkdir()
    done = subprocess.run([sys.executable, "-m", "xarray_rumi.cli", "demo"], cwd=here, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in here.iterdir()) == ["demo.rumi", "demo.rumi.header"]
    assert list(temporary.iterdir()) == []
    assert "wrote     ./demo.rumi: " in done.stdout and f"kept      both in {here}" in done.stdout
    xarray_rumi.validate(here / "demo.rumi", (here / "demo.rumi.header").read_bytes())


def test_demo_makes_its_folder_but_not_the_folders_above_it(tmp_path, capsys):
    from cli_runs import run

    status, _, err = run(capsys, "demo", "-o", tmp_path / "missing" / "kept")
    assert status == 1
    assert err == (f"rumi demo: cannot write {tmp_path / 'missing' / 'kept'}: the folder {tmp_path / 'missing'} "
                   "does not exist (create it first)\n")
    assert not (tmp_path / "missing").exists()
