"""Catalogs: a Parquet table, one row per image with its blob, so images open with no read (docs/backend.md)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..datamodel.variable import VARIABLE, image_layout
from ..format.blob import Header
from ..datamodel.coords import corner_transform
from ..format.geo import Georeferencing, georeferencing
from ..reading.image import RumiImage
from ..reading.open import load_headers, open_image
from ..stac.read import is_stac, is_stac_geoparquet, item_images, stac_geoparquet_images

COLUMNS = (
    "url", "header", "bands", "height", "width", "tile_height", "tile_width", "frame_unit", "sample_type",
    "epsg", "raster_type", "transform", "minx", "miny", "maxx", "maxy",
)


def _row(url: str, storage_options) -> dict:
    image = open_image(url, storage_options=storage_options)
    return _image_row(url, image.header, image.georeferencing)


def _image_row(url: str, header: Header, georef: Georeferencing) -> dict:
    grid = header.grid
    minx, miny, maxx, maxy = _bounds(georef, grid.image_width, grid.image_length)
    return {
        "url": url, "header": header.to_bytes(), "bands": grid.samples_per_pixel,
        "height": grid.image_length, "width": grid.image_width, "tile_height": grid.tile_length,
        "tile_width": grid.tile_width, "frame_unit": grid.frame_unit.name.lower(),
        "sample_type": header.sample_type.name, "epsg": georef.epsg if georef.is_defined else None,
        "raster_type": georef.raster_type.name.lower(), "transform": list(georef.transform),
        "minx": minx, "miny": miny, "maxx": maxx, "maxy": maxy,
    }


def _bounds(georef: Georeferencing, width: int, height: int) -> tuple[float, float, float, float]:
    a, b, c, d, e, f = corner_transform(georef)
    cols, rows = np.array([0, width, 0, width]), np.array([0, 0, height, height])
    xs, ys = a * cols + b * rows + c, d * cols + e * rows + f
    return float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())


def build(paths_or_urls, out, *, storage_options=None):
    """Write a Parquet catalog of rumi images to ``out`` (GeoParquet with geopandas); return it as a DataFrame.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, f"{i}.rumi") for i in range(2)]
    >>> for p in paths:
    ...     _ = xarray_rumi.write(p, np.zeros((1, 32, 32), "uint8"), tile_size=16)
    >>> build(paths, os.path.join(d, "catalog.parquet"))["width"].tolist()
    [32, 32]
    """
    import pandas as pd

    table = pd.DataFrame([_row(os.fspath(u), storage_options) for u in paths_or_urls], columns=list(COLUMNS))
    table["epsg"] = table["epsg"].astype("Int64")
    try:
        import geopandas
        from shapely.geometry import box
    except ImportError:
        table.to_parquet(out, index=False)
        return table
    geometry = [box(r.minx, r.miny, r.maxx, r.maxy) for r in table.itertuples()]
    frame = geopandas.GeoDataFrame(table, geometry=geometry, crs=None)  # no CRS: rows may differ
    frame.to_parquet(out, index=False)
    return frame


def read(catalog):
    """A catalog as a DataFrame, from a Parquet path (a rumi catalog or stac-geoparquet), a DataFrame or STAC Items."""
    return _read_checked(catalog)[0]


def _read_checked(catalog, asset=None):
    """``(DataFrame, checked headers, ItemImages)``; the last two ``None`` for a rumi catalog."""
    if is_stac(catalog):
        return _rows_and_headers(item_images(catalog, asset))
    if isinstance(catalog, (list, tuple)):
        what = "an empty list" if not catalog else f"a list of {type(catalog[0]).__name__}"
        raise ValueError(f"a catalog is a Parquet path (a rumi catalog or stac-geoparquet), a DataFrame or STAC Items; "
                         f"got {what}")
    is_table = hasattr(catalog, "itertuples")
    if not is_table and is_stac_geoparquet(catalog):
        return _rows_and_headers(stac_geoparquet_images(catalog, asset))
    if asset is not None:
        raise ValueError("assets= chooses among the rumi assets of STAC Items; a rumi catalog's rows are one "
                         "image each")
    import pandas as pd

    return (catalog if is_table else pd.read_parquet(catalog)), None, None


def _rows_and_headers(images):
    import pandas as pd

    images = list(images)
    headers = load_headers([image.blob for image in images], [image.href for image in images])
    shared: dict[tuple, dict] = {}
    rows = []
    for image, header in zip(images, headers):
        alike = (header.grid, header.sample_type, image.georeferencing)
        if alike not in shared:
            shared[alike] = _image_row(image.href, header, image.georeferencing)
        rows.append(shared[alike])
    columns = {name: [row[name] for row in rows] for name in COLUMNS}
    columns.update(url=[image.href for image in images], header=[header.to_bytes() for header in headers],
                   id=[image.id for image in images], datetime=[image.datetime for image in images])
    table = pd.DataFrame(columns, columns=[*COLUMNS, "id", "datetime"])
    table["epsg"] = table["epsg"].astype("Int64")
    return table, headers, images


def _epsg(value):
    import pandas as pd

    if value is None or (not isinstance(value, (str, bytes)) and pd.isna(value)):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)) and float(value).is_integer():
        return int(value)
    return value


def catalog_images(catalog, storage_options=None, asset=None) -> tuple:
    """``(DataFrame, opened images, ItemImages or None)`` of a catalog, nothing read."""
    table, headers, recorded = _read_checked(catalog, asset)
    urls = [str(url) for url in table["url"]]
    if "id" in table.columns:
        names = [f"STAC Item {item_id!r}" for item_id in table["id"].tolist()]
    else:
        names = [f"catalog row {position} ({url!r})" for position, url in enumerate(urls)]
    if headers is None:
        for blob, name in zip(table["header"], names):
            if not isinstance(blob, (bytes, bytearray, memoryview)):
                raise ValueError(f"{name}: header must be the blob's bytes, got {type(blob).__name__}")
        headers = load_headers([bytes(blob) for blob in table["header"]], urls, storage_options)
    shared: dict[tuple, Georeferencing] = {}
    images = []
    for url, name, header, epsg, raster_type, transform in zip(
            urls, names, headers, table["epsg"], table["raster_type"], table["transform"]):
        epsg = _epsg(epsg)
        try:
            said = (repr(epsg), repr(raster_type), tuple(transform))
        except TypeError:   # not numbers: refused, naming the row, by georeferencing()
            said = (repr(epsg), repr(raster_type), repr(transform))
        if said not in shared:
            shared[said] = georeferencing(epsg, transform, raster_type, record=name,
                                          fields=("epsg", "transform", "raster_type"))
        images.append(open_image(url, header=header, storage_options=storage_options, georeferencing=shared[said],
                                 claimed_by=name))
    return table, images, recorded


def open_catalog(catalog, *, chunks=None, storage_options=None, assets=None, mask_and_scale=False) -> CatalogDatasets:
    """One lazily built Dataset per row of a Parquet catalog, DataFrame or STAC Items, with zero reads of the files.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "a.rumi")
    >>> _ = xarray_rumi.write(path, np.arange(64, dtype="uint8").reshape(8, 8), tile_size=4,
    ...                       crs=4326, transform=(1, 0, 10, 0, -1, 50))
    >>> _ = build([path], os.path.join(d, "c.parquet"))
    >>> [ds] = open_catalog(os.path.join(d, "c.parquet"))
    >>> int(ds.band_data.sum()), ds.rio.crs.to_epsg()
    (2016, 4326)
    """
    if assets is not None and not isinstance(assets, str):
        keys = list(assets)
        if len(keys) != 1:
            raise ValueError(f"open_catalog opens one asset of each Item, got assets={keys!r}; open the others "
                             "with further calls, or as variables of one Cube with open_cube")
        assets = keys[0]
    _, images, recorded = catalog_images(catalog, storage_options, assets)
    datasets = CatalogDatasets(images, chunks, recorded, mask_and_scale=mask_and_scale,
                               name=VARIABLE if assets is None else assets)
    if chunks is not None and len(datasets):
        datasets[0]  # chunks the images cannot take are refused here, not at the first use
    return datasets


class CatalogDatasets(Sequence):
    """A catalog's Datasets, each built when first asked for."""

    def __init__(self, images: list[RumiImage], chunks, recorded=None, *, mask_and_scale=False, name=VARIABLE):
        self._images, self._chunks = images, chunks
        self._recorded, self._mask_and_scale, self._name = recorded, mask_and_scale, name
        self._built: list = [None] * len(images)
        self._coordinates: dict[tuple, object] = {}  # shared by images of one grid and georeferencing

    def __len__(self) -> int:
        return len(self._images)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = range(len(self))[index]
        if self._built[index] is None:
            self._built[index] = self._dataset(self._images[index],
                                               None if self._recorded is None else self._recorded[index])
        return self._built[index]

    def __repr__(self) -> str:
        return f"<CatalogDatasets: {len(self)} images, {sum(d is not None for d in self._built)} built>"

    def _dataset(self, image: RumiImage, recorded):
        import xarray as xr

        from .band_attrs import described_variable
        from .engine import image_variable, layout_coordinates

        key = (image.grid.shape, image.georeferencing)
        if key not in self._coordinates:
            self._coordinates[key] = layout_coordinates(image_layout(image))
        variable = image_variable(image, chunks=self._chunks)
        if recorded is not None:
            variable = described_variable(variable, recorded.bands, recorded.record,
                                          mask_and_scale=self._mask_and_scale)
        return xr.Dataset({self._name: variable}, coords=self._coordinates[key])
