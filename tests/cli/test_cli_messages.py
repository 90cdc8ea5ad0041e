"""What the rumi command says when something is wrong: the path it could not read or write, one line, the
right exit status, and nothing at all when the reader of its output leaves early."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.cli import EXIT_STATUS, READER_GONE, install_hint, main

#: Each command that reads one rumi file, with the arguments that follow the file (an output where needed).
READERS = {
    "info": [], "validate": [], "header": [], "stac": [], "quicklook": ["out.png"], "refs": [],
}


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def rumi_command() -> str:
    return shutil.which("rumi") or str(Path(sys.executable).with_name("rumi"))


@pytest.fixture
def scene(tmp_path):
    path = tmp_path / "scene.rumi"
    xarray_rumi.write(path, np.arange(2 * 40 * 48, dtype=np.uint16).reshape(2, 40, 48), tile_size=16,
                      crs=32633, transform=(10, 0, 500000, 0, -10, 5000000))
    return path


@pytest.mark.parametrize("command", READERS)
def test_every_command_names_the_file_it_cannot_read(capsys, tmp_path, monkeypatch, command):
    if command == "stac":
        pytest.importorskip("pystac")
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
    if command == "stac":
        pytest.importorskip("pystac")
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
    assert not (scene.parent / "scene.rumi.json").exists()


@pytest.mark.parametrize("argv", [
    ["header", "{scene}", "-o", "{scene}/x.header"],  # a file where a directory should be: nothing can make it
    ["quicklook", "{scene}", "{scene}/x.png"],
    ["stac", "{scene}", "-o", "{scene}/x.json"],
    ["demo", "{scene}"],
])
def test_a_failed_write_says_write_and_names_what(capsys, scene, argv):
    if argv[0] == "stac":
        pytest.importorskip("pystac")
    argv = [a.format(scene=scene) for a in argv]
    status, _, err = run(capsys, *argv)
    target = argv[-1] if argv[0] != "demo" else os.path.join(argv[-1], "demo.rumi")
    assert status == 1 and err.startswith(f"rumi {argv[0]}: cannot write {target}: "), err
    assert "cannot read" not in err


def test_info_prints_the_transform_in_full(capsys, tmp_path):
    path = tmp_path / "swiss.rumi"
    transform = (0.1, 0.0, 2826915.0, 0.0, -0.1, 1181234.567890123)
    xarray_rumi.write(path, np.zeros((1, 8, 8), np.uint8), crs=2056, transform=transform)
    status, out, _ = run(capsys, "info", path)
    assert status == 0 and "transform    0.1, 0, 2826915, 0, -0.1, 1181234.567890123\n" in out
    status, out, _ = run(capsys, "info", path, "--json")
    assert status == 0 and json.loads(out)["transform"] == list(transform)
    assert "1181234.567890123" in out


def test_install_hints_say_both_forms():
    assert install_hint("geo") == 'pip install "xarray-rumi[geo]" (in a clone: pip install ".[geo]")'


def test_exit_statuses_name_the_closed_pipe():
    assert f"{READER_GONE} standard output closed early" in EXIT_STATUS


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
