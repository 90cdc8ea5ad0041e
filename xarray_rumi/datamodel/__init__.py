"""What every face shows of the rumi data model, and when Images form a Cube: no xarray, no Zarr, no I/O."""
