"""``rumi`` itself (cli/__init__.py): what it says when something is wrong (the path it could not read or write,
one line, the right exit status, nothing at all when the reader of its output leaves early), and the commands whose
extra is not installed, listed anyway and naming what to install, in both forms (from an index, from a clone)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from without_extras import GEO_EXTRA, looked_for, rumi_without
from cli_runs import needs, run, write_scene

import xarray_rumi
from xarray_rumi.cli import READER_GONE, install_hint, main

#: Each command that reads one rumi file, with the arguments that follow the file (an output where needed).
READERS = {
    "info": [], "validate": [], "header": [], "stac": [], "quicklook": ["-o", "out.png"], "refs": [],
}


def rumi_command() -> str:
    return shutil.which("rumi") or str(Path(sys.executable).with_name("rumi"))


@pytest.mark.parametrize("command", READERS)
def test_every_command_names_the_file_it_cannot_read(capsys, tmp_path, monkeypatch, command):
    needs(command)
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, command, "nope.rumi", *READERS[command])
    lines = (out + err).strip().splitlines()
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(f"rumi {command}: cannot read nope.rumi: "), lines


def test_a_missing_header_blob_is_named_not_the_file(capsys, scene):
    status, _, err = run(capsys, "info", scene, "--header", scene.parent / "absent.header")
    assert status == 1 and f"cannot read {scene.parent / 'absent.header'}: " in err


@pytest.mark.parametrize("command", ["stac", "refs"])
def test_several_files_each_unreadable_one_is_named(capsys, tmp_path, scene, command):
    needs(command)
    missing, damaged = tmp_path / "missing.rumi", tmp_path / "damaged.rumi"
    damaged.write_bytes(b"\x3f\xa0" + bytes(300))
    extra = ["--cube", "t", "-o", tmp_path / "cube.json"] if command == "refs" else []
    status, out, err = run(capsys, command, scene, missing, damaged, *extra)
    assert status == 1 and out == ""
    assert err.splitlines() == [
        f"rumi {command}: cannot read {missing}: [Errno 2] No such file or directory: '{missing}'",
        f"rumi {command}: {damaged}: file-profile.little-endian: not a rumi file: it does not begin with a TIFF "
        "header (II, got b'?\\xa0')",
    ]
    assert not (tmp_path / "cube.json").exists()


def test_refs_stops_at_the_first_unreadable_file(capsys, tmp_path, scene):
    pytest.importorskip("kerchunk")
    status, _, err = run(capsys, "refs", tmp_path / "nope.rumi", scene)
    assert status == 1 and err == f"rumi refs: cannot read {tmp_path / 'nope.rumi'}: " \
                                  f"[Errno 2] No such file or directory: '{tmp_path / 'nope.rumi'}'\n"
    assert not scene.with_name(scene.name + ".json").exists()


@pytest.mark.parametrize("argv", [
    ["header", "{scene}", "-o", "{scene}/x.header"],  # a file where a directory should be: nothing can make it
    ["quicklook", "{scene}", "-o", "{scene}/x.png"],
    ["stac", "{scene}", "-o", "{scene}/x.json"],
    ["demo", "-o", "{scene}"],
])
def test_a_failed_write_says_write_and_names_what(capsys, scene, argv):
    if argv[0] == "stac":
        pytest.importorskip("pystac")
    argv = [a.format(scene=scene) for a in argv]
    status, _, err = run(capsys, *argv)
    target = argv[-1] if argv[0] != "demo" else os.path.join(argv[-1], "demo.rumi")
    assert status == 1 and err.startswith(f"rumi {argv[0]}: cannot write {target}: "), err
    assert "cannot read" not in err


@pytest.mark.parametrize("argv", [["info"], ["info", "--json"], ["validate"], ["stac"]])
def test_a_reader_that_leaves_early_gets_silence(scene, argv):
    """``rumi info f | head -1`` with the reader already gone: nothing on stderr, no traceback, status 141."""
    if argv[0] == "stac":
        pytest.importorskip("pystac")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first byte: every write gets EPIPE, deterministically
    try:
        done = subprocess.run([rumi_command(), argv[0], str(scene), *argv[1:]], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == READER_GONE


def test_rumi_info_into_head(scene):
    done = subprocess.run(f'"{rumi_command()}" info "{scene}" | head -1', shell=True, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout == f"file         {scene}\n" and done.stderr == ""


#: ``python -c BROKEN_READ FILE``: ``rumi info FILE`` whose read of FILE fails with a broken pipe.
BROKEN_READ = """
import sys
import xarray_rumi.reading.open as opening
from xarray_rumi.cli import main

