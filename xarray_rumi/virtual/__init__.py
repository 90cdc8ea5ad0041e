"""rumi files as virtual Zarr stores: the OpenZL codec, Kerchunk references, the VirtualiZarr parser."""
