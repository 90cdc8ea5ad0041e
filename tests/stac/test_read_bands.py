"""What an Item's asset says of its bands: names from eo:bands or bands, the rest from raster:bands or bands."""

from __future__ import annotations

from xarray_rumi.stac.read import StacBand, asset_bands


def test_eo_bands_names_and_raster_bands_fields_go_together_band_by_band():
    asset = {"eo:bands": [{"name": "red", "common_name": "red"}, {"name": "nir"}],
             "raster:bands": [{"nodata": 0, "scale": 0.01, "offset": -1, "unit": "m", "data_type": "uint16"},
                              {"nodata": 0}]}
    assert asset_bands(asset) == (StacBand("red", 0, 0.01, -1, "m"), StacBand("nir", 0, None, None, None))


def test_stac_1_1_bands_give_names_and_raster_fields():
    asset = {"bands": [{"name": "b1", "nodata": "nan", "raster:scale": 2.0, "raster:offset": 1.0, "unit": "K"}]}
    assert asset_bands(asset) == (StacBand("b1", "nan", 2.0, 1.0, "K"),)


def test_an_asset_that_says_nothing_of_its_bands_gives_none_and_nulls_are_absent():
    assert asset_bands({"href": "a.rumi"}) == ()
    # stac-geoparquet's structs: every member any row has, null where this one has none
    assert asset_bands({"raster:bands": [{"nodata": None, "scale": None, "data_type": "uint8"}],
                        "eo:bands": None}) == (StacBand(),)
