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
        """``xarray_rumi.write(path, self, **kwargs)``; settings the array was read with are the defaults."""
        return write(path, self._array, **kwargs)

    def quicklook(self, path=None, *, bands=None, size: int = SIZE, percentiles=PERCENTILES, storage_options=None):
        """An 8-bit image (grey, or RGB of three 1-based ``bands``), each band stretched between ``percentiles``,
        longest side ``size``: written as a PNG to ``path`` if given, else returned."""
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
        """Write ``variable`` (``band_data``, or the only one) with :func:`xarray_rumi.write`."""
        names = list(self._dataset.data_vars)
        if variable is None and "band_data" not in names and len(names) != 1:
            raise ValueError(f"the dataset has several variables {names}; pass variable=")
        if variable is None:
            variable = "band_data" if "band_data" in names else names[0]
        return self._dataset[variable].rumi.to_rumi(path, **kwargs)
