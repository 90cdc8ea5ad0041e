"""One picklable task per file of a migration (docs/stac.md, "Restartable and safe")."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from dataclasses import dataclass, field

import dask

from ..io.source import ByteSource
from ..io.urls import is_local, local_path
from ..reading.open import open_image, read_blob_file
from ..runtime.threads import computing_threads, in_processes, ordered_map
from ..writing.convert import convert
from ..writing.data_array import GDAL_SAMPLE_TYPES
from .items import image_fields


@dataclass(frozen=True)
class FileJob:
    """One raster asset to convert, with ``convert``'s options."""

    item_id: str
    asset: str
    source: str
    target: str
    options: dict = field(default_factory=dict)
    storage_options: dict | None = None


@dataclass(frozen=True)
class SourceBands:
    """GeoTIFF band metadata a rumi file cannot hold, one entry per band."""

    nodata: float | None
    scales: tuple
    offsets: tuple
    units: tuple
    descriptions: tuple


@dataclass(frozen=True)
class FileResult:
    """``status`` ``"converted"``, ``"kept"`` or ``"failed"`` (then ``reason``)."""

    job: FileJob
    status: str
    reason: str | None = None
    source_bytes: int | None = None
    target_bytes: int | None = None
    fields: dict | None = None
    bands: SourceBands | None = None


def convert_file(job: FileJob) -> FileResult:
    """Convert ``job.source`` unless a valid output is there; never raises for a bad file (its ``reason``)."""
    try:
        image = _output_not_older(job)
        bands, source_shape = _source_bands(job.source)
        if image is not None and _shape(image) == source_shape:
            return _result(job, "kept", image, bands)
        # on this worker's threads, not back to the cluster a frame a task
        with dask.config.set(scheduler="threads", num_workers=computing_threads()):
            convert(job.source, job.target, storage_options=job.storage_options, **job.options)
        image = open_image(job.target, read_blob_file(f"{job.target}.header", job.storage_options),
                           storage_options=job.storage_options)
        return _result(job, "converted", image, bands)
    except Exception as exc:  # noqa: BLE001 - any error is this file's; one not of bad input named with its type
        bad_input = isinstance(exc, (ValueError, OSError))
        return FileResult(job, "failed", reason=str(exc) if bad_input else f"{type(exc).__name__}: {exc}")


def _kept_file(job: FileJob) -> FileResult | None:
    """``job``'s result if its valid output is already there, else ``None`` (its task says why)."""
    try:
        image = _output_not_older(job)
        # the source's GCPs go unread with its georeferencing: an output with none (what rumi convert
        # makes of a GCP source) is left to its task, which opens the source whole
        if image is None or image.georeferencing is None or not image.georeferencing.is_defined:
            return None
        bands, source_shape = _source_bands(job.source, georeferencing=False)
        return _result(job, "kept", image, bands) if _shape(image) == source_shape else None
    except Exception:  # noqa: BLE001 - whatever it is, the file's own task meets it again and reports it
        return None


def _output_not_older(job: FileJob):
    """:func:`kept_output`, unless a local source was modified after its local output (make's rule, docs/stac.md)."""
    if is_local(job.source) and is_local(job.target):
        try:
            if os.stat(local_path(job.source)).st_mtime_ns > os.stat(local_path(job.target)).st_mtime_ns:
                return None
        except OSError:  # no output yet (it is converted), or a source GDAL names another way (/vsi...)
            pass
    return kept_output(job.target, job.storage_options)


def _result(job: FileJob, status: str, image, bands: SourceBands) -> FileResult:
    fields = image_fields(image)
    try:
        source_bytes = ByteSource.of(job.source).size()
    except (OSError, ValueError):  # a URL rasterio reads but fsspec cannot size
        source_bytes = None
    return FileResult(job, status, None, source_bytes, fields["file:size"], fields, bands)


