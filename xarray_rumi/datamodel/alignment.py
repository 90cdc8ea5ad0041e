"""When rumi Images form a Cube, from headers and georeferencing alone, and the error naming what differs."""

from __future__ import annotations

from collections.abc import Sequence

#: What must agree for Images to form a Cube, in the order it is checked.
ALIGNMENT = ("shape", "transform", "crs", "tile size", "frame unit", "sample type")


def alignment_key(image) -> dict:
    grid, georef = image.grid, image.georeferencing
    defined = georef is not None and georef.is_defined
    return {
        "shape": grid.shape,
        # the same matrix as PixelIsArea or PixelIsPoint puts pixels half a pixel apart
        "transform": (georef.transform, georef.raster_type.name.lower()) if defined else None,
        "crs": georef.crs_code if defined else None,
        "tile size": (grid.tile_length, grid.tile_width),
        "frame unit": grid.frame_unit.name.lower(),
        "sample type": image.sample_type.name,
    }


def _aligns_by(image) -> tuple:
    # often shared objects, so comparing them is cheap
    return image.grid, image.sample_type, image.georeferencing


def check_aligned(images: Sequence, names: Sequence[str] | None = None) -> None:
    """Raise ``ValueError`` naming the first property in which an image differs from the first one."""
    names = list(names) if names is not None else [image.source.url for image in images]
    reference, reference_by = alignment_key(images[0]), _aligns_by(images[0])
    for position, image in enumerate(images[1:], start=1):
        if _aligns_by(image) == reference_by:
            continue
        key = alignment_key(image)
        for prop in ALIGNMENT:
            if key[prop] != reference[prop]:
                raise ValueError(f"cannot stack into a Cube: image {position} ({names[position]!r}) has {prop} "
                                 f"{_describe(key[prop])}, but image 0 ({names[0]!r}) has {_describe(reference[prop])}")


def _describe(value) -> str:
    return "none (no georeferencing)" if value is None else str(value)


def aligned_groups(images: Sequence) -> list[list[int]]:
    """The positions of ``images`` grouped into Cubes, groups in order of their first image."""
    groups: dict[tuple, list[int]] = {}
    group_by: dict[tuple, list[int]] = {}  # the key built once per distinct _aligns_by
    for position, image in enumerate(images):
        by = _aligns_by(image)
        group = group_by.get(by)
        if group is None:
            key = alignment_key(image)
            group = group_by[by] = groups.setdefault(tuple(key[prop] for prop in ALIGNMENT), [])
        group.append(position)
    return list(groups.values())


__all__ = ["ALIGNMENT", "aligned_groups", "alignment_key", "check_aligned"]
