"""Band attributes from STAC: rioxarray's names and rules, one value per variable or refused."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from xarray_rumi.dataset.band_attrs import band_attrs, described_variable
from xarray_rumi.stac.read import StacBand

ITEM = "STAC Item 'a'"


def test_bands_that_agree_give_one_value_and_names_and_units_one_a_band():
    bands = (StacBand("red", 0, 0.5, 1.0, "m"), StacBand("nir", 0, 0.5, 1.0, "m"))
    assert band_attrs(bands, "uint8", ITEM) == {"_FillValue": np.uint8(0), "scale_factor": 0.5, "add_offset": 1.0,
                                                "long_name": ("red", "nir"), "units": ("m", "m")}


def test_scales_and_offsets_that_differ_are_kept_per_band_without_the_cf_attribute():
    attrs = band_attrs((StacBand(scale=0.5), StacBand(offset=2.0)), "int16", ITEM)
    assert attrs == {"scales": (0.5, 1.0), "offsets": (0.0, 2.0)}
    variable = xr.Variable(("band",), np.array([1, 1], "int16"))
    with pytest.raises(ValueError, match="different scales or offsets, which mask_and_scale=True cannot apply"):
        described_variable(variable, (StacBand(scale=0.5), StacBand(scale=2.0)), ITEM, mask_and_scale=True)


def test_nodata_spelt_as_stac_spells_it_and_refused_where_it_cannot_be_one_value():
    assert np.isnan(band_attrs((StacBand(nodata="nan"),), "float32", ITEM)["_FillValue"])
    assert band_attrs((StacBand(nodata="-inf"),), "float64", ITEM)["_FillValue"] == -np.inf
    with pytest.raises(ValueError, match=r"STAC Item 'a': nodata -1 is not a value of its uint16 samples"):
        band_attrs((StacBand(nodata=-1),), "uint16", ITEM)
    with pytest.raises(ValueError, match="its bands give different nodata"):
        band_attrs((StacBand(nodata=0), StacBand(nodata=1)), "uint8", ITEM)
    with pytest.raises(ValueError, match="its bands give different nodata"):
        band_attrs((StacBand(nodata=0), StacBand()), "uint8", ITEM)


def test_nothing_said_gives_no_attribute_and_values_stay_as_stored_unless_asked():
    assert band_attrs((StacBand(), StacBand()), "uint8", ITEM) == {}
    variable = xr.Variable(("band",), np.array([0, 4], "uint8"))
    kept = described_variable(variable, (StacBand(nodata=0, scale=0.5),), ITEM)
    assert kept.values.tolist() == [0, 4] and kept.attrs["scale_factor"] == 0.5
    decoded = described_variable(variable, (StacBand(nodata=0, scale=0.5),), ITEM, mask_and_scale=True)
    assert np.isnan(decoded.values[0]) and decoded.values[1] == 2.0 and "scale_factor" not in decoded.attrs
