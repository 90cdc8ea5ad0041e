"""``rumi validate FILE``: every rule of the spec, frames included; the verdict is the output."""

from __future__ import annotations

from .shared import blob_file


def add_command(commands) -> None:
    check = commands.add_parser("validate", help="check a file against every rule of the spec")
    check.add_argument("file", help="rumi file (path or URL)")
    check.add_argument("--header", type=blob_file, help="also check this header blob, and that it matches the file "
                                        "(default: check the file alone)")
    check.set_defaults(run=run)


def run(args) -> int:
    from ..reading.validate import validate

    validate(args.file, args.header)
    print(f"{args.file}: valid rumi 0.1.0")
    return 0
