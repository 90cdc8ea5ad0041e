"""The ``rumi`` command (a module per command): the parser, and each error a user can cause said in one line."""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import stat
import sys

from ..errors import RumiFormatError
from . import demo, header, info, quicklook, stac, validate
from .demo import demo_raster
from .shared import (EXIT_STATUS, READER_GONE, STDOUT, CannotWrite, CommandParser, HelpFormatter, Refused,
                     cannot_read, install_hint, storage_error)

#: Commands that need an extra, and the extra that brings what they need.
_EXTRAS = {"convert": "geo", "refs": "zarr", "stac": "stac"}


def main(argv=None) -> int:
    """The ``rumi`` command; returns the exit status.

    >>> main(["validate", "/nonexistent.rumi"])
    rumi validate: cannot read /nonexistent.rumi: [Errno 2] No such file or directory: '/nonexistent.rumi'
    1
    """
    args = _parser().parse_args(argv)
    try:
        status = _run(args)
        sys.stdout.flush()  # a reader that left shows here at the latest, not as a message at interpreter exit
    except BrokenPipeError:
        # `rumi info f | head -1`: the reader has all it wanted. Stop without a word, as GNU tools do, with
        # standard output on devnull so that Python's flush at exit cannot fail (the signal module's recipe).
        _discard_stdout()
        return READER_GONE
    return status


def _run(args) -> int:
    report = sys.stdout if args.command == "validate" else sys.stderr  # validate's verdict is its output
    try:
        return args.run(args) or 0
    except (Refused, CannotWrite, RumiFormatError) as exc:
        if isinstance(exc, CannotWrite) and exc.target == STDOUT:
            _discard_stdout()
            report = sys.stderr
        print(f"rumi {args.command}: {exc}", file=report)
        return 1
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and _output_is_a_pipe():
            raise  # our reader left (main stops quietly); on a file or terminal it is an I/O failure like any
        print(f"rumi {args.command}: {cannot_read(_unreadable(args, exc), exc)}", file=report)
        return 1
    except ValueError as exc:
        print(f"rumi {args.command}: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # a command whose optional dependencies are not installed
        extra = _EXTRAS.get(args.command, "all")
        print(f"rumi {args.command}: needs {exc.name or exc}, which is not installed: {install_hint(extra)}",
              file=sys.stderr)
        return 2
    except Exception as exc:
        if not storage_error(exc):
            raise
        print(f"rumi {args.command}: {cannot_read(_unreadable(args, exc), exc)}", file=report)
        return 1


def _discard_stdout() -> None:
    """Point standard output at devnull, so that what could not be written is not tried again at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # replaced by an object with no file (a test's capture)
        pass


def _unreadable(args, exc: Exception) -> str:
    """The input an error is about, as the user wrote it: the blob when the error names it, else FILE."""
    header = getattr(args, "header", None)
    if header and str(header) in str(exc):
        return str(header)
    files = getattr(args, "file", "")
    return " ".join(map(str, files)) if isinstance(files, list) else str(files)


def _output_is_a_pipe() -> bool:
    """Whether standard output is a pipe or socket, the only outputs whose reader can leave."""
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # replaced by an object with no file (a test's capture)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rumi", description="Read, check and write rumi raster files.",
                                     formatter_class=HelpFormatter, epilog=EXIT_STATUS)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser,
                                     metavar="COMMAND")
    for add_command in (info.add_command, validate.add_command, header.add_command, demo.add_command,
                        _needing_extra("convert"), _needing_extra("refs"), stac.add_command, quicklook.add_command):
        add_command(commands)
    return parser


def _needing_extra(command: str):
    """``add_command`` of ``convert`` or ``refs``, or of a stand-in naming the extra their module imports."""
    try:
        return importlib.import_module(f"{__name__}.{command}").add_command
    except ImportError:
        return functools.partial(_add_stand_in, command)


def _add_stand_in(command: str, commands) -> None:
    stand_in = commands.add_parser(command, help=f"(needs: {install_hint(_EXTRAS[command])})")
    stand_in.add_argument("arguments", nargs=argparse.REMAINDER)
    # run, it imports the module again, which fails as it did: main() turns the ImportError into the install hint
    stand_in.set_defaults(run=lambda args: importlib.import_module(f"{__name__}.{command}"))


__all__ = ["EXIT_STATUS", "READER_GONE", "CommandParser", "HelpFormatter", "demo_raster", "install_hint", "main"]
