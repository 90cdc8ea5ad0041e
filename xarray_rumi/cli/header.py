"""``rumi header FILE``: the header blob rebuilt from the IFD, written beside the file or where asked."""

from __future__ import annotations

import sys


def add_command(commands) -> None:
    header = commands.add_parser("header", help="rebuild the header blob from the IFD")
    header.add_argument("file", help="rumi file (path or URL)")
    header.add_argument("-o", "--output", help="where to write it (default: FILE.header)")
    header.set_defaults(run=run)


def run(args) -> int:
    from ..reading.open import header_from_file

    blob = header_from_file(args.file)
    output = args.output or f"{args.file}.header"
    try:
        with open(output, "wb") as f:
            f.write(blob)
    except OSError as exc:
        print(f"rumi header: cannot write {output}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {output} ({len(blob)} bytes)")
    return 0
