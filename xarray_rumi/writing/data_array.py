"""What a DataArray brings to a write: dimensions by name, georeferencing, and what rumi cannot store."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .blocks import refuse_masked


#: The rumi sample type of the GDAL type numpy widens to complex64 (rioxarray's ``encoding["rasterio_dtype"]``).
GDAL_SAMPLE_TYPES = {"complex_int16": "cint16"}


class WriteInput(NamedTuple):
    """What ``write`` takes from its ``data`` argument."""

    values: object             #: numpy or Dask array, ``(B, Y, X)``
    encoding: dict
    crs: object = None
    transform: Callable[[], tuple] | None = None  #: rioxarray's, checked, computed only when written
    gcps: int | None = None    #: ground control points found (their georeferencing is not affine)
    unstored: tuple = ()       #: ``(note, warning class)`` for each thing rumi cannot store


def as_band_array(data) -> WriteInput:
    """The array to write, ``(B, Y, X)``, and what a DataArray says about it."""
    if hasattr(data, "dims") and hasattr(data, "variable"):  # an xarray DataArray
        found = _data_array_input(data)
    else:
        values = data if hasattr(data, "__array_function__") else np.asarray(data)
        if values.ndim == 2:
            values = values[None]
        if values.ndim != 3:
            raise ValueError(f"data must be (B, Y, X) or (Y, X), got shape {values.shape}")
        refuse_masked(values)  # a Dask array's blocks are refused as they are computed
        found = WriteInput(np.ma.getdata(values) if isinstance(values, np.ma.MaskedArray) else values, {})
    if 0 in found.values.shape:
        raise ValueError(f"cannot write an empty raster of shape {found.values.shape}")
    return found


def _data_array_input(data) -> WriteInput:
    band, y, x = band_y_x(data)
    encoding = dict(data.encoding)
    if "raster_type" not in encoding and str(data.attrs.get("AREA_OR_POINT", "")).lower() == "point":
        encoding["raster_type"] = "point"
    gcps, crs, transform = gcp_count(data), None, None
    # GCPs are not an affine transform: rioxarray's CRS (the GCPs') with its identity transform is a false location
    if gcps is None and _has_rioxarray():
        # before transposing: dimensions named with rio.set_spatial_dims are known to this object's accessor only
        crs, transform = data.rio.crs, functools.partial(rio_transform, data, y, x)
    nodata, scaling = _nodata(data), scaling_attributes(data)
    unstored = ((band_labels_note(data, band), BandLabelsNotStoredWarning),
                (None if nodata is None else nodata_note(nodata), NodataNotStoredWarning),
                (scaling and scale_note(scaling), ScaleNotStoredWarning))
    ordered = data.transpose(y, x).expand_dims("band") if band is None else data.transpose(band, y, x)
    return WriteInput(ordered.data, encoding, crs, transform, gcps, tuple(u for u in unstored if u[0]))


def band_y_x(data) -> tuple:
    """The names of a DataArray's band (``None`` if 2-D), y and x dimensions (rioxarray's), whatever their order."""
    if data.ndim not in (2, 3):
        raise ValueError(f"a DataArray to write has a y, an x and at most one band dimension, got dims {data.dims}; "
                         "select one band dimension's worth with .sel or .isel")
    if _has_rioxarray():
        from rioxarray.exceptions import MissingSpatialDimensionError

        try:
            spatial = data.rio.y_dim, data.rio.x_dim
        except MissingSpatialDimensionError:
            spatial = None
    else:
        spatial = _named_spatial_dims(data)
    if spatial is None:
        raise ValueError(
            f"cannot tell which dimensions of {data.dims} are y and x: name them y and x (or latitude and "
            "longitude), give their coordinates CF axis attributes (axis='Y' / 'X'), or call "
            "da.rio.set_spatial_dims(x_dim=..., y_dim=...); rumi writes (band, y, x) by name, never by position")
    y, x = spatial
    others = [dim for dim in data.dims if dim not in (y, x)]
    return (others[0] if others else None), y, x


def _has_rioxarray() -> bool:
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:
        return False
    return True


def _named_spatial_dims(data) -> tuple | None:
    """``(y, x)`` as rioxarray 0.19's ``XRasterBase.__init__`` finds them, for when it is not installed."""
    if "x" in data.dims and "y" in data.dims:
        return "y", "x"
    if "longitude" in data.dims and "latitude" in data.dims:
        return "latitude", "longitude"
    y = x = None
    for name, coord in data.coords.items():
        if coord.dims != (name,):
            continue
        axis, standard_name = coord.attrs.get("axis", "").upper(), coord.attrs.get("standard_name", "").lower()
        if axis == "X" or standard_name in ("longitude", "projection_x_coordinate"):
            x = name
        elif axis == "Y" or standard_name in ("latitude", "projection_y_coordinate"):
            y = name
    return None if y is None or x is None else (y, x)


