"""``rumi stac FILE [FILE ...]``: STAC Items for rumi files, blob included, as JSON or stac-geoparquet."""

from __future__ import annotations

import argparse
import os
import sys

from .shared import (OUTPUT_RULES, STDOUT, add_storage_options, blob_for, check_outputs, options_for, read_by,
                     read_or_report, stac_bytes, write_output)


def add_command(commands) -> None:
    stac = commands.add_parser(
        "stac", help="describe rumi files as STAC Items (JSON)",
        description="Write a STAC Item for each FILE, blob included, so the files open with no read "
                    "(see docs/stac.md): FILE.header when it exists, else rebuilt from the IFD. One FILE gives an "
                    "Item, several an ItemCollection.")
    stac.add_argument("file", nargs="+", metavar="FILE", help="rumi files (paths or URLs)")
    stac.add_argument("-o", "--output", default="-",
                      help="file to write (path or fsspec URL): JSON, or stac-geoparquet when it ends in "
                           f".parquet; {OUTPUT_RULES} (default: %(default)s)")
    stac.add_argument("--datetime", help="ISO 8601 datetime of every Item (default: each file's modification time)")
    stac.add_argument("--href-prefix", help="publish the assets under this URL prefix instead of the files' own "
                                            "paths (e.g. https://example.com/scenes/)")
    stac.add_argument("--collection", action="store_true", help="write an ItemCollection even for one FILE")
    stac.add_argument("--nodata", type=_nodata, default=None, metavar="VALUE",
                      help="every band's nodata in raster:bands, a value the samples can hold: a number, "
                           "nan, inf or -inf (as --nodata=-inf) (default: none; a rumi file records none)")
    add_storage_options(stac)
    stac.set_defaults(run=run)


def _nodata(text: str) -> int | float:
    """``--nodata``'s value: an int when it is one (kept exact), else a float."""
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"not a number: {text!r}")


def run(args) -> int:
    import pystac  # noqa: F401  (the stac extra: when missing, main() names it before any file is read)

    from ..stac.items import item

    check_outputs([args.output], read_by(args.file), "a raster or its blob")
    items = []
    for path in args.file:  # every file is tried, so that one run names every file that cannot be described
        href = args.href_prefix.rstrip("/") + "/" + os.path.basename(path) if args.href_prefix else None
        options = options_for(path, args.storage_options)
        items.append(read_or_report("stac", path, lambda: item(
            path, blob_for(path, None, options), href=href, datetime=args.datetime, nodata=args.nodata,
            storage_options=options)))
    if None in items:
        return 1
    write_output(args.output, stac_bytes(items, args.output, args.collection),
                 options_for(args.output, args.storage_options))
    if args.output != STDOUT:
        print(f"wrote {args.output}: {len(items)} STAC Item{'s' if len(items) > 1 else ''}"
              f"{' as stac-geoparquet' if args.output.endswith('.parquet') else ''}", file=sys.stderr)
    return 0
