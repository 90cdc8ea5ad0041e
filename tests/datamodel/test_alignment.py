"""When Images form a Cube: ``check_aligned`` for one Cube and ``aligned_groups`` for a collection agree."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.datamodel.alignment import ALIGNMENT, aligned_groups, check_aligned

UTM = (10, 0, 500000, 0, -10, 5000000)
#: One image per way of differing from the first, named by the property that differs (``None``: nothing does).
VARIANTS = {
    "reference": ({}, None),
    "same grid": ({}, None),
    "shape": ({"shape": (2, 16, 24)}, "shape"),
    "transform": ({"transform": (20, 0, 500000, 0, -20, 5000000)}, "transform"),
    "raster type": ({"raster_type": "point"}, "transform"),
    "crs": ({"crs": 32632}, "crs"),
    "tile size": ({"tile_size": 4}, "tile size"),
    "frame unit": ({"frame_unit": "cell"}, "frame unit"),
    "sample type": ({"dtype": "uint16"}, "sample type"),
}


def _image(path, *, shape=(2, 16, 16), dtype="uint8", crs=32633, transform=UTM, **write_kwargs):
    write_kwargs.setdefault("tile_size", 8)
    blob = xarray_rumi.write(path, np.zeros(shape, dtype), crs=crs, transform=transform, **write_kwargs)
    return xarray_rumi.open_image(path, header=blob)


@pytest.fixture
def images(tmp_path):
    return {name: _image(tmp_path / f"{i}.rumi", **changes) for i, (name, (changes, _)) in enumerate(VARIANTS.items())}


def test_every_property_that_differs_makes_a_group_of_its_own(images):
    groups = aligned_groups(list(images.values()))
    names = list(images)
    assert [[names[i] for i in group] for group in groups] == [
        ["reference", "same grid"], *([name] for name in names[2:])]


def test_a_group_is_what_check_aligned_accepts_and_two_groups_are_not(images):
    listed = list(images.values())
    groups = aligned_groups(listed)
    for group in groups:
        check_aligned([listed[i] for i in group])
    for first, second in itertools.combinations(groups, 2):
        pair = [listed[first[0]], listed[second[0]]]
        with pytest.raises(ValueError, match="cannot stack into a Cube"):
            check_aligned(pair)


@pytest.mark.parametrize("name", [n for n, (_, prop) in VARIANTS.items() if prop is not None])
def test_the_error_names_the_property_that_differs(images, name):
    prop = VARIANTS[name][1]
    assert prop in ALIGNMENT
    with pytest.raises(ValueError, match=f"has {prop} "):
        check_aligned([images["reference"], images[name]], ["reference", name])


def test_without_a_crs_the_raster_type_does_not_split_a_cube(tmp_path):
    """No CRS, no transform: PixelIsArea and PixelIsPoint put no pixel anywhere, so they stack."""
    area = _image(tmp_path / "area.rumi", crs=None, transform=None)
    point = _image(tmp_path / "point.rumi", crs=None, transform=None, raster_type="point")
    check_aligned([area, point])
    assert aligned_groups([area, point]) == [[0, 1]]


def test_groups_follow_the_first_appearance_of_each_grid(tmp_path):
    small = [_image(tmp_path / f"s{i}.rumi") for i in range(2)]
    large = [_image(tmp_path / f"l{i}.rumi", shape=(2, 24, 24)) for i in range(2)]
    assert aligned_groups([large[0], small[0], large[1], small[1]]) == [[0, 2], [1, 3]]
    assert aligned_groups([]) == []