def rio_transform(data, y: str, x: str) -> tuple:
    """``data.rio.transform()``, refused unless it puts the pixels at their coordinates (docs/writing.md)."""
    stored = _stored_transform(data)
    if stored is not None and (stored[1] or stored[3]):
        return stored  # rotated: 1-D coordinates cannot express it, and rioxarray uses it as stored
    if stored is None:
        for dim in (y, x):
            _check_spacing_known(data, dim)

    def misplaced(transform) -> list[str]:
        a, _, c, _, e, f = transform
        return [dim for dim, origin, step in ((y, f, e), (x, c, a)) if not _on_grid(data, dim, origin, step)]

    inferred = tuple(data.rio.transform())[:6]
    if not misplaced(inferred):
        return inferred
    # the stored resolution disagrees with the coordinates: take theirs, from the first and last
    recalculated = tuple(data.rio.transform(recalc=True))[:6]
    if wrong := misplaced(recalculated):
        raise _irregular(data, wrong[0])
    return recalculated


def _stored_transform(data) -> tuple | None:
    grid_mapping = data.rio.grid_mapping
    if grid_mapping in data.coords and "GeoTransform" in data.coords[grid_mapping].attrs:
        text = str(data.coords[grid_mapping].attrs["GeoTransform"])
        try:
            c, a, b, f, d, e = (float(v) for v in text.split())  # GDAL's order
        except ValueError:
            raise ValueError(f"the GeoTransform of the DataArray's {grid_mapping!r} coordinate is not six "
                             f"numbers: {text!r}; pass transform=") from None
        return a, b, c, d, e, f
    if "transform" in data.attrs:
        return tuple(float(v) for v in data.attrs["transform"][:6])
    return None


def _coordinates(data, dim: str) -> np.ndarray | None:
    return np.asarray(data.coords[dim].values, dtype=float) if dim in data.coords else None


def _check_spacing_known(data, dim: str) -> None:
    values = _coordinates(data, dim)
    if values is not None and values.size >= 2:
        return
    had = f"no {dim} coordinate" if values is None else f"1 {dim} coordinate"
    raise ValueError(
        f"cannot tell the pixel size along {dim}: the DataArray has {had} and no stored transform (rioxarray's "
        "rio.transform() would give the identity, which is no georeferencing at all); pass "
        "transform=(x_res, 0, x_origin, 0, y_res, y_origin), or store one with da.rio.write_transform(...)")


def _irregular(data, dim: str) -> ValueError:
    steps = np.diff(_coordinates(data, dim))
    between = f" (steps from {steps.min():g} to {steps.max():g})" if steps.size else ""
    return ValueError(
        f"the DataArray's {dim} coordinates are not a regular grid{between}, so no transform puts every pixel "
        "where its coordinate says; resample it to a regular grid (da.rio.reproject, da.interp), or pass "
        "transform= to write it with that transform anyway")


def _on_grid(data, dim: str, origin: float, resolution: float) -> bool:
    """Whether ``dim``'s coordinates are the pixel centres, within 1/1000 pixel plus their own precision."""
    values = _coordinates(data, dim)
    if values is None:
        return True
    if resolution == 0:
        return False
    centres = origin + resolution * (np.arange(values.size) + 0.5)
    dtype = data.coords[dim].dtype
    precision = 4 * float(np.spacing(np.abs(values).max().astype(dtype))) if dtype.kind == "f" else 0.0
    return bool(np.all(np.abs(centres - values) <= 1e-3 * abs(resolution) + precision))


class GcpsNotStoredWarning(UserWarning):
    """The array written was georeferenced by ground control points, which a rumi file cannot record."""


def gcp_count(data) -> int | None:
    """How many GCPs rioxarray keeps for a DataArray (its grid mapping's ``gcps``), else ``None``."""
    name = data.encoding.get("grid_mapping", data.attrs.get("grid_mapping", "spatial_ref"))
    if name not in data.coords or "gcps" not in data.coords[name].attrs:
        return None
    value = data.coords[name].attrs["gcps"]
    try:
        features = (json.loads(value) if isinstance(value, str) else value)["features"]
        return len(features)
    except (TypeError, ValueError, KeyError):  # there, but not as rioxarray writes it: still not affine
        return 0


