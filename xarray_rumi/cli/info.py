"""``rumi info FILE``: what a rumi file holds, as text or as one JSON object."""

from __future__ import annotations

import json

import numpy as np

from .shared import add_reader, blob_for, options_for, say


def add_command(commands) -> None:
    info = add_reader(commands, "info", run, help="describe a rumi file")
    info.add_argument("--json", action="store_true", help="print a JSON object instead of text")


def run(args) -> int:
    from ..reading.open import open_image

    options = options_for(args.file, args.storage_options)
    args.header = blob_for(args.file, args.header, args.storage_options)  # named if it cannot be read
    info = _info(args.file, open_image(args.file, header=args.header, storage_options=options))
    if args.json:
        say(json.dumps(info, indent=2))
        return 0
    say(f"file         {info['file']}")
    say(f"shape        {info['bands']} bands x {info['rows']} rows x {info['columns']} columns")
    say(f"sample type  {info['sample_type']} (sample_format {info['sample_format']}, "
        f"{info['bits_per_sample']} bits) -> {info['dtype']}")
    say(f"frame unit   {info['frame_unit']}")
    say(f"grid         {info['tiles'][1]} x {info['tiles'][0]} of {info['tile_shape'][0]} x "
        f"{info['tile_shape'][1]} px, {info['frame_count']} frames")
    if info["crs"] is not None:
        say(f"crs          {info['crs']} ({info['model_type']}), pixel is {info['raster_type']}")
        say(f"transform    {', '.join(repr(float(v)).removesuffix('.0') for v in info['transform'])}")
    else:
        say("crs          none (undefined georeferencing)")
    counts = info["frame_bytes"]
    say(f"frame bytes  min {counts['min']}, median {counts['median']}, max {counts['max']}, "
        f"blob {info['blob_bytes']} bytes")
    say(f"size         {info['file_size']} bytes for {info['raw_size']} raw: ratio {info['ratio']:.2f}")
    return 0


def _info(file, image) -> dict:
    """What ``rumi info`` says, as one JSON object (names as in the STAC Item where STAC has one)."""
    header, grid, geo = image.header, image.grid, image.georeferencing
    defined = geo is not None and geo.is_defined
    counts = header.byte_counts()
    raw = grid.image_width * grid.image_length * grid.samples_per_pixel * header.sample_type.bytes_per_sample
    return {
        "file": str(file),
        "bands": grid.samples_per_pixel, "rows": grid.image_length, "columns": grid.image_width,
        "sample_type": header.sample_type.name, "sample_format": header.sample_type.sample_format,
        "bits_per_sample": header.sample_type.bits_per_sample, "dtype": str(header.sample_type.dtype),
        "frame_unit": grid.frame_unit.name.lower(),
        "tile_shape": [grid.tile_length, grid.tile_width], "tiles": [grid.tiles_down, grid.tiles_across],
        "frame_count": grid.frame_count,
        "crs": geo.crs_code if defined else None,
        "model_type": geo.model_type.name.lower() if defined else None,
        "raster_type": geo.raster_type.name.lower() if geo is not None else None,
        "transform": list(geo.transform) if defined else None,
        "frame_bytes": {"min": int(counts.min()), "median": int(np.median(counts)), "max": int(counts.max())},
        "blob_bytes": len(header.to_bytes()),
        "file_size": image.file_size, "raw_size": raw, "ratio": raw / image.file_size,
    }
