"""Round trip: converted Items opened with open_cube, open_collection and open_catalog give back what the sources had.

Band names, nodata, scale, offset and units as rioxarray gives them for the source GeoTIFFs, every pixel.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

rasterio = pytest.importorskip("rasterio", reason="rasterio is not installed (the geo extra)")
pystac = pytest.importorskip("pystac", reason="pystac is not installed (the stac extra)")
rioxarray = pytest.importorskip("rioxarray", reason="rioxarray is not installed")

import xarray_rumi  # noqa: E402
from migration_samples import ASSETS, asset_pixels, make_items, write_cog  # noqa: E402
from xarray_rumi.stac import convert_items  # noqa: E402

#: The attributes rioxarray's open_rasterio gives a GeoTIFF's band metadata, compared with the source's.
RIOXARRAY_ATTRS = ("_FillValue", "scale_factor", "add_offset", "units")


def _one_grid_items(root) -> list:
    """Two Items whose assets share their grids (the second's COGs rewritten onto the first's), days apart."""
    items = make_items(root, count=2)
    first_transform = {key: items[0].assets[key].extra_fields["proj:transform"] for key in ASSETS}
    for key, (resolution, _, _) in ASSETS.items():
        _, _, x0, _, _, y0 = first_transform[key]
        write_cog(items[1].assets[key].href, asset_pixels(1, key), resolution, x0, y0)
        items[1].assets[key].extra_fields["proj:transform"] = first_transform[key]
    items[1].geometry, items[1].bbox = copy.deepcopy(items[0].geometry), list(items[0].bbox)
    return items


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """``(source Items, converted Items)`` on one grid per asset, converted once for the module."""
    root = tmp_path_factory.mktemp("roundtrip")
    os.makedirs(root / "cogs")
    sources = _one_grid_items(str(root / "cogs"))
    return sources, convert_items(sources, root / "rumi", scheduler="synchronous")


def _source(sources, index: int, key: str, **kwargs):
    return rioxarray.open_rasterio(sources[index].assets[key].href, **kwargs)


@pytest.mark.parametrize("key", list(ASSETS))
def test_open_cube_gives_back_each_assets_pixels_names_and_band_metadata(migrated, key):
    sources, converted = migrated
    cube = xarray_rumi.open_cube(converted, assets=key)
    variable = cube[key]
    np.testing.assert_array_equal(variable.values, np.stack([asset_pixels(i, key) for i in range(2)]))
    source = _source(sources, 0, key)
    for name in RIOXARRAY_ATTRS:
        assert variable.attrs[name] == source.attrs[name], name
    assert type(variable.attrs["_FillValue"]) is type(source.attrs["_FillValue"])
    assert variable.rio.nodata == source.rio.nodata and variable.dtype == source.dtype
    names = [band["name"] for band in sources[0].assets[key].extra_fields["eo:bands"]]
    assert variable.attrs["long_name"] == (names[0] if len(names) == 1 else tuple(names))
    assert list(cube.time.values) == [np.datetime64(item.datetime.replace(tzinfo=None)) for item in sources]
    assert cube.band.values.tolist() == list(range(1, len(names) + 1))  # rioxarray's 1-based bands, kept


def test_mask_and_scale_decodes_as_rioxarray_decodes_the_source(migrated):
    sources, converted = migrated
    cube = xarray_rumi.open_cube(converted, assets="SWIR", mask_and_scale=True)
    expected = _source(sources, 1, "SWIR", mask_and_scale=True)
    got = cube.SWIR[1]
    np.testing.assert_array_equal(np.isnan(got.values), np.isnan(expected.values))
    np.testing.assert_allclose(got.values, expected.values, atol=1e-7)  # rioxarray computes in float32
    for name in ("_FillValue", "scale_factor", "add_offset"):
        assert name not in got.attrs and got.encoding[name] == expected.encoding[name]
    # without it, values are as stored
    assert xarray_rumi.open_cube(converted, assets="SWIR").SWIR.dtype == np.int16


def test_assets_on_one_grid_are_variables_of_one_cube_lazy_or_chunked(migrated):
    _, converted = migrated
    for chunks in (None, {}):
        cube = xarray_rumi.open_cube(converted, assets=["B02", "B03"], chunks=chunks)
        assert list(cube.data_vars) == ["B02", "B03"]
        for key in ("B02", "B03"):
            np.testing.assert_array_equal(cube[key].values, np.stack([asset_pixels(i, key) for i in range(2)]))
            assert cube[key].attrs["long_name"] == key


def test_assets_on_other_grids_are_refused_naming_them(migrated):
    _, converted = migrated
    with pytest.raises(ValueError, match=r"assets 'B02' and 'SWIR' are not on one grid: shape"):
        xarray_rumi.open_cube(converted, assets=["B02", "SWIR"])


def test_an_item_of_several_rumi_assets_needs_assets_and_an_unknown_key_is_named(migrated):
    _, converted = migrated
    with pytest.raises(ValueError, match=r"\('B02', 'B03', 'SWIR'\).*choose with assets="):
        xarray_rumi.open_cube(converted)
    with pytest.raises(ValueError, match=r"STAC Item 'scene-0' has no rumi asset 'thumbnail'.*\['B02', 'B03', 'SWIR'\]"):
        xarray_rumi.open_cube(converted, assets="thumbnail")


def test_assets_is_refused_with_paths(migrated):
    _, converted = migrated
    with pytest.raises(ValueError, match="assets= chooses among the rumi assets of STAC Items"):
        xarray_rumi.open_cube([converted[0].assets["B02"].href], assets="B02")


def test_items_that_disagree_on_an_assets_nodata_are_refused_naming_them(migrated):
    _, converted = migrated
    changed = copy.deepcopy([item.to_dict() for item in converted])
    changed[1]["assets"]["B02"]["raster:bands"][0]["nodata"] = 7
    with pytest.raises(ValueError, match=r"STAC Item 'scene-0' and STAC Item 'scene-1' describe asset 'B02'"):
        xarray_rumi.open_cube(changed, assets="B02")


def test_open_collection_gives_one_node_per_asset_with_its_grids(tmp_path, migrated):
    sources, converted = migrated
    tree = xarray_rumi.open_collection(converted, assets=list(ASSETS))
    assert list(tree.children) == list(ASSETS)
    swir = tree["SWIR"]["grid_0"].dataset
    np.testing.assert_array_equal(swir.SWIR.values, np.stack([asset_pixels(i, "SWIR") for i in range(2)]))
    source = _source(sources, 0, "SWIR")
    assert all(swir.SWIR.attrs[name] == source.attrs[name] for name in RIOXARRAY_ATTRS)
    assert swir.SWIR.attrs["long_name"] == ("SWIR_1", "SWIR_2")
    # Items side by side: one grid each, per asset
    os.makedirs(tmp_path / "cogs")
    apart_sources = make_items(str(tmp_path / "cogs"))
    apart = convert_items(apart_sources, tmp_path / "rumi", scheduler="synchronous")
    tree = xarray_rumi.open_collection(apart, assets="B03", mask_and_scale=True)
    assert list(tree["B03"].children) == ["grid_0", "grid_1"]
    expected = _source(apart_sources, 1, "B03", mask_and_scale=True)
    got = tree["B03"]["grid_1"].dataset.B03[0]
    np.testing.assert_array_equal(np.isnan(got.values), np.isnan(expected.values))
    np.testing.assert_allclose(got.values, expected.values, atol=1e-7)


def test_open_catalog_rows_from_items_carry_their_band_attributes(migrated):
    sources, converted = migrated
    datasets = xarray_rumi.open_catalog(converted, assets="SWIR")
    assert len(datasets) == 2
    for index, dataset in enumerate(datasets):
        np.testing.assert_array_equal(dataset.SWIR.values, asset_pixels(index, "SWIR"))
        source = _source(sources, index, "SWIR")
        assert all(dataset.SWIR.attrs[name] == source.attrs[name] for name in RIOXARRAY_ATTRS)
    with pytest.raises(ValueError, match="open_catalog opens one asset of each Item"):
        xarray_rumi.open_catalog(converted, assets=["B02", "B03"])


def test_stac_geoparquet_of_converted_items_gives_the_same_attributes(tmp_path, migrated):
    pytest.importorskip("stac_geoparquet", reason="stac-geoparquet is not installed (the stac extra)")
    from xarray_rumi.stac import write_stac_geoparquet

    _, converted = migrated
    write_stac_geoparquet(converted, tmp_path / "items.parquet")
    from_parquet = xarray_rumi.open_collection(str(tmp_path / "items.parquet"), assets=["B02", "SWIR"])
    from_items = xarray_rumi.open_collection(converted, assets=["B02", "SWIR"])
    for key in ("B02", "SWIR"):
        got, expected = from_parquet[key]["grid_0"].dataset[key], from_items[key]["grid_0"].dataset[key]
        assert got.attrs == expected.attrs
        np.testing.assert_array_equal(got.values, expected.values)