def broken(*args, **kwargs):
    raise BrokenPipeError(32, "Broken pipe")

opening.open_image = broken
sys.exit(main(["info", sys.argv[1]]))
"""


def test_a_broken_pipe_that_is_not_standard_output_is_an_error(tmp_path, scene):
    """A BrokenPipeError from the command's own I/O (a socket, a FIFO) is not a reader leaving, when
    standard output is a file or terminal: there is no reader to leave."""
    with open(tmp_path / "out.txt", "w") as out:
        done = subprocess.run([sys.executable, "-c", BROKEN_READ, str(scene)], stdout=out, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert done.returncode == 1 and done.stderr == f"rumi info: cannot read {scene}: [Errno 32] Broken pipe\n"


def test_the_names_it_always_had_are_there():
    """``rumi = "xarray_rumi.cli:main"`` (pyproject.toml), and what scripts import from it."""
    import xarray_rumi.cli as cli
    from xarray_rumi.cli import demo, shared

    assert cli.main.__module__ == "xarray_rumi.cli"
    assert cli.demo_raster is demo.demo_raster
    assert (cli.EXIT_STATUS, cli.READER_GONE, cli.install_hint) == (shared.EXIT_STATUS, shared.READER_GONE,
                                                                     shared.install_hint)
    assert (cli.HelpFormatter, cli.CommandParser) == (shared.HelpFormatter, shared.CommandParser)


def test_python_dash_m_runs_the_command(tmp_path):
    done = subprocess.run([sys.executable, "-m", "xarray_rumi.cli", "--help"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "usage: rumi" in done.stdout


# -- commands whose extra is not installed ---------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["zarr", "numcodecs"])
def test_refs_without_the_zarr_extra_says_what_to_install(tmp_path, missing):
    path = write_scene(tmp_path)
    done = rumi_without([missing], "refs", path, "-o", tmp_path / "refs.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert looked_for(done) == {missing}
    assert f"rumi refs: needs {missing}, which is not installed: {install_hint('zarr')}" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "refs.json").exists()


def test_help_names_the_extra_of_a_command_that_cannot_load(tmp_path):
    done = rumi_without(["zarr"], "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert " ".join(f"(needs: {install_hint('zarr')})".split()) in " ".join(done.stdout.split())
    for command in ("info", "validate", "header", "convert", "refs", "demo"):
        assert command in done.stdout


@pytest.mark.parametrize("missing", GEO_EXTRA)
def test_convert_without_the_geo_extra_says_what_to_install(tmp_path, missing):
    tifffile = pytest.importorskip("tifffile")
    source = tmp_path / "in.tif"
    tifffile.imwrite(source, np.arange(32 * 32, dtype=np.uint16).reshape(32, 32))
    done = rumi_without([missing], "convert", source, tmp_path / "out.rumi", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert missing in looked_for(done)
    assert f"rumi convert: needs {missing}, which is not installed: {install_hint('geo')}" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out.rumi").exists()


def test_the_commands_run_with_their_extras(tmp_path):
    """The same runs with nothing refused succeed: what failed above was the missing module alone."""
    tifffile = pytest.importorskip("tifffile")
    path = write_scene(tmp_path)
    refs = rumi_without(["nothing"], "refs", path, "-o", tmp_path / "refs.json", cwd=tmp_path)
    assert refs.returncode == 0, refs.stderr
    assert (tmp_path / "refs.json").exists()
    source = tmp_path / "in.tif"
    tifffile.imwrite(source, np.arange(32 * 32, dtype=np.uint16).reshape(32, 32))
    convert = rumi_without(["nothing"], "convert", source, tmp_path / "out.rumi", cwd=tmp_path)
    assert convert.returncode == 0, convert.stderr
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "out.rumi").read()[0], tifffile.imread(source))


@pytest.mark.parametrize("argv", [["info"], ["validate"], ["quicklook", "-o", "out.png"]])
def test_an_empty_header_is_a_usage_error_naming_header_not_the_raster(capsys, tmp_path, scene, argv):
    """``--header ""`` was taken for the current folder, and the error blamed the raster."""
    with pytest.raises(SystemExit) as exit_:
        main([argv[0], str(scene), *[a if a == "-o" else str(tmp_path / a) for a in argv[1:]], "--header", ""])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"rumi {argv[0]}: error: argument --header: must name a header blob file (a path or URL), got ''" in err
    assert str(scene) not in err
