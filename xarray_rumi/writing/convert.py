"""Converting anything rasterio opens (URLs included) to rumi, a few frames in memory (docs/writing.md)."""

from __future__ import annotations

import os
import posixpath
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..format.geo import IDENTITY, corner_to_centre, resolve_crs
from ..format.ifd import parse_head, prefix_size
from ..format.placement import IFD_SIZE, PREAMBLE_SIZE
from ..frames.codec import frame_version
from ..io.retry import RetryPolicy
from ..io.source import ByteSource
from .data_array import GDAL_SAMPLE_TYPES, scaling_attributes
from .parameters import check_storage_options, parse_frame_unit, tile_shape
from .staging import refuse_overwriting
from .write import write

#: GDAL's block cache during a conversion holds at least this many bytes, and this many source block rows.
GDAL_CACHE_FLOOR = 32 * 2**20
GDAL_CACHE_BLOCK_ROWS = 4

#: pyproj's default; the looser matches it admits are kept out by ``CRS.equals`` in :func:`identify_epsg`.
CRS_CONFIDENCE = 70

# bytes per sample of the GDAL type with no numpy twin
_GDAL_ITEMSIZES = {"complex_int16": 4}


@dataclass(frozen=True)
class Conversion:
    """What one conversion did."""

    source: str
    target: str
    source_bytes: int
    target_bytes: int
    raw_bytes: int
    nodata: float | None
    #: ``"EPSG:n"`` or ``None``; found ``"named"``, ``"identified"`` (equivalent WKT) or ``"assigned"`` (``crs=``).
    crs: str | None = None
    crs_source: str | None = None
    #: Scales and offsets not stored (rioxarray's names): the pixels are written raw.
    scaling: dict | None = None
    #: The GDAL mask band not stored: ``"internal"``, its sidecar's name, or ``None``.
    mask: str | None = None
    #: Bands (1-based) whose colour table was not stored.
    palette: tuple[int, ...] = ()

    @property
    def ratio(self) -> float:
        return self.raw_bytes / self.target_bytes


def convert(source, target, *, tile_size=512, frame_unit="tile", compression="auto", drop_georeferencing=False,
            crs=None, storage_options=None, progress=None) -> Conversion:
    """Convert a raster rasterio opens into a rumi file and its ``.header`` at ``target`` (path or fsspec URL).

    ``crs`` replaces the source's CRS as ``gdal_translate -a_srs`` does; the other options are ``write``'s.

    >>> import numpy as np, rasterio, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with rasterio.open(os.path.join(d, "in.tif"), "w", driver="GTiff", width=64, height=32, count=1,
    ...                    dtype="uint8", crs="EPSG:4326", transform=rasterio.Affine(0.1, 0, 5, 0, -0.1, 45)) as f:
    ...     f.write(np.ones((1, 32, 64), "uint8"))
    >>> convert(os.path.join(d, "in.tif"), os.path.join(d, "out.rumi"), tile_size=32).raw_bytes
    2048
    """
    import rasterio
    import rioxarray
    from rasterio.enums import ColorInterp

    source, target = os.fspath(source), os.fspath(target)
    # checked before the source is open: a bad one would fail inside Dask
    tile_rows, _ = tile_shape(tile_size)
    parse_frame_unit(frame_unit)
    check_storage_options(storage_options)
    if crs is not None and drop_georeferencing:
        raise ValueError("crs= assigns a CRS and drop_georeferencing drops it: pass one of them")
    refuse_overwriting([source], [target, target + ".header"], "the raster being converted")
    if is_rumi_file(source):  # before GDAL opens it: GDAL reads a rumi file as a broken TIFF, noisily
        raise ValueError(f"{source}: already a rumi file (a BigTIFF whose tiles are OpenZL frames); there is "
                         "nothing to convert (rumi info describes it)")
    with rasterio.open(source) as src:
        code, transform, how = _georeferencing(src, source, drop_georeferencing, crs)
        raster_type = "point" if src.tags().get("AREA_OR_POINT", "").lower() == "point" else "area"
        if raster_type == "point" and transform is not None:
            transform = corner_to_centre(transform)   # GDAL reports a PixelIsPoint file's transform for corners
        sample_type = GDAL_SAMPLE_TYPES.get(src.dtypes[0])
        refuse_complex_int32(src, source)
        nodata, mask = src.nodata, mask_band(src)
        palette = tuple(band for band, meaning in enumerate(src.colorinterp, 1) if meaning == ColorInterp.palette)
        cache_bytes = gdal_cache_bytes(src)
    with warnings.catch_warnings():
        # rioxarray warns when bands differ in scale or offset; the Conversion names them all instead
        warnings.filterwarnings("ignore", r"(Scales|Offsets) differ across bands", UserWarning)
        data = rioxarray.open_rasterio(
            source, chunks={"band": -1, "y": tile_rows, "x": -1}, lock=False, mask_and_scale=False, cache=False
        )
    scaling = scaling_attributes(data)  # what write would warn about for the DataArray, named in the Conversion instead
    try:
        # the bare Dask array: georeferencing is exactly what was decided above
        with _gdal_cache(cache_bytes):
            write(target, data.data, tile_size=tile_size, frame_unit=frame_unit, crs=code, transform=transform,
                  raster_type=raster_type, sample_type=sample_type, compression=compression,
                  storage_options=storage_options, progress=progress)
    finally:
        data.close()
    raw = data.size * (4 if sample_type == "cint16" else data.dtype.itemsize)
    return Conversion(source, target, _size(source, None), _size(target, storage_options), raw, nodata,
                      None if code is None else f"EPSG:{code}", how, scaling, mask, palette)


