"""``rumi validate FILE``: every rule of the spec, frames included; the verdict is the output."""

from __future__ import annotations

from .shared import add_reader, blob_for, options_for, say


def add_command(commands) -> None:
    add_reader(commands, "validate", run, help="check a file against every rule of the spec",
               description="Check FILE against every rule of the spec, every frame decoded, and its blob "
                           "(--header, else FILE.header when it exists): valid, and in agreement with the file.")


def run(args) -> int:
    from ..reading.validate import validate

    args.header = blob_for(args.file, args.header, args.storage_options)  # named if it cannot be read
    validate(args.file, args.header, storage_options=options_for(args.file, args.storage_options))
    say(f"{args.file}: valid rumi 0.1.0" + (f", and so is its blob {args.header}" if args.header else ""))
    return 0
