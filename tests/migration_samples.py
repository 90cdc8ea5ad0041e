"""STAC Items of generated tiled GeoTIFFs (COGs to the readers) as archives publish them: several assets per Item on two grids, band metadata."""

from __future__ import annotations

import datetime as dt
import os

import numpy as np

from xarray_rumi.format.geo import Georeferencing
from xarray_rumi.stac.items import footprint

#: Assets of each Item: key -> (pixel size in m, bands, dtype). Two at 10 m, one at 20 m: two grids.
ASSETS = {"B02": (10, 1, "uint16"), "B03": (10, 1, "uint16"), "SWIR": (20, 2, "int16")}
SIZE_10M = 96
NODATA = {"uint16": 0, "int16": -9999}
SCALE, OFFSET = 0.0001, -0.1
COG = "image/tiff; application=geotiff; profile=cloud-optimized"


def asset_pixels(item_index: int, key: str) -> np.ndarray:
    resolution, bands, dtype = ASSETS[key]
    side = SIZE_10M * 10 // resolution
    rng = np.random.default_rng([item_index, sum(map(ord, key))])
    data = rng.integers(1, 3000, (bands, side, side)).astype(dtype)
    data[:, :5, :7] = NODATA[dtype]
    return data


def write_cog(path: str, data: np.ndarray, resolution: int, x0: float, y0: float, *, descriptions=None) -> None:
    import rasterio
    from affine import Affine

    bands, rows, cols = data.shape
    with rasterio.open(path, "w", driver="GTiff", width=cols, height=rows, count=bands, dtype=data.dtype,
                       crs="EPSG:32633", transform=Affine(resolution, 0, x0, 0, -resolution, y0),
                       nodata=NODATA[data.dtype.name], tiled=True, blockxsize=32, blockysize=32,
                       compress="deflate") as out:
        out.write(data)
        out.scales = [SCALE] * bands
        out.offsets = [OFFSET] * bands
        out.units = ["reflectance"] * bands
        for band, text in enumerate(descriptions or [], 1):
            out.set_band_description(band, text)


def make_items(root, count: int = 2) -> list:
    """``count`` pystac Items, each with the :data:`ASSETS` as COGs (Item metadata as a publisher writes it)."""
    import pystac

    items = []
    for index in range(count):
        x0, y0 = 500000 + index * SIZE_10M * 10, 5000000
        geometry, bbox = footprint(Georeferencing(32633, 2, 1, (10, 0, x0, 0, -10, y0)), SIZE_10M, SIZE_10M)
        item = pystac.Item(f"scene-{index}", geometry, bbox,
                           dt.datetime(2024, 5, 1 + index, 10, tzinfo=dt.UTC), {"platform": "test-sat", "eo:cloud_cover": 3},
                           stac_extensions=["https://stac-extensions.github.io/eo/v1.1.0/schema.json",
                                            "https://stac-extensions.github.io/raster/v1.1.0/schema.json",
                                            "https://stac-extensions.github.io/projection/v2.0.0/schema.json"])
        for key, (resolution, bands, dtype) in ASSETS.items():
            path = os.path.join(root, f"{item.id}_{key}.tif")
            write_cog(path, asset_pixels(index, key), resolution, x0, y0)
            names = [key] if bands == 1 else [f"{key}_{b}" for b in range(1, bands + 1)]
            item.add_asset(key, pystac.Asset(path, media_type=COG, roles=["data"], extra_fields={
                "proj:code": "EPSG:32633", "proj:shape": [SIZE_10M * 10 // resolution] * 2,
                "proj:transform": [resolution, 0, x0, 0, -resolution, y0],
                "eo:bands": [{"name": name} for name in names],
                "raster:bands": [{"data_type": dtype, "nodata": NODATA[dtype], "scale": SCALE, "offset": OFFSET,
                                  "unit": "reflectance"} for _ in names],
            }))
        item.add_asset("thumbnail", pystac.Asset("https://example.invalid/thumb.png", media_type="image/png",
                                                 roles=["thumbnail"]))
        items.append(item)
    return items