def is_rumi_file(source) -> bool:
    """Whether ``source`` is a rumi file: rumi's fixed IFD, and an OpenZL frame where the frames begin.

    >>> import tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> _ = xarray_rumi.write(path, np.zeros((8, 8), "uint8"))
    >>> is_rumi_file(path), is_rumi_file(path + ".header"), is_rumi_file(path + ".missing")
    (True, False, False)
    """
    reader = ByteSource.of(source, retry=RetryPolicy(attempts=1))
    try:
        head = reader.read(0, PREAMBLE_SIZE + IFD_SIZE, exact=False)
        parse_head(head)
        first_frame = prefix_size(head)
        frame_version(reader.read(first_frame, first_frame + 4, exact=False))
    except Exception:  # noqa: BLE001 - not rumi, or fsspec cannot read it (a GDAL /vsi path): rasterio names it
        return False
    return True


def refuse_complex_int32(src, source: str) -> None:
    """Refuse a CInt32 raster: rasterio hands its parts over as float32, exact only up to 2**24."""
    if src.dtypes[0] != "complex64":  # CInt32 and CFloat32 both read as complex64: only GDAL's own type tells
        return
    import rasterio.shutil

    with rasterio.MemoryFile() as vrt:
        rasterio.shutil.copy(src, vrt.name, driver="VRT")
        if b'dataType="CInt32"' in vrt.read():
            raise ValueError(f"{source} holds CInt32 samples, which rasterio reads as complex64 (float32 parts, "
                             "exact only up to 2**24): converting them would change values; write them with "
                             "xarray_rumi.write(..., sample_type=\"cint32\") from an exact complex128 read")


def mask_band(src) -> str | None:
    """Where the GDAL mask band of ``src`` lies: ``"internal"``, the sidecar's name, or ``None`` (none, nodata, alpha)."""
    from rasterio.enums import MaskFlags

    kept = {MaskFlags.all_valid, MaskFlags.nodata, MaskFlags.alpha}
    if all(kept & set(flags) for flags in src.mask_flag_enums):
        return None
    sidecars = [name for name in src.files if name.lower().endswith(".msk")]
    return posixpath.basename(sidecars[0]) if sidecars else "internal"


