"""The commands' shared habits: help on every argument, defaults shown, exit statuses in --help, install hints."""

from __future__ import annotations

import os

import pytest
from cli_runs import needs, run, write_scene

from xarray_rumi.cli import _parser, main
from xarray_rumi.cli.shared import EXIT_STATUS, READER_GONE, install_hint

#: Every command: all their arguments have help.
DOCUMENTED = ("info", "validate", "header", "demo", "convert", "refs", "stac", "quicklook")


def _commands():
    parser = _parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    return parser, subparsers.choices


@pytest.mark.parametrize("name", DOCUMENTED)
def test_every_argument_has_help(name):
    if name == "refs":
        pytest.importorskip("zarr")  # without it, a stand-in that takes anything and names the extra
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
        main(["quicklook", "a.rumi", "-o", "b.png", "--size", "big"])
    assert exit_.value.code == 2


def test_flag_defaults_read_off(capsys):
    with pytest.raises(SystemExit):
        main(["info", "--help"])
    assert "print a JSON object instead of text (default: off)" in " ".join(capsys.readouterr().out.split())


def test_install_hints_say_both_forms():
    assert install_hint("geo") == 'pip install "xarray-rumi[geo]" (in a clone: pip install ".[geo]")'


def test_exit_statuses_name_the_closed_pipe():
    assert f"{READER_GONE} standard output closed early" in EXIT_STATUS


# -- outputs: one set of rules in every command ----------------------------------------------------------------------

#: Each command that writes, with where its output goes: ``{out}`` stands for the output.
WRITERS = {
    "header": ["header", "{file}", "-o", "{out}"],
    "refs": ["refs", "{file}", "-o", "{out}"],
    "quicklook": ["quicklook", "{file}", "-o", "{out}"],
    "stac": ["stac", "{file}", "-o", "{out}"],
}


def _writer(command, **names):
    needs(command)
    return [str(a).format(**names) for a in WRITERS[command]]


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("target", ["{file}", "{link}", "{file}.header"])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(capsys, tmp_path, command, target):
    path = write_scene(tmp_path)
    (tmp_path / "link.rumi").symlink_to(path)
    if command == "header" and target == "{file}.header":
        pytest.skip("rebuilding FILE.header is what rumi header is for")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    out = target.format(file=path, link=tmp_path / "link.rumi")
    status, out_text, err = run(capsys, *_writer(command, file=path, out=out))
    assert status == 1, err
    assert err.startswith(f"rumi {command}: the output is the input: writing {out} would replace ") and \
        err.count("\n") == 1, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("command", WRITERS)
def test_a_missing_output_folder_is_named_and_not_made(capsys, tmp_path, command):
    path = write_scene(tmp_path)
    out = tmp_path / "missing" / "deeper" / "out.bin"
    status, _, err = run(capsys, *_writer(command, file=path, out=out))
    assert status == 1
    assert err == f"rumi {command}: cannot write {out}: the folder {out.parent} does not exist (create it first)\n"
    assert not (tmp_path / "missing").exists()


def test_refs_into_a_folder_makes_only_that_folder(capsys, tmp_path):
    pytest.importorskip("kerchunk")
    first, second = write_scene(tmp_path, "a.rumi"), write_scene(tmp_path, "b.rumi")
    status, _, err = run(capsys, "refs", first, second, "-o", tmp_path / "missing" / "refs")
    assert status == 1 and f"the folder {tmp_path / 'missing'} does not exist" in err
    assert not (tmp_path / "missing").exists()
    assert run(capsys, "refs", first, second, "-o", tmp_path / "refs")[0] == 0
    assert sorted(p.name for p in (tmp_path / "refs").iterdir()) == ["a.rumi.json", "b.rumi.json"]


def test_refs_refuses_two_outputs_of_one_name(capsys, tmp_path):
    pytest.importorskip("kerchunk")
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    first, second = write_scene(tmp_path / "d1", "x.rumi"), write_scene(tmp_path / "d2", "x.rumi")
    out = tmp_path / "out"
    status, _, err = run(capsys, "refs", first, second, "-o", out)
    assert status == 1
    assert err == (f"rumi refs: two outputs of one run are the same file: {out}/x.rumi.json and {out}/x.rumi.json; "
                   "the second would replace the first\n")
    assert not out.exists()   # refused before anything is written


def test_dash_is_standard_output_in_every_command(capsysbinary, tmp_path, monkeypatch):
    import json

    from quicklook_samples import read_png

    from xarray_rumi.cli import main

    pytest.importorskip("kerchunk")
    path = write_scene(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["header", str(path), "-o", "-"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == (tmp_path / "a.rumi.header").read_bytes() and err == b""
    assert main(["quicklook", str(path), "-o", "-"]) == 0
    assert read_png(capsysbinary.readouterr().out).shape == (40, 48)
    assert main(["refs", str(path), "-o", "-"]) == 0
    assert json.loads(capsysbinary.readouterr().out)["version"] == 1
    assert main(["refs", str(path), str(path), "-o", "-"]) == 2
    assert b"-o - (standard output) takes one reference set" in capsysbinary.readouterr().err
    assert not (tmp_path / "-").exists()


def test_a_full_standard_output_is_a_write_failure(tmp_path):
    """``rumi info a.rumi > /dev/full``: the output could not be written; the raster is fine."""
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    path = write_scene(tmp_path)
    for argv in (["info", str(path)], ["header", str(path), "-o", "-"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "xarray_rumi.cli", *argv], stdout=full,
                                  stderr=subprocess.PIPE, text=True, timeout=120)
        assert done.returncode == 1
        assert done.stderr == f"rumi {argv[0]}: cannot write standard output: [Errno 28] No space left on device\n"


def test_refs_cube_output_that_is_an_input_is_refused(capsys, tmp_path):
    pytest.importorskip("virtualizarr")
    first, second = write_scene(tmp_path, "a.rumi"), write_scene(tmp_path, "b.rumi")
    before = second.read_bytes()
    status, _, err = run(capsys, "refs", first, second, "--cube", "time", "-o", second)
    assert status == 1 and "the output is the input" in err
    assert second.read_bytes() == before
