"""The ``.rumi`` accessor: ``da.rumi.to_rumi(path)`` (the xarray-native ``write``) and ``da.rumi.quicklook()``."""

from __future__ import annotations

import xarray as xr

from .stac.quicklook import PERCENTILES, SIZE, data_array_quicklook, write_quicklook
from .writing.write import write


@xr.register_dataarray_accessor("rumi")
class RumiDataArrayAccessor:
    """``DataArray.rumi``: write the array as a rumi file, its dimensions taken by name.

    >>> import numpy as np, xarray as xr, tempfile, os, xarray_rumi
    >>> da = xr.DataArray(np.zeros((1, 16, 16), "uint8"), dims=("band", "y", "x"))
    >>> blob = da.rumi.to_rumi(os.path.join(tempfile.mkdtemp(), "a.rumi"), tile_size=8)
    >>> len(blob)
    28
    """

    def __init__(self, array: xr.DataArray):
        self._array = array

    def to_rumi(self, path, **kwargs) -> bytes:
        """``xarray_rumi.write(path, self, **kwargs)``; settings the array was read with are the defaults.

        The dimensions are taken by name, in any order: y and x as rioxarray
        finds them (``rio.y_dim`` / ``rio.x_dim``), the one other dimension,
        if any, as the band; an array whose names do not say which is y and
        which x is refused.  A nodata value (``rio.nodata``, ``_FillValue``)
        is not stored: the pixels keep their values and a
        ``NodataNotStoredWarning`` names it (publish it with
        ``xarray_rumi.stac.item(..., nodata=)``).  A scale or offset in the
        attributes of raw values is not stored either: a ``ScaleNotStoredWarning`` names it.

        >>> import numpy as np, xarray as xr, tempfile, os, xarray_rumi
        >>> rgb = xr.DataArray(np.zeros((16, 24, 3), "uint8"), dims=("y", "x", "band"))
        >>> path = os.path.join(tempfile.mkdtemp(), "rgb.rumi")
        >>> _ = rgb.rumi.to_rumi(path, tile_size=8)
        >>> xarray_rumi.open_image(path).read().shape
        (3, 16, 24)
        """
        return write(path, self._array, **kwargs)

    def quicklook(self, path=None, *, bands=None, size: int = SIZE, percentiles=PERCENTILES, storage_options=None):
        """A small 8-bit image of the array: grey for one band, RGB for three (1-based ``bands``).

        The array is sampled with one stride along ``y`` and ``x`` (longest
        side at most ``size``) before anything is loaded, so a lazily opened
        rumi file reads only the frames holding a sample.  Each band is
        stretched between ``percentiles``.  With ``path`` (a path or fsspec
        URL) the PNG is written there and ``None`` returned; without, the
        ``uint8`` pixels ``(rows, cols)`` or ``(rows, cols, 3)`` are returned.

        >>> import numpy as np, xarray as xr, xarray_rumi
        >>> da = xr.DataArray(np.arange(2 * 30 * 50).reshape(2, 30, 50), dims=("band", "y", "x"))
        >>> da.rumi.quicklook(size=25).shape
        (15, 25)
        """
        pixels = data_array_quicklook(self._array, bands=bands, size=size, percentiles=percentiles)
        if path is None:
            return pixels
        write_quicklook(path, pixels, storage_options)
        return None


@xr.register_dataset_accessor("rumi")
class RumiDatasetAccessor:
    """``Dataset.rumi``: write one data variable (``band_data`` by default) as a rumi file."""

    def __init__(self, dataset: xr.Dataset):
        self._dataset = dataset

    def to_rumi(self, path, variable: str | None = None, **kwargs) -> bytes:
        """Write ``variable`` (the only one, or ``band_data``) with :func:`xarray_rumi.write`.

        It goes through ``DataArray.rumi.to_rumi``: dimensions by name, nodata warned about.
        """
        names = list(self._dataset.data_vars)
        if variable is None:
            if "band_data" in names:
                variable = "band_data"
            elif len(names) == 1:
                variable = names[0]
            else:
                raise ValueError(f"the dataset has several variables {names}; pass variable=")
        return self._dataset[variable].rumi.to_rumi(path, **kwargs)
