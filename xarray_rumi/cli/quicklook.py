"""``rumi quicklook FILE [-o PNG]``: a small PNG of a rumi file, reading only the frames it samples."""

from __future__ import annotations

import argparse

from ..stac.quicklook import PERCENTILES, SIZE
from .shared import (OUTPUT_RULES, STDOUT, add_reader, blob_for, check_outputs, options_for, positive_int, read_by,
                     say, write_output)


def add_command(commands) -> None:
    look = add_reader(
        commands, "quicklook", run, help="write a small PNG of a rumi file",
        description="Sample the image on a regular grid (reading only the frames holding a sample), stretch each "
                    "band between two percentiles, and write an 8-bit PNG: grey for one band, RGB for three, "
                    "NaN and infinities transparent (docs/stac.md, Quicklooks).")
    look.add_argument("-o", "--output", help=f"PNG to write (path or fsspec URL); {OUTPUT_RULES} (default: FILE.png)")
    look.add_argument("--bands", type=band_numbers, default=None,
                      help="1-based bands: one for grey or three comma-separated for RGB, e.g. 4,3,2 "
                           "(default: 1,2,3 with three bands or more, else 1)")
    look.add_argument("--size", type=positive_int, default=SIZE, help="longest side of the PNG, in pixels")
    look.add_argument("--percentiles", type=percentile_pair, default=PERCENTILES, metavar="LOW,HIGH",
                      help="percentiles each band is stretched between, 0 <= LOW < HIGH <= 100 "
                           f"(default: {','.join(f'{p:g}' for p in PERCENTILES)})")


def band_numbers(text: str) -> list[int]:
    """``--bands``: 1-based band numbers, comma-separated."""
    try:
        bands = [int(b) for b in text.split(",")]
    except ValueError:
        bands = []
    if not bands or min(bands) < 1:
        raise argparse.ArgumentTypeError(
            f"must be 1-based band numbers, one or three comma-separated (e.g. 4,3,2), got {text!r}")
    return bands


def percentile_pair(text: str) -> tuple[float, float]:
    """``--percentiles``: two percentiles LOW,HIGH with 0 <= LOW < HIGH <= 100."""
    try:
        low, high = (float(p) for p in text.split(","))
    except ValueError:
        low = high = float("nan")
    if not 0 <= low < high <= 100:  # NaN fails every comparison
        raise argparse.ArgumentTypeError(
            f"must be two percentiles LOW,HIGH with 0 <= LOW < HIGH <= 100 (e.g. 2,98), got {text!r}")
    return low, high


def run(args) -> int:
    from ..stac.quicklook import encode_png, quicklook

    output = args.output or f"{args.file}.png"
    args.header = blob_for(args.file, args.header, args.storage_options)  # named if it cannot be read
    check_outputs([output], read_by([args.file], args.header), "the raster or its blob")
    pixels = quicklook(args.file, args.header, bands=args.bands, size=args.size, percentiles=args.percentiles,
                       storage_options=options_for(args.file, args.storage_options))
    write_output(output, encode_png(pixels), options_for(output, args.storage_options))
    if output != STDOUT:  # on standard output the PNG is the whole output
        say(f"wrote {output}: {pixels.shape[1]} x {pixels.shape[0]} px, {_kind(pixels)}")
    return 0


def _kind(pixels) -> str:
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    return {1: "grey", 2: "grey with alpha (no data transparent)", 3: "RGB",
            4: "RGB with alpha (no data transparent)"}[channels]
