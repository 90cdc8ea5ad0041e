"""``rumi header FILE``: the header blob rebuilt from the IFD, written beside the file or where asked."""

from __future__ import annotations

from .shared import OUTPUT_RULES, STDOUT, add_storage_options, check_outputs, options_for, say, write_output


def add_command(commands) -> None:
    header = commands.add_parser(
        "header", help="rebuild the header blob from the IFD",
        description="Rebuild FILE's header blob from its IFD (never from the blob beside it, which it may "
                    "replace) and write it, whole or not at all. An output that is FILE itself is refused.")
    header.add_argument("file", help="rumi file (path or URL)")
    header.add_argument("-o", "--output", help=f"where to write it: a path or fsspec URL; {OUTPUT_RULES} "
                                               "(default: FILE.header)")
    add_storage_options(header)
    header.set_defaults(run=run)


def run(args) -> int:
    from ..reading.open import header_from_file

    output = args.output or f"{args.file}.header"
    # FILE.header itself is what this command rebuilds; only the raster is an input to protect
    check_outputs([output], [args.file], "the raster")
    blob = header_from_file(args.file, storage_options=options_for(args.file, args.storage_options))
    write_output(output, blob, options_for(output, args.storage_options))
    if output != STDOUT:  # on standard output the blob is the whole output
        say(f"wrote {output} ({len(blob)} bytes)")
    return 0
