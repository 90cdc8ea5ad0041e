"""cube_references stacks along the dimension every stacking opener defaults to."""

from __future__ import annotations

import inspect
import json

import numpy as np

import xarray_rumi
from xarray_rumi.virtual.kerchunk import cube_references


def test_cube_references_defaults_to_the_stacking_openers_dimension(tmp_path):
    paths = [str(tmp_path / f"t{n}.rumi") for n in range(2)]
    for n, path in enumerate(paths):
        xarray_rumi.write(path, np.full((1, 8, 8), n, "uint8"), tile_size=4)
    refs = cube_references(paths)
    default = inspect.signature(xarray_rumi.open_cube).parameters["dim"].default
    assert inspect.signature(xarray_rumi.open_collection).parameters["dim"].default == default
    assert refs == cube_references(paths, default)
    assert json.loads(refs["refs"]["band_data/.zattrs"])["_ARRAY_DIMENSIONS"][0] == default
