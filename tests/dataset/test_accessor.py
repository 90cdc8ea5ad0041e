"""``Dataset.rumi.to_rumi``: which data variable it writes, and the refusal where that is not clear."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import xarray_rumi

DIMS = ("band", "y", "x")


def _variable(fill):
    return xr.DataArray(np.full((1, 8, 8), fill, "uint8"), dims=DIMS)


@pytest.mark.parametrize(("variables", "chosen", "written"), [
    ({"band_data": 1, "other": 2}, None, 1),   # band_data, as the engine names it
    ({"only": 3}, None, 3),                    # the only one
    ({"band_data": 1, "other": 2}, "other", 2),
])
def test_dataset_writes_the_variable_it_names(tmp_path, variables, chosen, written):
    dataset = xr.Dataset({name: _variable(fill) for name, fill in variables.items()})
    path = tmp_path / "a.rumi"
    blob = dataset.rumi.to_rumi(path, chosen, tile_size=8)
    assert (xarray_rumi.open_image(path, blob).read() == written).all()


def test_a_dataset_of_several_variables_none_band_data_needs_variable(tmp_path):
    dataset = xr.Dataset({"a": _variable(1), "b": _variable(2)})
    with pytest.raises(ValueError, match=r"several variables \['a', 'b'\]; pass variable="):
        dataset.rumi.to_rumi(tmp_path / "a.rumi")