def mask_note(where: str) -> str:
    """What ``rumi convert`` prints when the source's GDAL mask band is not stored."""
    place = "internal to the source" if where == "internal" else f"in {where}, beside the source"
    return (f"the GDAL mask band ({place}) is not stored: rumi has no place for it; masked pixels keep their "
            "stored values and read back as valid; burn it into nodata values, or write it as a band "
            "(gdal_translate -b 1 ... -b mask), before converting")


def palette_note(bands: tuple[int, ...]) -> str:
    """What ``rumi convert`` prints when the source's colour table is not stored."""
    named = ", ".join(str(band) for band in bands)
    return (f"the colour table (palette) of band{'s' if len(bands) > 1 else ''} {named} is not stored: rumi has "
            "no place for it; pixel values are the palette's indices, unchanged; expand it first "
            "(gdal_translate -expand rgb) to write the colours")


def gdal_cache_bytes(src) -> int:
    """The bound on GDAL's block cache while ``src`` is converted (docs/writing.md, "Memory")."""
    from rasterio.env import get_gdal_config

    block_rows = src.block_shapes[0][0]
    row_bytes = src.width * sum(_GDAL_ITEMSIZES.get(name) or np.dtype(name).itemsize for name in src.dtypes)
    wanted = max(GDAL_CACHE_FLOOR, GDAL_CACHE_BLOCK_ROWS * block_rows * row_bytes)
    return min(wanted, int(get_gdal_config("GDAL_CACHEMAX")))  # rasterio reports GDAL's cache size in bytes


@contextmanager
def _gdal_cache(limit: int):
    # set back by hand: rasterio.Env does not restore this process-wide setting
    from rasterio.env import get_gdal_config, set_gdal_config

    before = get_gdal_config("GDAL_CACHEMAX")
    set_gdal_config("GDAL_CACHEMAX", limit)
    try:
        yield
    finally:
        set_gdal_config("GDAL_CACHEMAX", before)


def identify_epsg(crs, min_confidence: int = CRS_CONFIDENCE) -> tuple[int, str]:
    """``(EPSG code, "named" or "identified")`` of ``crs`` (WKT, pyproj or rasterio CRS); ``ValueError`` otherwise.

    >>> from pyproj import CRS
    >>> wkt = CRS.from_epsg(32633).to_wkt("WKT1_GDAL").replace("WGS 84 / UTM zone 33N", "UTM 33 North")
    >>> identify_epsg(wkt.replace(',AUTHORITY["EPSG","32633"]', ""))
    (32633, 'identified')
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    wkt = crs.to_wkt() if hasattr(crs, "to_wkt") else crs
    try:
        return resolve_crs(wkt)[0], "named"
    except ValueError as exact:
        try:
            parsed = CRS.from_user_input(wkt)
        except CRSError:  # resolve_crs said so already
            raise exact from None
        code = parsed.to_epsg(min_confidence=min_confidence)
        if code is None or not CRS.from_epsg(code).equals(parsed, ignore_axis_order=True):
            raise exact from None
        return resolve_crs(code)[0], "identified"


def _georeferencing(src, name: str, drop: bool, assign=None):
    """``(epsg, transform, how)`` to write for ``src``; ``(None, None, None)`` for no georeferencing."""
    if drop:
        return None, None, None
    transform = tuple(src.transform)[:6]
    if assign is not None:
        return resolve_crs(assign)[0], transform, "assigned"
    if src.crs is None:
        if transform != IDENTITY:
            raise ValueError(
                f"{name} has a transform but no CRS; rumi stores a transform only with an EPSG CRS "
                "(assign one with crs= / --crs EPSG:n, or use drop_georeferencing / --drop-georeferencing)"
            )
        return None, None, None
    try:
        code, how = identify_epsg(src.crs)
    except ValueError as exc:
        raise ValueError(
            f"{exc} (assign a CRS with crs= / --crs EPSG:n, or use drop_georeferencing / --drop-georeferencing "
            "to write the pixels without it)"
        ) from None
    return code, transform, how


def _size(target: str, storage_options) -> int | None:
    try:
        return ByteSource.of(target, storage_options).size()
    except (OSError, ValueError):  # a source URL rasterio reads but fsspec cannot size
        return None
