"""The ``rumi`` engine for ``xarray.open_dataset``: lazy, one Dask chunk per frame.

The dataset looks like rioxarray's ``engine="rasterio"`` (``band_data`` on
``(band, y, x)``, a ``spatial_ref`` grid-mapping coordinate), so ``.rio``
works on it.  What differs is the cost of opening: with a header blob the
frames are located without reading the file, and each Dask task fetches the
exact byte range of one frame and decodes it.  The array in the graph holds
only a URL, storage options and the blob, so tasks run on worker processes.
Before pixels read through a blob are returned, the blob is checked against
the file's IFD head (``format.head.check_blob_against_ifd_head``): at open when the
open reads the georeferencing anyway, else once per process on the first read.

>>> import numpy as np, tempfile, os, xarray as xr, xarray_rumi
>>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
>>> blob = xarray_rumi.write(path, np.arange(2 * 60 * 50, dtype="uint16").reshape(2, 60, 50),
...                          tile_size=32, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
>>> ds = xr.open_dataset(path, engine="rumi", header=blob, chunks={})
>>> ds.band_data.chunks
((1, 1), (32, 28), (32, 18))
>>> int(ds.band_data[1, 59, 49])
5999
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os

import numpy as np
import pandas as pd
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing
from xarray.indexes import PandasIndex

from .coords import GRID_MAPPING, corner_transform, grid_mapping_attrs, spatial_coords
from ..format.geo import Georeferencing, RasterType
from ..format.geo import georeferencing as build_georeferencing
from ..format.grid import FrameUnit, overlap
from ..format.limits import DEFAULT_LIMITS, Limits
from ..frames.codec import decode_frame
from ..io.retry import DEFAULT_POLICY, RetryPolicy
from ..io.threads import ProcessThreads, default_threads
from ..reading.image import RumiImage, open_image, read_georeferencing

VARIABLE = "band_data"
#: Compressed bytes a read over many frames fetches at a time: a few frames per
#: decoding thread, so memory stays near the result's size while a remote read
#: is still a batch of concurrent requests.
DECODE_BATCH = 2 * 1024 * 1024


class RumiBackendArray(BackendArray):
    """A lazily read ``(band, y, x)`` rumi image with explicit outer indexing.

    Reads and decodes only the frames a selection touches.  Picklable: it is
    the image's address and blob, never bytes of the file or an open handle.
    ``verify=False`` trusts the file and the blob: no frame checksums, no
    check of the blob against the file.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(64, dtype="int16").reshape(1, 8, 8), tile_size=4)
    >>> array = RumiBackendArray(xarray_rumi.open_image(path, blob, read_georef=False))
    >>> array[indexing.OuterIndexer((0, np.array([1, 6]), slice(2, 4)))]
    array([[10, 11],
           [50, 51]], dtype=int16)
    """

    def __init__(self, image: RumiImage, *, verify: bool = True):
        self.image = image
        self.verify = verify
        self.shape = image.grid.shape
        self.dtype = image.sample_type.dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        parts = key.tuple
        if isinstance(key, (indexing.BasicIndexer, indexing.OuterIndexer)) and all(
            _is_int(k) or (isinstance(k, slice) and k.step in (None, 1)) for k in parts
        ):
            # What Dask asks for: a contiguous window, which needs no splitting into
            # a backend part and a numpy part (that costs more than a small frame).
            return self._read(parts)
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: tuple) -> np.ndarray:
        # Integers select one element and drop the axis; read them as length-1 slices.
        squeeze = tuple(0 if _is_int(k) else slice(None) for k in key)
        key = tuple(_int_as_slice(k, n) if _is_int(k) else k for k, n in zip(key, self.shape))
        if all(isinstance(k, slice) for k in key):
            ranges = [range(*k.indices(n)) for k, n in zip(key, self.shape)]
            if all(r.step == 1 for r in ranges):
                return self._read_window(*ranges)[squeeze]
        axes = [_index_array(k, n) for k, n in zip(key, self.shape)]
        return self._read_points(*axes)[squeeze]

    def _read_window(self, bands: range, rows: range, cols: range) -> np.ndarray:
        """A contiguous window, which is what every Dask chunk asks for."""
        grid, sample = self.image.grid, self.image.sample_type
        frame = self._frame_at(bands, rows, cols)
        if frame is not None:
            # The chunk is exactly one frame: one range read, and the decoded frame
            # is the result as it is, with no copy into an output array.
            start, stop = self.image.frame_range(frame)
            payload, = self.image.fetch([start], [stop], check_blob=self.verify)
            return decode_frame(payload, sample, grid.frame_shape(frame), verify=self.verify)
        window = (bands, rows, cols)
        out = np.empty(tuple(len(r) for r in window), self.dtype)

        def decode_into_place(k: int, payload: bytes) -> None:
            spans = [overlap(f, r) for f, r in zip(grid.frame_window(k), window)]
            target = out[tuple(o for o, _ in spans)]
            shape = grid.frame_shape(k)
            if target.shape == shape:
                # The whole frame lies in the window: decoded straight into its place.
                decode_frame(payload, sample, shape, verify=self.verify, out=target)
            else:
                target[...] = decode_frame(payload, sample, shape, verify=self.verify)[tuple(i for _, i in spans)]

        self._decode_each(grid.frames_touching(bands, rows, cols), decode_into_place)
        return out

    def _frame_at(self, bands: range, rows: range, cols: range) -> int | None:
        """The frame whose window is exactly this one, if there is one."""
        grid = self.image.grid
        if rows.start % grid.tile_length or cols.start % grid.tile_width or bands.start % grid.bands_per_frame:
            return None
        index = grid.frame_index(rows.start // grid.tile_length, cols.start // grid.tile_width, bands.start)
        if index >= grid.frame_count:
            return None
        window = grid.frame_window(index)
        same = all((w.start, w.stop) == (r.start, r.stop) for w, r in zip(window, (bands, rows, cols)))
        return index if same else None

    def _read_points(self, bands: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """An outer selection of arbitrary indices: decode the frames holding any of them."""
        grid = self.image.grid
        out = np.empty((bands.size, rows.size, cols.size), self.dtype)
        if out.size == 0:
            return out
        tile_rows = np.unique(rows // grid.tile_length)
        tile_cols = np.unique(cols // grid.tile_width)
        positions = (tile_rows[:, None] * grid.tiles_across + tile_cols[None, :]).ravel()
        if grid.frame_unit is FrameUnit.CELL:
            touched = positions
        else:
            touched = (positions[:, None] * grid.samples_per_pixel + np.unique(bands)[None, :]).ravel()
        axes = (bands, rows, cols)

        def decode_and_place(k: int, payload: bytes) -> None:
            frame = decode_frame(payload, self.image.sample_type, grid.frame_shape(k), verify=self.verify)
            window = grid.frame_window(k)
            inside = [np.flatnonzero((a >= w.start) & (a < w.stop)) for a, w in zip(axes, window)]
            local = [a[i] - w.start for a, i, w in zip(axes, inside, window)]
            out[np.ix_(*inside)] = frame[np.ix_(*local)]

        self._decode_each(touched, decode_and_place)
        return out

    def _decode_each(self, touched: np.ndarray, decode_and_place) -> None:
        """Fetch frames ``touched`` in batches of about :data:`DECODE_BATCH`, ``decode_and_place(k, payload)`` each.

        Decoding releases the GIL, so the frames of a batch decode on a small
        shared thread pool, each into a disjoint part of the output, while the
        calling thread fetches the next batch.  A fetched batch is queued
        behind the one decoding, so the threads go on without waiting at the
        end of each batch; the next fetch waits for the older of the two, so
        at most two batches of compressed bytes are held at once, whatever
        the window's size.
        """
        if not len(touched):
            return
        batches = self.image.iter_batches(touched, batch_bytes=DECODE_BATCH, check_blob=self.verify)
        if len(touched) == 1:
            (_, (payload,)), = batches
            decode_and_place(int(touched[0]), payload)
            return
        pool = _decode_threads.get(default_threads())
        in_flight = collections.deque()
        for indices, payloads in batches:
            in_flight.append(pool.map(decode_and_place, indices.tolist(), payloads))
            if len(in_flight) == 2:
                # list() re-raises the first failure (a damaged frame) here, in the caller.
                list(in_flight.popleft())
        for decoding in in_flight:
            list(decoding)


#: The process's decoding threads, shared by every read.
_decode_threads = ProcessThreads("rumi-decode")


def _is_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, bool)


def _int_as_slice(k, size: int) -> slice:
    k = int(k) + size if k < 0 else int(k)
    if not 0 <= k < size:
        raise IndexError(f"index {k} is out of bounds for an axis of size {size}")
    return slice(k, k + 1)


def _index_array(k, size: int) -> np.ndarray:
    if isinstance(k, slice):
        return np.arange(*k.indices(size), dtype=np.int64)
    a = np.asarray(k, dtype=np.int64).ravel()
    a = np.where(a < 0, a + size, a)
    if a.size and (a.min() < 0 or a.max() >= size):
        raise IndexError(f"index out of bounds for an axis of size {size}")
    return a


# -- opening -----------------------------------------------------------------


def caller_georeferencing(crs=None, transform=None, raster_type=None, georeferencing=None) -> Georeferencing | None:
    """The georeferencing the caller supplies, or ``None`` to take the file's.

    ``georeferencing=False`` means "no CRS, read nothing for it"; a
    :class:`Georeferencing` is used as given; ``crs`` + ``transform`` (and
    optionally ``raster_type``) build one, checked as a writer checks them.

    >>> caller_georeferencing() is None
    True
    >>> caller_georeferencing(georeferencing=False).is_defined
    False
    >>> caller_georeferencing(crs=4326, transform=(1, 0, 0, 0, -1, 0)).epsg
    4326
    """
    given = crs is not None or transform is not None
    if isinstance(georeferencing, Georeferencing):
        if given or raster_type is not None:
            raise ValueError("pass either georeferencing=Georeferencing(...) or crs=/transform=/raster_type=, not both")
        return georeferencing
    if georeferencing is False:
        if given:
            raise ValueError("georeferencing=False means no CRS; it cannot be combined with crs= or transform=")
        return Georeferencing(raster_type=RasterType.parse(raster_type or "area"))
    if georeferencing not in (None, True):
        raise TypeError(f"georeferencing must be None, False or a Georeferencing, got {georeferencing!r}")
    if not given:
        if raster_type is not None:
            raise ValueError("raster_type= overrides the file's georeferencing only together with crs= and transform=")
        return None
    return build_georeferencing(crs, transform, raster_type or "area")


def open_rumi_image(filename_or_obj, *, header=None, storage_options=None, crs=None, transform=None,
                    raster_type=None, georeferencing=None, limits: Limits = DEFAULT_LIMITS, verify: bool = True,
                    retry: RetryPolicy = DEFAULT_POLICY) -> RumiImage:
    """Open a rumi image with its georeferencing, reading as little as possible.

    - no ``header``: the IFD (usually one read) gives the frames and the
      georeferencing; caller-supplied georeferencing replaces the file's.
    - a ``header`` and caller-supplied georeferencing: nothing is read; the
      blob is checked against the file's IFD head on the first frame read.
    - a ``header`` alone: the 160 bytes of georeferencing and the 252-byte IFD
      head, in one batched read, and the blob is checked against the head.

    ``verify=False`` skips the check of the blob (and the frame checksums,
    see :class:`RumiBackendArray`).  ``retry`` is how remote reads are retried.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((1, 8, 8), "uint16"), compression="portable")
    >>> lying = blob[:21] + bytes([3]) + blob[22:]   # float16, as wide as uint16
    >>> open_rumi_image(path, header=lying)
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: blob.matches-file: blob says float16 (sample format 3, 16 bits), the file's IFD says uint16 (sample format 1, 16 bits)
    """
    path = os.fspath(filename_or_obj) if isinstance(filename_or_obj, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise TypeError(f"the rumi engine opens a path or an fsspec URL, not {type(filename_or_obj).__name__}")
    if not isinstance(retry, RetryPolicy):
        raise TypeError(f"retry must be an xarray_rumi.io.retry.RetryPolicy, got {type(retry).__name__}")
    supplied = caller_georeferencing(crs, transform, raster_type, georeferencing)
    image = open_image(path, header, storage_options=storage_options, limits=limits, read_georef=False, retry=retry)
    if supplied is not None:
        return dataclasses.replace(image, georeferencing=supplied)
    if header is None:
        return image
    georef = read_georeferencing(image.source, image.header, check_blob=verify)
    return dataclasses.replace(image, georeferencing=georef, blob_checked=image.blob_checked or verify)


def image_variable(image: RumiImage, *, chunked: bool = False, verify: bool = True) -> xr.Variable:
    """``band_data`` of an opened image: lazy, or with ``chunked`` one Dask chunk per frame.

    The chunked form is what ``xr.open_dataset(..., chunks={})`` gives, built
    directly (catalogs open thousands of images this way, under 1 ms each).
    ``verify`` is :class:`RumiBackendArray`'s.
    """
    grid, georef = image.grid, image.georeferencing
    defined = georef is not None and georef.is_defined
    raster_type = georef.raster_type if georef is not None else RasterType.AREA
    attrs = {"AREA_OR_POINT": raster_type.name.title()} if defined else {}
    encoding = {
        "source": image.source.url,
        "grid_mapping": GRID_MAPPING,
        # One Dask chunk per frame: chunks={} follows these.
        "preferred_chunks": {"band": grid.bands_per_frame, "y": grid.tile_length, "x": grid.tile_width},
        "tile_size": (grid.tile_length, grid.tile_width),
        "frame_unit": grid.frame_unit.name.lower(),
        "sample_type": image.sample_type.name,
        "raster_type": raster_type.name.lower(),
        "header": image.header.to_bytes(),
    }
    data = indexing.LazilyIndexedArray(RumiBackendArray(image, verify=verify))
    if chunked:
        import dask.array

        adapter = indexing.ImplicitToExplicitIndexingAdapter(data, indexing.OuterIndexer)
        # The blob and the address name the frames exactly: a stable Dask name.
        # An unverified read is another computation: it must not stand in for a verified one.
        named = image.source.url.encode() + encoding["header"] + (b"" if verify else b"\0unverified")
        token = hashlib.blake2b(named, digest_size=16).hexdigest()
        chunks = (grid.bands_per_frame, grid.tile_length, grid.tile_width)
        # meta=np.ndarray, as xarray's own chunking gives lazily indexed backend arrays
        data = dask.array.from_array(adapter, chunks=chunks, name=f"rumi-{token}", lock=False, meta=np.ndarray)
    return xr.Variable(("band", "y", "x"), data, attrs=attrs, encoding=encoding)


def image_coordinates(image: RumiImage) -> xr.Coordinates:
    """``band``, the spatial coordinates and ``spatial_ref`` of an opened image, with their indexes.

    The indexes are the ones xarray would infer (a ``PandasIndex`` for each
    dimension coordinate), built directly: inferring them is half the cost of
    building an image's dataset.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((2, 3, 4), "uint8"), crs=4326, transform=(1, 0, 10, 0, -1, 50))
    >>> coords = image_coordinates(xarray_rumi.open_image(path, blob))
    >>> sorted(coords.xindexes), coords["x"].values.tolist()
    (['band', 'x', 'y'], [10.5, 11.5, 12.5, 13.5])
    """
    grid, georef = image.grid, image.georeferencing
    values = {"band": ("band", np.arange(1, grid.samples_per_pixel + 1, dtype=np.int64))}
    values.update(spatial_coords(corner_transform(georef), grid.image_width, grid.image_length))
    variables = {name: xr.Variable(*value) for name, value in values.items()}
    variables[GRID_MAPPING] = xr.Variable((), np.int64(0), attrs=grid_mapping_attrs(georef))
    indexes = {name: PandasIndex(pd.Index(variable.values, name=name), name)
               for name, variable in variables.items() if variable.dims == (name,)}
    return xr.Coordinates(variables, indexes=indexes)


def image_dataset(image: RumiImage, *, name: str = VARIABLE, verify: bool = True) -> xr.Dataset:
    """The dataset of an opened image: ``name`` on ``(band, y, x)`` plus coordinates."""
    return xr.Dataset({name: image_variable(image, verify=verify)}, coords=image_coordinates(image))


class RumiBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(path_or_url, engine="rumi", header=None, storage_options=None)``.

    ``header`` is the blob as bytes, the path/URL of a blob file, or ``None``
    to rebuild it from the IFD.  ``crs=``/``transform=``/``raster_type=``
    supply georeferencing (with a blob, opening then reads nothing at all);
    ``georeferencing=False`` opens without a CRS and without reading one.
    ``verify=False`` trusts the file and the blob (no frame checksums, no
    check of the blob against the file); ``retry=`` is a
    :class:`~xarray_rumi.io.retry.RetryPolicy` for remote reads.
    """

    description = "Open rumi rasters (BigTIFF + OpenZL frames + header blob) lazily, one Dask chunk per frame"
    url = "https://pypi.org/project/xarray-rumi/"  # the distribution name in pyproject.toml; docs/backend.md
    open_dataset_parameters = (
        "filename_or_obj", "drop_variables", "header", "storage_options",
        "crs", "transform", "raster_type", "georeferencing", "limits", "verify", "retry",
    )

    def open_dataset(self, filename_or_obj, *, drop_variables=None, header=None, storage_options=None,
                     crs=None, transform=None, raster_type=None, georeferencing=None,
                     limits: Limits = DEFAULT_LIMITS, verify: bool = True,
                     retry: RetryPolicy = DEFAULT_POLICY) -> xr.Dataset:
        image = open_rumi_image(
            filename_or_obj, header=header, storage_options=storage_options, crs=crs, transform=transform,
            raster_type=raster_type, georeferencing=georeferencing, limits=limits, verify=verify, retry=retry,
        )
        dataset = image_dataset(image, verify=verify)
        if drop_variables is not None:
            dataset = dataset.drop_vars(drop_variables, errors="ignore")
        return dataset

    def guess_can_open(self, filename_or_obj) -> bool:
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        if not isinstance(path, str):
            return False
        return os.path.splitext(path.split("?", 1)[0])[1].lower() == ".rumi"


__all__ = [
    "RumiBackendArray", "RumiBackendEntrypoint", "caller_georeferencing", "image_coordinates", "image_dataset",
    "image_variable", "open_rumi_image",
]
