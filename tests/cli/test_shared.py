"""The commands' shared habits: help on every argument, defaults shown, exit statuses in --help, install hints."""

from __future__ import annotations

import pytest

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
        main(["quicklook", "a.rumi", "b.png", "--size", "big"])
    assert exit_.value.code == 2


def test_flag_defaults_read_off(capsys):
    with pytest.raises(SystemExit):
        main(["info", "--help"])
    assert "print a JSON object instead of text (default: off)" in " ".join(capsys.readouterr().out.split())


def test_install_hints_say_both_forms():
    assert install_hint("geo") == 'pip install "xarray-rumi[geo]" (in a clone: pip install ".[geo]")'


def test_exit_statuses_name_the_closed_pipe():
    assert f"{READER_GONE} standard output closed early" in EXIT_STATUS
