"""PixelIsPoint's half pixel: one pair of functions moves between GDAL's pixel corners and a rumi matrix's centres."""

from __future__ import annotations

import numpy as np
import pytest
from affine import Affine

from xarray_rumi.format.geo import centre_to_corner, corner_to_centre

TRANSFORMS = [
    (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0),
    (0.1, 0.0, 5.123456789, 0.0, -0.1, 44.9),
    (1 / 3, 0.0002, -179.99, 0.0003, -1 / 3, 89.7),   # rotated
]


@pytest.mark.parametrize("corner", TRANSFORMS)
def test_corner_to_centre_is_gdals_half_pixel_step(corner):
    # GDAL (and rioxarray's coordinates) place a pixel centre at transform * (i + 0.5, j + 0.5): the same bits
    assert corner_to_centre(corner) == tuple(Affine(*corner) * Affine.translation(0.5, 0.5))[:6]
    assert corner_to_centre(Affine(*corner)) == corner_to_centre(corner)   # an Affine's first six values


@pytest.mark.parametrize("corner", TRANSFORMS)
def test_centre_to_corner_undoes_it(corner):
    back = centre_to_corner(corner_to_centre(corner))
    np.testing.assert_allclose(back, corner, rtol=0, atol=1e-9)
    assert back[:2] == corner[:2] and back[3:5] == corner[3:5]   # only the origin moves
