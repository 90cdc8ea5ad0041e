"""Fixtures of tests/dataset: aligned images written once per test, as every opener's tests need them."""

from __future__ import annotations

import numpy as np
import pytest

import xarray_rumi

#: The georeferencing that ``write_images`` gives unless told otherwise.
CRS, TRANSFORM = 32633, (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)


@pytest.fixture
def write_images(tmp_path):
    """``write_images(fills, shape=(2, 32, 32), ...) -> paths``: image ``i`` holds ``fills[i]`` everywhere.

    ``directory`` defaults to ``tmp_path``; ``dtype`` to ``uint16``; other
    keywords go to :func:`xarray_rumi.write` (``tile_size=16``, ``crs`` and
    ``transform`` of :data:`CRS` / :data:`TRANSFORM` unless given; ``crs=None,
    transform=None`` writes none).
    """

    def write(fills, shape=(2, 32, 32), *, directory=None, dtype="uint16", **write_kwargs):
        directory = tmp_path if directory is None else directory
        write_kwargs = {"tile_size": 16, "crs": CRS, "transform": TRANSFORM, **write_kwargs}
        paths = [directory / f"img{i}.rumi" for i in range(len(fills))]
        for path, fill in zip(paths, fills):
            xarray_rumi.write(path, np.full(shape, fill, dtype), **write_kwargs)
        return paths

    return write
