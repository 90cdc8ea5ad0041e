"""``rumi quicklook FILE OUTPUT``: a small PNG of a rumi file, reading only the frames it samples."""

from __future__ import annotations

import sys

from ..stac.quicklook import PERCENTILES, SIZE
from .shared import positive_int


def add_command(commands) -> None:
    look = commands.add_parser(
        "quicklook", help="write a small PNG of a rumi file",
        description="Sample the image on a regular grid (reading only the frames holding a sample), stretch each "
                    "band between two percentiles, and write an 8-bit PNG: grey for one band, RGB for three.")
    look.add_argument("file", help="rumi file (path or URL)")
    look.add_argument("output", help="PNG to write (path or fsspec URL)")
    look.add_argument("--header", default=None, help="header blob file (default: rebuild it from the IFD)")
    look.add_argument("--bands", default=None,
                      help="1-based bands: one for grey or three comma-separated for RGB, e.g. 4,3,2 "
                           "(default: 1,2,3 with three bands or more, else 1)")
    look.add_argument("--size", type=positive_int, default=SIZE,
                      help="longest side of the PNG, in pixels (default: %(default)s)")
    look.add_argument("--percentiles", default=",".join(f"{p:g}" for p in PERCENTILES),
                      help="low,high percentiles each band is stretched between (default: %(default)s)")
    look.set_defaults(run=run)


def run(args) -> int:
    from ..stac.quicklook import quicklook, write_quicklook

    bands = None if args.bands is None else [int(b) for b in args.bands.split(",")]
    low, high = (float(p) for p in args.percentiles.split(","))
    pixels = quicklook(args.file, args.header, bands=bands, size=args.size, percentiles=(low, high))
    try:
        write_quicklook(args.output, pixels)
    except OSError as exc:
        print(f"rumi quicklook: cannot write {args.output}: {exc}", file=sys.stderr)
        return 1
    kind = "RGB" if pixels.ndim == 3 else "grey"
    print(f"wrote {args.output}: {pixels.shape[1]} x {pixels.shape[0]} px, {kind}")
    return 0
