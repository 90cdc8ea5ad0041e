"""What an image or a Cube shows, in xarray and in Zarr, and when images form a Cube: no xarray, no Zarr, no I/O."""
