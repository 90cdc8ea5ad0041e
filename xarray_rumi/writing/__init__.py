"""Writing compliant rumi files from numpy, xarray and Dask, and converting GeoTIFFs."""
