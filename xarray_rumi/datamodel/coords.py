"""Spatial coordinates and the CF grid mapping, exactly as rioxarray's engine builds them (numpy and pyproj only)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..format.geo import IDENTITY, Georeferencing, RasterType, centre_to_corner

GRID_MAPPING = "spatial_ref"


def corner_transform(georef: Georeferencing | None) -> tuple[float, ...]:
    """GDAL's corner affine ``(a, b, c, d, e, f)`` (PixelIsPoint shifted half a pixel), or the identity."""
    if georef is None or not georef.is_defined:
        return IDENTITY
    if georef.raster_type is RasterType.POINT:
        return centre_to_corner(georef.transform)
    return georef.transform


def spatial_coords(transform: tuple[float, ...], width: int, height: int) -> dict:
    """Pixel-centre ``{name: (dims, values)}`` as rioxarray's ``affine_to_coords`` (``xc``/``yc`` if rotated)."""
    a, b, c, d, e, f = transform
    # the affine package's order of operations, so values are identical to rioxarray's
    c, f = a * 0.5 + b * 0.5 + c, d * 0.5 + e * 0.5 + f
    cols, rows = np.arange(width), np.arange(height)
    if b == 0 and d == 0:
        return {"x": (("x",), cols * a + 0 * b + c), "y": (("y",), 0 * d + rows * e + f)}
    col_grid, row_grid = np.meshgrid(cols, rows)
    return {
        "xc": (("y", "x"), col_grid * a + row_grid * b + c),
        "yc": (("y", "x"), col_grid * d + row_grid * e + f),
    }


@lru_cache(maxsize=256)
def _crs_attrs(epsg: int) -> tuple[tuple[str, object], ...]:
    from pyproj import CRS

    # rioxarray's WKT is GDAL's WKT1 with AXIS clauses, its CF attributes derived from it
    wkt = CRS.from_epsg(epsg).to_wkt("WKT1_GDAL", output_axis_rule=True)
    attrs = CRS.from_wkt(wkt).to_cf()
    attrs["spatial_ref"] = wkt
    attrs["crs_wkt"] = wkt
    return tuple(attrs.items())


def grid_mapping_attrs(georef: Georeferencing | None) -> dict:
    """``spatial_ref``'s attributes: CF grid mapping, WKT, GeoTransform (only that without a CRS)."""
    attrs = dict(_crs_attrs(georef.epsg)) if georef is not None and georef.is_defined else {}
    a, b, c, d, e, f = (float(v) for v in corner_transform(georef))
    attrs["GeoTransform"] = f"{c} {a} {b} {f} {d} {e}"   # GDAL's order, as rioxarray writes it
    return attrs