def gcps_note(count: int) -> str:
    """What ``write`` warns when a DataArray georeferenced by GCPs is written without them."""
    points = f"{count} ground control points" if count else "ground control points"
    return (f"the DataArray is georeferenced by {points} (GCPs), which are not stored; rumi stores only an affine "
            "transform, so the file has no georeferencing; warp it to an affine grid first "
            "(da.rio.reproject(da.rio.crs) uses the GCPs), or pass crs= and transform= to write your own")


class BandLabelsNotStoredWarning(UserWarning):
    """The array written labelled its bands other than 1..B, the labels a rumi file reads back with."""


def band_labels_note(data, band: str | None) -> str | None:
    """What ``write`` warns when band labels other than 1..B, those read back, are dropped; else ``None``."""
    if band is None or band not in data.coords:
        return None
    labels = np.asarray(data.coords[band].values)
    if labels.dtype.kind in "iuf" and np.array_equal(labels, np.arange(1, labels.size + 1)):
        return None
    texts = (list(np.datetime_as_string(labels, unit="auto")) if labels.dtype.kind == "M"
             else [_number_text(v) if labels.dtype.kind in "iuf" else str(v) for v in labels.tolist()])
    shown = texts if len(texts) <= 6 else texts[:3] + ["..."] + texts[-2:]
    return (f"band labels are not stored: rumi has no place for them; dimension {band!r} labelled "
            f"[{', '.join(shown)}] reads back as band 1..{len(texts)}, in the order written")


class NodataNotStoredWarning(UserWarning):
    """The array written had a nodata value, which a rumi file cannot record."""


def nodata_note(value) -> str:
    """What ``write`` warns and ``rumi convert`` prints when the data had a nodata value.

    >>> nodata_note(-9999.0).split(":")[0]
    'nodata -9999 is not stored'
    """
    return (f"nodata {_number_text(value)} is not stored: rumi has no place for it; pixel values are unchanged; "
            "pass nodata= to xarray_rumi.stac.item to publish it")


def _number_text(value) -> str:
    """``-9999``, ``nan``, ``0.5``, ``(1, 2)``: numpy scalars in their own precision, arrays in brackets."""
    if np.ndim(value):
        return "(" + ", ".join(_number_text(v) for v in np.ravel(value)) + ")"
    if np.iscomplexobj(value):  # float() of a numpy complex warns and drops the imaginary part
        if np.imag(value) != 0:
            return str(value)
        value = np.real(value)
    try:
        number = float(value)
    except (TypeError, ValueError):  # not a number at all
        return str(value)
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else str(value)


def _nodata(data):
    if not _has_rioxarray():
        return _attribute_nodata(data)
    try:
        return data.rio.nodata
    except (OverflowError, TypeError, ValueError):  # a value the dtype cannot hold: rioxarray refuses to cast it
        return _attribute_nodata(data)


def _attribute_nodata(data):
    """``rio.nodata`` without rioxarray, looked up in rioxarray's order."""
    encoded = data.encoding.get("_FillValue")
    if encoded is not None:  # masked when read: the missing pixels are NaN in memory
        return np.nan if data.dtype.kind in "fc" else encoded
    for name in ("_FillValue", "missing_value", "fill_value", "nodata"):
        if data.attrs.get(name) is not None:
            return data.attrs[name]
    listed = data.attrs.get("nodatavals")
    return listed[0] if listed else None


class ScaleNotStoredWarning(UserWarning):
    """The array written carried a scale or an offset in its attributes, which a rumi file cannot record."""


#: CF's and rioxarray's (per band) scaling attributes, and the values that change nothing.
_SCALING = {"scale_factor": 1, "add_offset": 0, "scales": 1, "offsets": 0}


def scale_note(scaling: dict) -> str:
    """What ``write`` warns when raw values carried a scale or an offset: their attribute names and values."""
    plural = len(scaling) > 1 or any(name in ("scales", "offsets") for name in scaling)
    verb, pronoun = ("are", "them") if plural else ("is", "it")
    named = " and ".join(f"{name} {_number_text(value)}" for name, value in scaling.items())
    return (f"{named} {verb} not stored: rumi has no place for {pronoun}; pixel values are written as they are, "
            f"unscaled; decode {pronoun} first (mask_and_scale=True) to write scaled values, or keep {pronoun} "
            "in your catalog")


def scaling_attributes(data) -> dict | None:
    """A DataArray's scale and offset attributes that change its values, or ``None`` (decoded data has none)."""
    changing = {}
    for name, identity in _SCALING.items():
        value = data.attrs.get(name)
        if value is None:
            continue
        try:
            unchanged = np.all(np.asarray(value, dtype=float) == identity)
        except (TypeError, ValueError):  # an attribute that is not a number: say it as it is
            unchanged = False
        if not unchanged:
            changing[name] = value
    return changing or None
