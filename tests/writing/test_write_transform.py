"""``transform=`` is refused when it would not give every pixel its own place, or is not affine."""

import affine
import numpy as np
import pytest

import xarray_rumi

DATA = np.arange(2 * 16 * 24, dtype="uint16").reshape(2, 16, 24)


@pytest.mark.parametrize("transform, words", [
    ((0, 0, 399960, 0, -10, 5000040), "a zero x resolution puts every column at the same x"),
    ((10, 0, 399960, 0, 0, 5000040), "a zero y resolution puts every row at the same y"),
    ((10, 10, 399960, 10, 10, 5000040), "transform is singular (a*e - b*d == 0): pixels would not have distinct"),
])
def test_singular_transform_is_refused(tmp_path, transform, words):
    with pytest.raises(ValueError, match="singular") as refused:
        xarray_rumi.write(tmp_path / "a.rumi", DATA, crs=32633, transform=transform)
    assert words in str(refused.value)
    assert not (tmp_path / "a.rumi").exists()


def test_nine_numbers_must_end_in_the_affine_row(tmp_path):
    with pytest.raises(ValueError, match=r"a 9-number transform must end in 0, 0, 1 .*got 7, 7, 7"):
        xarray_rumi.write(tmp_path / "a.rumi", DATA, crs=32633, transform=(10, 0, 399960, 0, -10, 5000040, 7, 7, 7))


@pytest.mark.parametrize("transform", [(10, 0, 399960, 0, -10), (10, 0, 399960, 0, -10, 5000040, 0, 1)])
def test_neither_six_nor_nine_numbers_is_refused(tmp_path, transform):
    with pytest.raises(ValueError, match="transform must be six finite numbers"):
        xarray_rumi.write(tmp_path / "a.rumi", DATA, crs=32633, transform=transform)


@pytest.mark.parametrize("transform", [affine.Affine(10, 0, 399960, 0, -10, 5000040),
                                       (10, 0, 399960, 0, -10, 5000040, 0, 0, 1),
                                       (10, 2, 399960, 3, -10, 5000040)])
def test_affine_objects_nine_numbers_and_rotations_are_written(tmp_path, transform):
    xarray_rumi.write(tmp_path / "a.rumi", DATA, crs=32633, transform=transform)
    assert xarray_rumi.open_image(tmp_path / "a.rumi").georeferencing.transform == tuple(transform)[:6]
