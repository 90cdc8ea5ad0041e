"""A catalog row's bounds: PixelIsPoint pixels have the edges of the same grid as PixelIsArea."""

from __future__ import annotations

from xarray_rumi.dataset.catalog import _bounds
from xarray_rumi.format.geo import Georeferencing, ModelType, RasterType, corner_to_centre


def test_a_point_raster_has_the_bounds_of_the_same_grid_as_area():
    corner = (0.1, 0.0, 5.123456789, 0.0, -0.1, 44.9)   # values where shifting the indices instead rounds otherwise
    area = Georeferencing(4326, ModelType.GEOGRAPHIC, RasterType.AREA, corner)
    point = Georeferencing(4326, ModelType.GEOGRAPHIC, RasterType.POINT, corner_to_centre(corner))
    assert _bounds(point, 53, 37) == _bounds(area, 53, 37) == (5.123456789, 41.199999999999996, 10.423456789, 44.9)