def kept_output(target: str, storage_options=None):
    """``target`` opened if it is a whole rumi file whose blob beside it is the one its IFD gives, else ``None``."""
    try:
        blob = read_blob_file(f"{target}.header", storage_options)
        image = open_image(target, storage_options=storage_options)  # its blob rebuilt from the IFD, its real size
    except (OSError, ValueError):
        return None
    return image if image.header.to_bytes() == blob and image.file_size == image.header.frames_end else None


def _shape(image) -> tuple:
    return *image.grid.shape, image.header.sample_type.name


def _source_bands(source: str, georeferencing: bool = True) -> tuple[SourceBands, tuple]:
    """``source``'s band metadata and ``(bands, rows, cols, dtype)``; GCPs refused unless ``georeferencing=False``."""
    import rasterio

    options, settings = {}, {}
    if not georeferencing:
        # PAM .aux.xml sidecars still count, asked for by name rather than found by listing the folder (docs/stac.md)
        options, settings = {"GEOREF_SOURCES": "PAM"}, {"GDAL_DISABLE_READDIR_ON_OPEN": "TRUE"}
    with rasterio.Env(**settings), rasterio.open(source, **options) as src:
        if georeferencing and src.gcps[0]:
            # rumi convert writes such a file without georeferencing; an Item's asset must stay where it was
            raise ValueError(f"{source} is georeferenced by {len(src.gcps[0])} ground control points (GCPs), "
                             "which rumi cannot store (only an affine transform): warp it onto a grid first "
                             "(gdalwarp), then convert")
        bands = SourceBands(src.nodata, tuple(src.scales), tuple(src.offsets), tuple(src.units),
                            tuple(src.descriptions))
        return bands, (src.count, src.height, src.width, GDAL_SAMPLE_TYPES.get(src.dtypes[0], src.dtypes[0]))


def run_jobs(jobs: list[FileJob], scheduler=None, processes: int | None = None, progress=None) -> list[FileResult]:
    """:func:`convert_file` of every job, in order, on ``scheduler``, the active client, or ``processes`` processes."""
    # a rerun hands the cluster only what is left; remote outputs are checked by their own tasks, where a
    # request each costs no client time
    if not jobs or not is_local(jobs[0].target):
        return _run_jobs(jobs, scheduler, processes, progress)
    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():
        # the filters are the process's: set here, around every thread's opens, not in each thread
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        kept = list(ordered_map(_kept_file, jobs, in_flight=2 * computing_threads()))
    for result in filter(None, kept):
        _reported(result, progress)
    done = iter(_run_jobs([job for job, result in zip(jobs, kept) if result is None], scheduler, processes, progress))
    return [result if result is not None else next(done) for result in kept]


def _run_jobs(jobs: list[FileJob], scheduler, processes: int | None, progress) -> list[FileResult]:
    if not jobs:
        return []
    if scheduler is None and "distributed" in sys.modules:  # a client of this process: distributed is imported then
        with contextlib.suppress(ValueError):  # there is none
            scheduler = sys.modules["distributed"].default_client()
    if scheduler is None:
        results = in_processes(convert_file, jobs, min(len(jobs), processes or os.cpu_count() or 1))
        return [_reported(result, progress) for result in results]
    if hasattr(scheduler, "submit") and hasattr(scheduler, "gather"):
        return _on_client(scheduler, jobs, progress)
    tasks = [dask.delayed(convert_file, pure=False)(job) for job in jobs]
    return [_reported(result, progress) for result in dask.compute(*tasks, scheduler=scheduler)]


def _on_client(client, jobs: list[FileJob], progress) -> list[FileResult]:
    from distributed import as_completed

    # pure=False: a rerun is new tasks, never the cached results of a run whose outputs may since have gone
    futures = client.map(convert_file, jobs, pure=False)
    order = {future.key: index for index, future in enumerate(futures)}
    results: list = [None] * len(jobs)
    for future in as_completed(futures):
        index = order[future.key]
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - a task the cluster gave up on (its workers died): this file's
            result = FileResult(jobs[index], "failed", reason=f"{type(exc).__name__}: {exc}")
        results[index] = _reported(result, progress)
    return results


def _reported(result: FileResult, progress) -> FileResult:
    if progress is not None:
        progress(result)
    return result
