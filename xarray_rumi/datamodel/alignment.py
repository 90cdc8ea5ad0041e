"""When rumi Images form a Cube: what must agree, and the error that names what does not.

The spec's data model stacks Images that share a grid into a Cube; the
others stay an ImageCollection.  :func:`check_aligned` decides it for one
Cube (``open_cube``, Cube references, the VirtualiZarr parser), and
:func:`aligned_groups` splits a collection into Cubes by the same key, so a
collection's Cube is always one ``open_cube`` would make.  From headers and
georeferencing alone: nothing is read.
"""

from __future__ import annotations

from collections.abc import Sequence

#: What must agree for Images to form a Cube, in the order it is checked.
ALIGNMENT = ("shape", "transform", "crs", "tile size", "frame unit", "sample type")


def alignment_key(image) -> dict:
    """The properties :func:`check_aligned` compares, named as in its error messages."""
    grid, georef = image.grid, image.georeferencing
    defined = georef is not None and georef.is_defined
    return {
        "shape": grid.shape,
        # The raster type belongs with the transform: the same matrix read as
        # PixelIsArea or PixelIsPoint puts pixels half a pixel apart.
        "transform": (georef.transform, georef.raster_type.name.lower()) if defined else None,
        "crs": georef.crs_code if defined else None,
        "tile size": (grid.tile_length, grid.tile_width),
        "frame unit": grid.frame_unit.name.lower(),
        "sample type": image.sample_type.name,
    }


def _aligns_by(image) -> tuple:
    """What :func:`alignment_key` is a function of: images equal here have equal keys.

    Images of one grid usually share these objects (a catalog's rows, a
    Cube's blobs of one grid), so comparing them is an identity check where
    building the key is a dict of six properties: at 100,000 images, the
    difference is a few tenths of a second.
    """
    return image.grid, image.sample_type, image.georeferencing


def check_aligned(images: Sequence, names: Sequence[str] | None = None) -> None:
    """Raise ``ValueError`` naming the first property in which an image differs from the first one.

    Misaligned images are each valid rumi files, so this is not a
    ``RumiFormatError``: they simply form an ImageCollection, not a Cube.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> images = [xarray_rumi.open_image(p, header=xarray_rumi.write(p, np.zeros((1, 8, n), "uint8")))
    ...           for p, n in ((os.path.join(d, "a.rumi"), 8), (os.path.join(d, "b.rumi"), 9))]
    >>> check_aligned(images, ["a", "b"])
    Traceback (most recent call last):
    ...
    ValueError: cannot stack into a Cube: image 1 ('b') has shape (1, 8, 9), but image 0 ('a') has (1, 8, 8)
    """
    names = list(names) if names is not None else [image.source.url for image in images]
    reference, reference_by = alignment_key(images[0]), _aligns_by(images[0])
    for position, image in enumerate(images[1:], start=1):
        if _aligns_by(image) == reference_by:
            continue
        key = alignment_key(image)
        for prop in ALIGNMENT:
            if key[prop] != reference[prop]:
                raise ValueError(
                    f"cannot stack into a Cube: image {position} ({names[position]!r}) has {prop} "
                    f"{_describe(key[prop])}, but image 0 ({names[0]!r}) has {_describe(reference[prop])}"
                )


def _describe(value) -> str:
    return "none (no georeferencing)" if value is None else str(value)


def aligned_groups(images: Sequence) -> list[list[int]]:
    """The positions of ``images`` grouped into Cubes: those whose :func:`alignment_key` agree.

    Groups come in order of their first image, positions in the order given.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> images = [xarray_rumi.open_image(p, header=xarray_rumi.write(p, np.zeros((1, 8, n), "uint8")))
    ...           for p, n in ((os.path.join(d, f"{i}.rumi"), n) for i, n in enumerate([8, 9, 8]))]
    >>> aligned_groups(images)
    [[0, 2], [1]]
    """
    groups: dict[tuple, list[int]] = {}
    group_by: dict[tuple, list[int]] = {}  # _aligns_by -> its group: the key is built once per distinct value
    for position, image in enumerate(images):
        by = _aligns_by(image)
        group = group_by.get(by)
        if group is None:
            key = alignment_key(image)
            group = group_by[by] = groups.setdefault(tuple(key[prop] for prop in ALIGNMENT), [])
        group.append(position)
    return list(groups.values())


__all__ = ["ALIGNMENT", "aligned_groups", "alignment_key", "check_aligned"]
