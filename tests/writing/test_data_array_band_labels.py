"""rumi numbers its bands 1..B and stores no labels: a band coordinate that says otherwise is named in a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi.writing.data_array import BandLabelsNotStoredWarning

VALUES = np.arange(3 * 8 * 10, dtype="uint16").reshape(3, 8, 10)


def _array(dim="band", labels=(1, 2, 3)):
    coords = {} if labels is None else {dim: list(labels)}
    return xr.DataArray(VALUES, dims=(dim, "y", "x"), coords=coords)


def test_selected_bands_are_named_with_what_they_read_back_as(tmp_path, write_each_way):
    picked = _array().isel(band=[2, 0])
    with pytest.warns(BandLabelsNotStoredWarning) as caught:
        write_each_way(tmp_path / "a.rumi", picked, tile_size=8)
    assert str(caught[0].message) == ("band labels are not stored: rumi has no place for them; dimension 'band' "
                                      "labelled [3, 1] reads back as band 1..2, in the order written")
    back = xr.open_dataset(tmp_path / "a.rumi", engine="rumi").band_data
    assert list(back.band.values) == [1, 2]
    np.testing.assert_array_equal(back.values, picked.values)


def test_dates_and_long_label_lists_are_shown_short(tmp_path):
    with pytest.warns(BandLabelsNotStoredWarning, match=r"dimension 'time' labelled \[2024-01-01, 2024-01-02, "
                                                         r"2024-01-03\] reads back as band 1\.\.3"):
        xarray_rumi.write(tmp_path / "a.rumi", _array("time", pd.date_range("2024-01-01", periods=3)), tile_size=8)
    many = xr.DataArray(np.zeros((9, 4, 4), "uint8"), dims=("band", "y", "x"), coords={"band": np.arange(9) * 10})
    with pytest.warns(BandLabelsNotStoredWarning, match=r"labelled \[0, 10, 20, \.\.\., 70, 80\] reads back as band 1\.\.9"):
        xarray_rumi.write(tmp_path / "b.rumi", many, tile_size=4)


@pytest.mark.parametrize("data", [
    _array(),                                      # rioxarray's labels, what reading back gives
    _array(labels=(1.0, 2.0, 3.0)),
    _array(labels=None),                           # a band dimension without a coordinate
    VALUES,                                        # numpy: nothing to lose
    _array().isel(band=0),                         # 2-D: its scalar band label is not a dimension
], ids=["1..B", "1.0..B", "no-coordinate", "numpy", "2-D"])
def test_nothing_is_said_when_nothing_is_lost(tmp_path, data):
    with warnings.catch_warnings():
        warnings.simplefilter("error", BandLabelsNotStoredWarning)
        xarray_rumi.write(tmp_path / "a.rumi", data, tile_size=8)


def test_a_written_file_read_back_writes_again_without_a_warning(tmp_path):
    xarray_rumi.write(tmp_path / "a.rumi", VALUES, tile_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BandLabelsNotStoredWarning)
        xr.open_dataset(tmp_path / "a.rumi", engine="rumi").band_data.rumi.to_rumi(tmp_path / "b.rumi")
