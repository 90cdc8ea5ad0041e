"""A catalog row's georeferencing: malformed rows refused naming row and field, stale rows refused at the first read."""

from __future__ import annotations

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.dataset.catalog import build, open_catalog, read
from xarray_rumi.dataset.collection import open_collection
from xarray_rumi.stac import item

pytest.importorskip("pyarrow")

@pytest.fixture
def catalog(tmp_path, write_images):
    """``(DataFrame, paths)`` of two 32 x 32 images in EPSG:32633."""
    paths = write_images(range(2), (1, 32, 32))
    return read(build(paths, tmp_path / "c.parquet")), paths


MALFORMED = [
    ("epsg", 99999, "epsg: cannot interpret CRS 99999"),
    ("transform", [10.0, 0.0, 500000.0, 0.0, -10.0], "transform: transform must be six finite numbers"),
    ("transform", 5, "transform: transform must be six finite numbers, got 5"),   # not even a sequence
    ("raster_type", "pixel", "raster_type: raster_type must be 'area' or 'point', got 'pixel'"),
    ("header", None, "header must be the blob's bytes, got NoneType"),
]


@pytest.mark.parametrize(("column", "value", "message"), MALFORMED)
def test_a_malformed_row_is_refused_naming_the_row_and_the_field(catalog, column, value, message):
    table, paths = catalog
    table[column] = table[column].astype(object)
    table.at[1, column] = value
    for opener in (open_catalog, open_collection):
        with pytest.raises(ValueError, match=f"catalog row 1 \\({str(paths[1])!r}\\): {message}"):
            opener(table)


def test_a_singular_row_transform_is_refused_as_write_refuses_it(catalog):
    table, paths = catalog
    table["transform"] = [[10.0, 10.0, 500000.0, 10.0, 10.0, 4000000.0]] * 2
    with pytest.raises(ValueError, match=r"catalog row 0 .*: transform: transform is singular \(a\*e - b\*d == 0\)"):
        open_catalog(table)
    with pytest.raises(ValueError, match=r"transform is singular \(a\*e - b\*d == 0\)"):
        xarray_rumi.write(paths[0], np.zeros((1, 8, 8), "uint8"), crs=32633, transform=table["transform"][0])


@pytest.mark.parametrize(("column", "stale"), [("epsg", 32632), ("transform", [10.0, 0.0, 500100.0, 0.0, -10.0, 4e6]),
                                               ("raster_type", "point")])
def test_a_stale_row_is_refused_at_the_first_read_naming_the_row_and_the_file(catalog, column, stale):
    table, paths = catalog
    table[column] = table[column].astype(object)
    table.at[1, column] = stale
    first, second = open_catalog(table, chunks={})
    assert int(first.band_data[0, 0, 0]) == 0   # the other row is right
    with pytest.raises(RumiFormatError, match=f"georeferencing.matches-file: catalog row 1 \\({str(paths[1])!r}\\) "
                                              f"says .*; the tags of {paths[1]} say EPSG:32633, PixelIsArea"):
        second.band_data.values
    tree = open_collection(table)
    with pytest.raises(RumiFormatError, match="georeferencing.matches-file: catalog row 1"):
        tree["grid_1"].dataset.band_data.values


def test_a_stale_item_is_refused_at_the_first_read_naming_the_item(catalog):
    _, paths = catalog
    items = [item(path, datetime="2024-05-01T10:00:00Z").to_dict() for path in paths]
    items[1]["properties"]["proj:transform"] = [10.0, 0.0, 500100.0, 0.0, -10.0, 4000000.0]   # hand-edited
    cube = xarray_rumi.open_collection(items)["grid_1"].dataset
    with pytest.raises(RumiFormatError, match=f"STAC Item 'img1' says .*500100.*; the tags of {paths[1]} say"):
        cube.band_data.values
    for opened in (xarray_rumi.open_catalog(items)[1], xarray_rumi.open_cube(items[1:])):
        with pytest.raises(RumiFormatError, match="georeferencing.matches-file: STAC Item 'img1'"):
            opened.band_data.values


def test_empty_lists_are_refused_in_words(catalog):
    with pytest.raises(ValueError, match="open_collection needs at least one path or STAC Item, got an empty list"):
        open_collection([])
    with pytest.raises(ValueError, match="a catalog is a Parquet path .*, a DataFrame or STAC Items; got an empty list"):
        open_catalog([])
    _, paths = catalog
    with pytest.raises(ValueError, match="got a list of PosixPath"):
        open_catalog(paths)
