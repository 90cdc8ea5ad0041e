"""The CLI's habits: help on every argument, defaults shown, exit statuses in --help, info --json."""

from __future__ import annotations

import json

import pytest
from _rumi_bytes import make, ramp

from xarray_rumi.cli import EXIT_STATUS, _parser, main

#: Commands whose arguments all have help (refs, in virtual/kerchunk.py, leaves its FILE argument without).
DOCUMENTED = ("info", "validate", "header", "demo", "convert", "stac", "quicklook")


def _commands():
    parser = _parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    return parser, subparsers.choices


@pytest.mark.parametrize("name", DOCUMENTED)
def test_every_argument_has_help(name):
    _, commands = _commands()
    missing = [a.dest for a in commands[name]._actions if not (a.help or "").strip()]
    assert missing == []


def test_every_option_shows_its_default():
    _, commands = _commands()
    for name, command in commands.items():
        text = command.format_help()
        for action in command._actions:
            if action.option_strings and action.dest != "help":
                assert "default" in command._get_formatter()._get_help_string(action), (name, action.dest)
        assert "exit status: 0" in " ".join(text.split()), name


def test_exit_statuses_in_the_main_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(EXIT_STATUS.split()) in out
    assert "1 invalid" in out and "2 usage" in out


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["info"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        main(["quicklook", "a.rumi", "b.png", "--size", "big"])
    assert exit_.value.code == 2


def test_flag_defaults_read_off(capsys):
    with pytest.raises(SystemExit):
        main(["info", "--help"])
    assert "print a JSON object instead of text (default: off)" in " ".join(capsys.readouterr().out.split())


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


def test_convert_help_says_what_a_frame_unit_holds_as_the_spec_does():
    # spec, Frames: a tile frame holds one band of one grid position, a cell frame all bands of it
    _, commands = _commands()
    (unit,) = [a for a in commands["convert"]._actions if a.dest == "frame_unit"]
    assert "tile = one band" in unit.help and "cell = all bands" in unit.help
