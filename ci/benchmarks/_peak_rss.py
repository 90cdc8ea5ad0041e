"""Peak RSS of one full read, in a process of its own (scenario 7 of ``suite.py``).

    python ci/benchmarks/_peak_rss.py MODE IMAGE.rumi BLOB_FILE IMAGE.tif

MODE is ``lazy`` (``open_dataset`` without Dask, ``.values``), ``dask``
(``open_dataset(chunks={})`` computed on 2 threads), ``bare-place`` (fetch
and decode every frame into one preallocated array: the floor) or
``geotiff`` (rioxarray, ``chunks={}``, 2 threads); ``bare-into`` decodes
each frame into its place with ``decode_frame(out=)``.  Prints one JSON line:
``baseline`` (RSS after imports and opening, before the read), ``peak``
(the address space's peak RSS during the read, ``VmHWM`` reset just before
it), ``nbytes`` (the result's size) and ``ru_maxrss`` (``getrusage``'s
peak, which also counts the imports and, on Linux, the parent's), in bytes.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import warnings

import numpy as np
import xarray as xr

from xarray_rumi.frames.codec import decode_frame
from xarray_rumi.reading.open import open_image

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)


def current_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def high_water_mark() -> int:
    """Peak RSS of this process's address space (``VmHWM``), in bytes.

    ``getrusage``'s ``ru_maxrss`` is not enough on its own: Linux carries it
    over ``execve`` from the parent, so a child of a large benchmark process
    reports the parent's peak.  ``VmHWM`` belongs to the new address space.
    """
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def reset_high_water_mark() -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0), so
    # the peak measured is the read's, not that of importing the libraries.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def main(mode: str, path: str, blob_file: str, tif: str) -> None:
    warnings.simplefilter("ignore")
    with open(blob_file, "rb") as f:
        blob = f.read()
    image = open_image(path, blob, georeferencing=False)
    grid, sample = image.grid, image.sample_type
    # Load the decoder's shared library before the baseline: it is not the read's memory.
    start, stop = image.frame_range(grid.frame_count - 1)
    decode_frame(image.source.read(start, stop), sample, grid.frame_shape(grid.frame_count - 1))
    if mode == "lazy":
        ds = xr.open_dataset(path, engine="rumi", header=blob, crs=32618, transform=TRANSFORM)
        read = lambda: ds.band_data.values  # noqa: E731
    elif mode == "dask":
        import dask  # noqa: F401  (imported before the baseline)

        ds = xr.open_dataset(path, engine="rumi", header=blob, crs=32618, transform=TRANSFORM, chunks={})
        read = lambda: ds.band_data.data.compute(scheduler="threads", num_workers=2)  # noqa: E731
    elif mode == "geotiff":
        import rioxarray  # noqa: F401

        ds = xr.open_dataset(tif, engine="rasterio", chunks={}, lock=False, mask_and_scale=False)
        read = lambda: ds.band_data.data.compute(scheduler="threads", num_workers=2)  # noqa: E731
    elif mode in ("bare-place", "bare-into"):
        into = mode == "bare-into"

        def read():
            out = np.empty(grid.shape, sample.dtype)
            starts, stops = image.header.ranges(np.arange(grid.frame_count))
            for k in range(grid.frame_count):
                payload = image.source.read(int(starts[k]), int(stops[k]))
                place = out[grid.frame_window(k)]
                if into:  # decoded straight into its place
                    decode_frame(payload, sample, grid.frame_shape(k), out=place)
                else:  # decoded, then copied
                    place[...] = decode_frame(payload, sample, grid.frame_shape(k))
            return out
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    reset_high_water_mark()
    baseline = current_rss()
    result = read()
    peak = high_water_mark()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    print(json.dumps({"baseline": baseline, "peak": peak, "nbytes": int(result.nbytes), "ru_maxrss": maxrss}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
