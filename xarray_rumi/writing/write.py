"""Writing compliant rumi files from numpy, xarray and Dask.

Frames are encoded in frame-index order by a small thread pool (the encoder
releases the GIL; ``encoded_frames.py``) with a bounded number in flight, streamed to a temporary
file after the fixed-size prefix, and the file is renamed into place only
when complete: a failure leaves nothing at the target path.  The same pool
measures the sample frames that choose the recipes, and a local file is
flushed to disk while later frames are still being encoded.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..frames.choose import lossy_error, plan, profile_window, sample_frames
from .encoded import DaskFrames, dask_encoded_frames, threaded_encoded_frames
from ..format.blob import Header
from ..format.dtypes import SampleType, sample_type_for_dtype, sample_type_from_name
from ..format.geo import RasterType, georeferencing
from ..format.grid import FrameGrid, FrameUnit
from ..format.ifd import build_prefix
from ..format.layout import base_frame_offset
from ..format.limits import DEFAULT_LIMITS
from ..io.source import ByteSource
from ..io.threads import default_threads

#: What a DataArray read from a rumi file keeps in its encoding, and the defaults otherwise.
_DEFAULTS = {"tile_size": 512, "frame_unit": "tile", "raster_type": "area"}
#: A local file is handed to the disk each time this much more has been written.
WRITEBACK_BYTES = 4 * 2**20


def write(path, data, *, tile_size=None, frame_unit=None, crs=None, transform=None, raster_type=None,
          sample_type=None, compression="auto", storage_options=None, write_header=True, progress=None) -> bytes:
    """Write ``data`` as a rumi file and return its header blob.

    ``data`` is a numpy array ``(B, Y, X)`` or ``(Y, X)``, a Dask array, or a
    DataArray ``(band, y, x)`` whose rioxarray CRS and transform are used when
    ``crs`` / ``transform`` are not given.  ``tile_size``, ``frame_unit``,
    ``raster_type`` and ``sample_type`` left as ``None`` come from a
    DataArray's encoding (what it was read with; its ``AREA_OR_POINT``
    attribute for the raster type), else 512, ``"tile"``, ``"area"`` and the
    dtype's own type.  Dask-backed data is compressed as
    Dask tasks (on the active distributed client, if any) with only a few
    frames in flight.  ``path`` may be any fsspec URL.  With ``write_header``
    the blob is also stored beside the file as ``<path>.header``.
    ``progress``, if given, is called with 1 after each frame is written
    (``tqdm(...).update`` fits).

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = write(path, np.ones((2, 100, 80), "uint16"), tile_size=64,
    ...              crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    >>> len(blob), os.path.exists(path + ".header")
    (28, True)
    """
    array, geo_defaults, encoding = _as_band_array(data)
    tile_size, frame_unit, raster_type = (
        given if given is not None else encoding.get(name, _DEFAULTS[name])
        for name, given in (("tile_size", tile_size), ("frame_unit", frame_unit), ("raster_type", raster_type))
    )
    if crs is None and transform is None and geo_defaults:
        crs, transform = geo_defaults
        if RasterType.parse(raster_type) is RasterType.POINT:
            # rioxarray's transform refers to pixel corners (GDAL's convention);
            # a PixelIsPoint matrix maps pixel indices to pixel centres.
            a, b, c, d, e, f = transform
            transform = (a, b, c + 0.5 * (a + b), d, e, f + 0.5 * (d + e))
    sample = _sample_type(sample_type, encoding, array.dtype)
    georef = georeferencing(crs, transform, raster_type)
    tile_length, tile_width = _tile_shape(tile_size)
    bands, length, width = array.shape
    grid = FrameGrid(width, length, tile_width, tile_length, bands, FrameUnit.parse(frame_unit))
    grid.check(DEFAULT_LIMITS, bytes_per_sample=sample.bytes_per_sample)  # what a reader would refuse
    if lossy_error(compression) is not None and (sample.storage != sample.dtype or sample.dtype.kind not in "iuf"):
        raise ValueError(f"lossy compression needs plain integer or float samples, not {sample.name}")
    workers = default_threads()
    if _is_dask(array):
        source = DaskFrames(array, grid)
        indices = sample_frames(grid, compression)
        stored = {k: sample.encode(np.asarray(v)) for k, v in zip(indices, source.compute(indices))}
        recipes = plan(grid, stored.__getitem__, compression, workers=workers)
        frames = dask_encoded_frames(source, grid, sample, recipes, workers)
    else:
        # only the centre of a sample frame is measured: no need to copy the rest
        recipes = plan(grid, lambda k: sample.encode(np.asarray(array[profile_window(grid.frame_window(k))])),
                       compression, workers=workers)
        frames = threaded_encoded_frames(array, grid, sample, recipes, workers)
    target = ByteSource.of(path, storage_options)
    if progress is not None:
        frames = _reporting(frames, progress)
    counts = _write_atomically(target, grid, frames, lambda counts: build_prefix(grid, sample, georef, counts))
    blob = Header.from_byte_counts(grid, sample, counts).to_bytes()
    if write_header:
        _write_small_atomically(ByteSource.of(f"{target.url}.header", storage_options), blob)
    return blob


def _as_band_array(data):
    """``(array-like (B, Y, X), (crs, transform) or None, encoding)`` from the input."""
    encoding, geo = {}, None
    if hasattr(data, "dims") and hasattr(data, "variable"):  # an xarray DataArray
        encoding = dict(data.encoding)
        if "raster_type" not in encoding and str(data.attrs.get("AREA_OR_POINT", "")).lower() == "point":
            encoding["raster_type"] = "point"
        if data.ndim == 2:
            data = data.expand_dims("band")
        if data.ndim != 3:
            raise ValueError(f"a DataArray to write must be (band, y, x), got dims {data.dims}")
        geo = _rio_georeferencing(data)
        values = data.data
    else:
        values = data if hasattr(data, "__array_function__") else np.asarray(data)
        if values.ndim == 2:
            values = values[None]
        if values.ndim != 3:
            raise ValueError(f"data must be (B, Y, X) or (Y, X), got shape {values.shape}")
    if 0 in values.shape:
        raise ValueError(f"cannot write an empty raster of shape {values.shape}")
    return values, geo, encoding


def _rio_georeferencing(data):
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:
        return None
    crs = data.rio.crs
    if crs is None:
        return None
    return crs, tuple(data.rio.transform())[:6]


def _sample_type(requested, encoding, dtype) -> SampleType:
    if requested is not None:
        return requested if isinstance(requested, SampleType) else sample_type_from_name(requested)
    if "sample_type" in encoding:
        candidate = sample_type_from_name(encoding["sample_type"])
        if candidate.dtype == dtype:
            return candidate
    return sample_type_for_dtype(dtype)


def _tile_shape(tile_size) -> tuple[int, int]:
    if isinstance(tile_size, (int, np.integer)) and not isinstance(tile_size, bool):
        sizes = (int(tile_size), int(tile_size))
    else:
        sizes = tuple(int(v) for v in tile_size)
    if len(sizes) != 2 or not all(1 <= v <= 65535 for v in sizes):
        raise ValueError(f"tile_size must be an int or (tile_length, tile_width) between 1 and 65535, got {tile_size!r}")
    return sizes


def _reporting(frames, progress):
    for frame in frames:
        yield frame
        progress(1)


def _is_dask(array) -> bool:
    return type(array).__module__.startswith("dask")


def _write_atomically(target: ByteSource, grid: FrameGrid, frames, make_prefix) -> np.ndarray:
    """Write encoded frames after room for the prefix, then the prefix, then publish."""
    with _staged(target) as f:
        f.seek(base_frame_offset(grid))
        with _Writeback(f if target.is_local else None) as writeback:
            counts = np.fromiter((writeback.wrote(f.write(frame)) for frame in frames), dtype=np.int64)
        f.seek(0)
        f.write(make_prefix(counts))
    return counts


class _Writeback:
    """Hands a staged local file to the disk while later frames are still being encoded.

    Without it the final fsync waits for the whole file (~50 ms for 28 MB
    here); with it, for the last few MiB.  A failed flush is raised to the
    writer, because the kernel reports a write-back error to one fsync only.
    """

    def __init__(self, f):
        self._f, self._every, self._unflushed = f, WRITEBACK_BYTES, 0
        self._pool = self._flushing = None

    def wrote(self, count: int) -> int:
        self._unflushed += count
        if self._f is not None and self._unflushed >= self._every and (
                self._flushing is None or self._flushing.done()):
            if self._flushing is not None:
                self._flushing.result()
            self._f.flush()
            self._pool = self._pool or ThreadPoolExecutor(1)
            self._flushing = self._pool.submit(getattr(os, "fdatasync", os.fsync), self._f.fileno())
            self._unflushed = 0
        return count

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if self._pool is not None:
            self._pool.shutdown()  # the file stays open until the flush is done
            if kind is None:
                self._flushing.result()


def _write_small_atomically(target: ByteSource, data: bytes) -> None:
    with _staged(target) as f:
        f.write(data)


@contextlib.contextmanager
def _staged(target: ByteSource):
    """A file that appears at ``target`` whole when the block ends, or not at all.

    Locally the staging file is anonymous (``O_TMPFILE``) where the file
    system allows, so even a killed process leaves nothing behind; it is
    given a name only to be renamed over the target.  Remote targets are
    staged in local temporary storage and uploaded in one piece at the end.
    """
    directory = os.path.dirname(os.path.abspath(target.local_path)) if target.is_local else None
    f, name = _anonymous_file(directory)
    try:
        yield f
        f.flush()
        if target.is_local:
            os.fsync(f.fileno())
            if name is None:
                name = _link_anonymous(f, directory)
            replaced = _hold(target.local_path)
            try:
                os.replace(name, target.local_path)
                name = None
            finally:
                if replaced is not None:
                    threading.Thread(target=os.close, args=(replaced,), name="rumi-release").start()
        else:
            fs, path = target._fs_path
            f.seek(0)
            with fs.open(path, "wb") as out:  # object stores make an upload visible whole or not at all
                shutil.copyfileobj(f, out, 8 * 1024 * 1024)
    finally:
        f.close()
        if name is not None and os.path.exists(name):
            os.unlink(name)


def _hold(path: str) -> int | None:
    """A descriptor that keeps the file at ``path`` alive past its replacement, or ``None``.

    Freeing a replaced file's blocks takes as long as writing a good part of
    it (~25 ms for 28 MB on a file system mounted with ``discard``, which
    trims them there and then).  Holding the old file open lets the rename
    return at once; the blocks are freed when a background thread closes the
    descriptor (or the process ends).  Windows cannot rename over an open file.
    """
    if os.name != "posix":
        return None
    try:
        # O_PATH (Linux) needs no read permission; O_NONBLOCK: a FIFO there must not block the writer
        return os.open(path, getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK) | os.O_CLOEXEC)
    except OSError:  # nothing there yet, or nothing we may open: replace it as it is
        return None


def _anonymous_file(directory: str | None):
    """``(file, name)``: an unnamed file in ``directory`` where possible (``name`` None)."""
    flags = getattr(os, "O_TMPFILE", 0)
    if flags:
        try:
            fd = os.open(directory or tempfile.gettempdir(), flags | os.O_RDWR, 0o666)
            return os.fdopen(fd, "w+b"), None
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    fd, name = tempfile.mkstemp(prefix=".rumi-", suffix=".tmp", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # as an ordinary new file, not mkstemp's 0600
    return os.fdopen(fd, "w+b"), name


def _link_anonymous(f, directory: str) -> str:
    """Give an ``O_TMPFILE`` file a temporary name in ``directory``, to rename it into place."""
    name = os.path.join(directory, f".rumi-{os.getpid()}-{uuid.uuid4().hex}.tmp")
    # CPython calls linkat(AT_SYMLINK_FOLLOW), which an O_TMPFILE link needs, only
    # when a dir_fd is given; the absolute paths make the dir_fd itself irrelevant.
    root = os.open("/", os.O_RDONLY)
    try:
        os.link(f"/proc/self/fd/{f.fileno()}", name, src_dir_fd=root, follow_symlinks=True)
    finally:
        os.close(root)
    return name
