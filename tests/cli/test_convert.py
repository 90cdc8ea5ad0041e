"""`rumi convert`: where each file goes, progress bars, what it says of every file, the summary and its notes."""

from __future__ import annotations

import os

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.cli import _parser, main
from xarray_rumi.reading.open import open_image

rasterio = pytest.importorskip("rasterio")


def test_cli_converts_many_files_and_reports(shared_data, tmp_path, capsys):
    out = tmp_path / "out"
    status = main(["convert", str(shared_data / "shade.tif"), str(shared_data / "small_dem_3m_merged.tif"),
                   str(shared_data / "cog.tif"), str(out), "--tile-size", "256", "-j", "2"])
    captured = capsys.readouterr()
    assert status == 1  # cog.tif could not be converted
    assert "cog.tif" in captured.err and "EPSG" in captured.err
    assert sorted(os.listdir(out)) == ["shade.rumi", "shade.rumi.header", "small_dem_3m_merged.rumi",
                                       "small_dem_3m_merged.rumi.header"]
    assert "shade.tif" in captured.out and "vs raw" in captured.out
    assert "nodata" in captured.out
    for name in ("shade.rumi", "small_dem_3m_merged.rumi"):
        xarray_rumi.validate(out / name, (out / f"{name}.header").read_bytes())


def test_converts_from_a_url_to_an_fsspec_target(tmp_path, http_server, capsys, monkeypatch):
    import fsspec

    # GDAL lists a URL's "directory" on open unless told not to (as for any cloud source); the test
    # server answers that listing badly, and GDAL would wait for it.
    monkeypatch.setenv("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
    monkeypatch.setenv("GDAL_HTTP_TIMEOUT", "20")
    source = tmp_path / "in.tif"
    data = np.arange(2 * 30 * 40, dtype=np.int16).reshape(2, 30, 40)
    with rasterio.open(source, "w", driver="GTiff", width=40, height=30, count=2, dtype="int16", crs="EPSG:4326",
                       transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45)) as dst:
        dst.write(data)
    status = main(["convert", f"{http_server.url}/in.tif", "memory://converted/out.rumi", "--tile-size", "16"])
    assert status == 0, capsys.readouterr().err
    assert http_server.get_requests()  # rasterio read the source over HTTP
    blob = fsspec.filesystem("memory").cat("/converted/out.rumi.header")
    image = open_image("memory://converted/out.rumi", blob)
    assert np.array_equal(image.read(), data) and image.georeferencing.epsg == 4326


def test_progress_bars_only_on_a_terminal_and_only_once_work_starts(tmp_path):
    import io

    from xarray_rumi.cli.convert import LazyBar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    with LazyBar(terminal, total=4, unit="frame") as bar:
        assert terminal.getvalue() == ""  # nothing until work starts
        bar.update(2)
    assert "2/4" in terminal.getvalue()
    refused = Terminal()
    with LazyBar(refused, total=4, unit="frame"):
        pass  # refused before its first frame
    assert refused.getvalue() == ""
    piped = io.StringIO()
    with LazyBar(piped, total=4, unit="frame") as bar:
        bar.update(4)
    assert piped.getvalue() == ""  # not a terminal: no bar


def test_convert_help_says_what_a_frame_unit_holds_as_the_spec_does():
    # spec, Frames: a tile frame holds one band of one grid position, a cell frame all bands of it
    (subparsers,) = [a for a in _parser()._actions if a.dest == "command"]
    commands = subparsers.choices
    (unit,) = [a for a in commands["convert"]._actions if a.dest == "frame_unit"]
    assert "tile = one band" in unit.help and "cell = all bands" in unit.help
