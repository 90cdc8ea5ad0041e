"""`rumi convert`: where each file goes, progress bars, what it says of every file, the summary and its notes."""

from __future__ import annotations

import os
import warnings

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


def test_a_missing_input_is_named_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status = main(["convert", "nope.tif", "out.rumi"])
    assert status == 1
    assert capsys.readouterr().err == "rumi convert: nope.tif: No such file or directory\n"
    assert os.listdir(tmp_path) == []


def test_a_refusal_that_does_not_name_the_input_is_given_its_name(shared_data, tmp_path, capsys):
    assert main(["convert", str(shared_data / "cog.tif"), str(tmp_path / "cog.rumi")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rumi convert: {shared_data / 'cog.tif'}: ") and line.count("cog.tif") == 1


def _scaled_geotiff(path, scales, offsets):
    with rasterio.open(path, "w", driver="GTiff", width=32, height=16, count=len(scales), dtype="int16",
                       crs="EPSG:32633", transform=rasterio.Affine(10, 0, 500000, 0, -10, 5000000)) as dst:
        dst.write(np.full((len(scales), 16, 32), 29315, "int16"))
        dst.scales, dst.offsets = scales, offsets
    return path


def test_the_summary_names_a_scale_and_offset_it_did_not_store(tmp_path, capsys):
    source = _scaled_geotiff(tmp_path / "kelvin.tif", (0.01,), (-273.15,))
    assert main(["convert", str(source), str(tmp_path / "raw.rumi"), "--tile-size", "16"]) == 0
    out = capsys.readouterr().out
    assert ("  note: scale_factor 0.01 and add_offset -273.15 are not stored: rumi has no place for them; "
            "pixel values are written as they are, unscaled") in out
    assert (open_image(tmp_path / "raw.rumi").read() == 29315).all()   # raw, as the GeoTIFF stores them


def test_the_summary_names_per_band_scales_and_says_nothing_of_none(tmp_path, capsys):
    source = _scaled_geotiff(tmp_path / "bands.tif", (0.5, 1.0), (0.0, 0.0))
    with warnings.catch_warnings():
        # the note says it: rioxarray's warning that scales differ is not repeated
        warnings.filterwarnings("error", "(Scales|Offsets) differ", UserWarning)
        assert main(["convert", str(source), str(tmp_path / "bands.rumi"), "--tile-size", "16"]) == 0
    assert "  note: scales (0.5, 1) are not stored" in capsys.readouterr().out
    plain = _scaled_geotiff(tmp_path / "plain.tif", (1.0,), (0.0,))
    assert main(["convert", str(plain), str(tmp_path / "plain.rumi"), "--tile-size", "16"]) == 0
    assert "not stored" not in capsys.readouterr().out


def test_the_scale_note_comes_back_from_parallel_jobs(tmp_path, capsys):
    first = _scaled_geotiff(tmp_path / "a.tif", (0.01,), (0.0,))
    second = _scaled_geotiff(tmp_path / "b.tif", (1.0,), (0.0,))
    assert main(["convert", str(first), str(second), str(tmp_path / "out"), "--tile-size", "16", "-j", "2"]) == 0
    assert capsys.readouterr().out.count("  note: scale_factor 0.01 is not stored") == 1


def test_progress_bars_only_on_a_terminal_and_only_once_work_starts(tmp_path):
    import io

    from xarray_rumi.cli.convert import lazy_bar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    with lazy_bar(terminal, total=4, unit="frame") as update:
        assert terminal.getvalue() == ""  # nothing until work starts
        update(2)
    assert "2/4" in terminal.getvalue()
    refused = Terminal()
    with lazy_bar(refused, total=4, unit="frame"):
        pass  # refused before its first frame
    assert refused.getvalue() == ""
    piped = io.StringIO()
    with lazy_bar(piped, total=4, unit="frame") as update:
        update(4)
    assert piped.getvalue() == ""  # not a terminal: no bar


def test_convert_help_says_what_a_frame_unit_holds_as_the_spec_does():
    # spec, Frames: a tile frame holds one band of one grid position, a cell frame all bands of it
    (subparsers,) = [a for a in _parser()._actions if a.dest == "command"]
    commands = subparsers.choices
    (unit,) = [a for a in commands["convert"]._actions if a.dest == "frame_unit"]
    assert "tile = one band" in unit.help and "cell = all bands" in unit.help


def test_convert_frame_unit_auto_writes_the_smaller_unit_and_tile_stays_the_default(shared_data, tmp_path):
    # RGB.byte.tif: cell frames are >= 3% smaller (docs/writing.md), so auto picks them; the default keeps tiles
    for unit in ("auto", None):
        args = ["convert", str(shared_data / "RGB.byte.tif"), str(tmp_path / f"{unit}.rumi"), "--tile-size", "256"]
        assert main(args + (["--frame-unit", unit] if unit else [])) == 0
    assert open_image(tmp_path / "auto.rumi").grid.frame_unit.name == "CELL"
    assert open_image(tmp_path / "None.rumi").grid.frame_unit.name == "TILE"
    assert os.path.getsize(tmp_path / "auto.rumi") < os.path.getsize(tmp_path / "None.rumi")
    xarray_rumi.validate(tmp_path / "auto.rumi", (tmp_path / "auto.rumi.header").read_bytes())


@pytest.mark.parametrize("spelling", ["same", "relative", "link", "header"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(shared_data, tmp_path, capsys, monkeypatch,
                                                                   spelling):
    # The rumi file is staged and moved into place, so converting a GeoTIFF onto itself
    # "succeeded" and left no GeoTIFF (a new user's first mistake); gdal_translate refuses it.
    source = tmp_path / "dem.tif"
    source.write_bytes((shared_data / "small_dem_3m_merged.tif").read_bytes())
    before = source.read_bytes()
    monkeypatch.chdir(tmp_path)
    if spelling == "link":
        (tmp_path / "link.tif").symlink_to(source)
    target = {"same": str(source), "relative": "./dem.tif", "link": "link.tif",
              "header": str(tmp_path / "dem")}[spelling]
    if spelling == "header":  # the output "dem" writes its blob to "dem.header", which is the source here
        source.rename(tmp_path / "dem.header")
        source = tmp_path / "dem.header"
    assert main(["convert", str(source), target]) == 1
    err = capsys.readouterr().err
    assert "the output is the input" in err and str(source) in err
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([source.name] + (["link.tif"] if spelling == "link"
                                                                                 else []))


@pytest.mark.parametrize("option", [["--tile-size", "0"], ["--tile-size", "-3"], ["--tile-size", "x"], ["-j", "0"]])
def test_sizes_and_counts_below_one_are_usage_errors(shared_data, tmp_path, capsys, option):
    with pytest.raises(SystemExit) as exit_:
        main(["convert", str(shared_data / "small_dem_3m_merged.tif"), str(tmp_path / "t.rumi"), *option])
    assert exit_.value.code == 2
    assert "must be a whole number of at least 1" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_tile_size_past_the_tiff_field_is_a_usage_error(shared_data, tmp_path, capsys):
    # it was refused file by file, exit 1, after each was opened
    with pytest.raises(SystemExit) as exit_:
        main(["convert", str(shared_data / "small_dem_3m_merged.tif"), str(tmp_path / "t.rumi"), "--tile-size", "65536"])
    assert exit_.value.code == 2
    assert "--tile-size: must be at most 65535 px" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _masked_geotiff(path, *, internal: bool):
    mask = np.zeros((16, 32), "uint8")
    mask[8:] = 255
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=internal):
        with rasterio.open(path, "w", driver="GTiff", width=32, height=16, count=1, dtype="uint8",
                           crs="EPSG:32633", transform=rasterio.Affine(10, 0, 500000, 0, -10, 5000000)) as dst:
            dst.write(np.full((1, 16, 32), 7, "uint8"))
            dst.write_mask(mask)
    return path


@pytest.mark.parametrize("internal, place", [(True, "internal to the source"), (False, "in in.tif.msk, beside the source")])
def test_the_summary_names_a_mask_band_it_did_not_store(tmp_path, capsys, internal, place):
    source = _masked_geotiff(tmp_path / "in.tif", internal=internal)
    assert main(["convert", str(source), str(tmp_path / "out.rumi"), "--tile-size", "16"]) == 0
    out = capsys.readouterr().out
    assert f"  note: the GDAL mask band ({place}) is not stored: rumi has no place for it; masked pixels keep " \
           "their stored values and read back as valid" in out


def test_the_summary_names_a_colour_table_it_did_not_store(tmp_path, capsys):
    source = tmp_path / "pal.tif"
    with rasterio.open(source, "w", driver="GTiff", width=32, height=16, count=1, dtype="uint8", crs="EPSG:32633",
                       transform=rasterio.Affine(10, 0, 500000, 0, -10, 5000000)) as dst:
        dst.write(np.ones((1, 16, 32), "uint8"))
        dst.write_colormap(1, {0: (0, 0, 0, 255), 1: (255, 0, 0, 255)})
    assert main(["convert", str(source), str(tmp_path / "out.rumi"), "--tile-size", "16"]) == 0
    out = capsys.readouterr().out
    assert "  note: the colour table (palette) of band 1 is not stored: rumi has no place for it; pixel values " \
           "are the palette's indices, unchanged" in out
    assert "mask band" not in out


def test_the_mask_note_comes_back_from_parallel_jobs(tmp_path, capsys):
    sources = [_masked_geotiff(tmp_path / "a.tif", internal=True), _masked_geotiff(tmp_path / "b.tif", internal=False)]
    assert main(["convert", *map(str, sources), str(tmp_path / "out"), "--tile-size", "16", "-j", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("note: the GDAL mask band") == 2 and "in b.tif.msk" in out


def test_a_rumi_input_is_named_as_one_in_one_line(tmp_path, capfd):
    xarray_rumi.write(tmp_path / "a.rumi", np.arange(2 * 40 * 30, dtype="uint16").reshape(2, 40, 30), tile_size=16)
    assert main(["convert", str(tmp_path / "a.rumi"), str(tmp_path / "b.rumi")]) == 1
    captured = capfd.readouterr()
    assert captured.err == (f"rumi convert: {tmp_path / 'a.rumi'}: already a rumi file (a BigTIFF whose tiles are "
                            "OpenZL frames); there is nothing to convert (rumi info describes it)\n")
    assert sorted(os.listdir(tmp_path)) == ["a.rumi", "a.rumi.header"]


def test_a_rumi_input_among_others_is_named_and_the_others_converted(shared_data, tmp_path, capfd):
    xarray_rumi.write(tmp_path / "a.rumi", np.zeros((40, 30), "uint8"), tile_size=16)
    status = main(["convert", str(tmp_path / "a.rumi"), str(shared_data / "shade.tif"), str(tmp_path / "out"),
                   "--tile-size", "256", "-j", "2"])
    captured = capfd.readouterr()
    assert status == 1
    assert captured.err.splitlines() == [f"rumi convert: {tmp_path / 'a.rumi'}: already a rumi file (a BigTIFF whose "
                                         "tiles are OpenZL frames); there is nothing to convert (rumi info describes it)"]
    assert sorted(os.listdir(tmp_path / "out")) == ["shade.rumi", "shade.rumi.header"]


def test_a_rumi_input_over_http_is_named_as_one(tmp_path, http_server, capfd, monkeypatch):
    monkeypatch.setenv("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
    xarray_rumi.write(tmp_path / "a.rumi", np.zeros((40, 30), "uint8"), tile_size=16)
    url = f"{http_server.url}/a.rumi"
    assert main(["convert", url, str(tmp_path / "b.rumi")]) == 1
    assert capfd.readouterr().err == (f"rumi convert: {url}: already a rumi file (a BigTIFF whose tiles are OpenZL "
                                      "frames); there is nothing to convert (rumi info describes it)\n")
    assert not (tmp_path / "b.rumi").exists()


def test_two_inputs_of_one_name_are_refused_as_every_command_refuses_outputs(shared_data, tmp_path, capsys):
    """Exit 1, as header, refs, quicklook and stac refuse outputs that would replace each other; nothing written."""
    for folder in ("d1", "d2"):
        os.makedirs(tmp_path / folder)
        os.symlink(shared_data / "RGB.byte.tif", tmp_path / folder / "x.tif")
    out = tmp_path / "out"
    assert main(["convert", str(tmp_path / "d1" / "x.tif"), str(tmp_path / "d2" / "x.tif"), str(out)]) == 1
    assert "same output name" in capsys.readouterr().err and not out.exists()


def test_several_inputs_make_their_output_folder_but_no_folder_above_it(shared_data, tmp_path, capsys):
    out = tmp_path / "missing" / "out"
    assert main(["convert", str(shared_data / "RGB.byte.tif"), str(shared_data / "shade.tif"), str(out)]) == 1
    err = capsys.readouterr().err
    assert "missing does not exist" in err and not (tmp_path / "missing").exists()
    out = tmp_path / "out"
    assert main(["convert", str(shared_data / "RGB.byte.tif"), str(shared_data / "shade.tif"), str(out)]) == 0
    assert sorted(os.listdir(out)) == ["RGB.byte.rumi", "RGB.byte.rumi.header", "shade.rumi", "shade.rumi.header"]
