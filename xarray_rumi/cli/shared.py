"""What every ``rumi`` command shares: its help's form, the exit statuses, how to install an extra."""

from __future__ import annotations

import argparse

#: Said at the end of every ``--help``.
EXIT_STATUS = ("exit status: 0 done (or the file is valid); 1 invalid, corrupt, unreadable or refused input; "
               "2 usage error or a missing optional dependency; 141 standard output closed early (| head), "
               "as for GNU tools")

#: The status when the reader of standard output leaves early: 128 + SIGPIPE, what a shell reports for a GNU
#: tool stopped that way, so that neither "done" (0) nor "invalid input" (1) is claimed.
READER_GONE = 141


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a size, a count), refused as a usage error otherwise.

    >>> positive_int("512")
    512
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a whole number of at least 1, got '0'
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def install_hint(extra: str) -> str:
    """How to install an extra: from an index, or from a clone of the repository.

    >>> install_hint("geo")
    'pip install "xarray-rumi[geo]" (in a clone: pip install ".[geo]")'
    """
    return f'pip install "xarray-rumi[{extra}]" (in a clone: pip install ".[{extra}]")'


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, as ``--help`` of GDAL's and Click's tools do.

    Help that already says its default (``default: ...``) is kept as it is;
    a flag's default is "off".

    >>> parser = argparse.ArgumentParser(prog="rumi x", formatter_class=HelpFormatter)
    >>> _ = parser.add_argument("--size", type=int, default=1024, help="longest side")
    >>> "longest side (default: 1024)" in parser.format_help()
    True
    """

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default is argparse.SUPPRESS:
            return text
        if action.nargs == 0 and isinstance(action.default, bool):  # a flag
            return f"{text} (default: {'on' if action.default else 'off'})"
        if action.default is None:
            return f"{text} (default: none)"
        return f"{text} (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: help formatted like ``rumi``'s, ending with the exit statuses."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EXIT_STATUS)
        super().__init__(*args, **kwargs)
