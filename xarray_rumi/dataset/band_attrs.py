"""What STAC Items say of a variable's bands, as rioxarray's ``open_rasterio`` attributes (docs/stac.md)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from xarray.conventions import decode_cf_variable

from ..stac.read import ItemImage, StacBand


def described_stack(variable: xr.Variable, recorded: list[ItemImage], *, mask_and_scale: bool) -> xr.Variable:
    """:func:`described_variable` by the bands all Items of a Cube give alike; ``ValueError`` naming two that differ."""
    first = recorded[0]
    for other in recorded[1:]:
        if other.bands != first.bands:
            raise ValueError(f"{first.record} and {other.record} describe asset {first.asset!r}'s bands differently "
                             f"({first.bands} and {other.bands}); a Cube's variable has one nodata, scale, offset "
                             f"and set of band names: open them separately")
    return described_variable(variable, first.bands, first.record, mask_and_scale=mask_and_scale)


def band_attrs(bands: tuple[StacBand, ...], dtype, record: str) -> dict:
    """rioxarray's attributes for ``bands`` of samples of ``dtype``; ``{}`` without bands."""
    attrs = {}
    nodata = {"nan" if isinstance(band.nodata, float) and np.isnan(band.nodata) else band.nodata for band in bands}
    if len(nodata) > 1:
        raise ValueError(f"{record}: its bands give different nodata ({sorted(map(str, nodata))}); "
                         "a variable has one _FillValue")
    if nodata and bands[0].nodata is not None:
        attrs["_FillValue"] = _fill_value(bands[0].nodata, np.dtype(dtype), record)
    for field, one, several, default in (("scale", "scale_factor", "scales", 1.0),
                                         ("offset", "add_offset", "offsets", 0.0)):
        values = tuple(default if getattr(band, field) is None else getattr(band, field) for band in bands)
        if any(getattr(band, field) is not None for band in bands):
            # rioxarray gives one value where the bands agree, all of them (no CF attribute) where not
            attrs.update({one: values[0]} if len(set(values)) == 1 else {several: values})
    for field, name in (("name", "long_name"), ("unit", "units")):
        values = tuple(getattr(band, field) for band in bands)
        if any(values):
            attrs[name] = values[0] if len(values) == 1 else values
    return attrs


def _fill_value(nodata, dtype: np.dtype, record: str):
    value = float(nodata) if isinstance(nodata, str) else nodata
    if dtype.kind in "iub" and not (float(value).is_integer()
                                    and np.can_cast(np.min_scalar_type(int(value)), dtype)):
        raise ValueError(f"{record}: nodata {nodata!r} is not a value of its {dtype} samples")
    return dtype.type(value)


def described_variable(variable: xr.Variable, bands, record: str, *, mask_and_scale: bool = False) -> xr.Variable:
    """``variable`` with :func:`band_attrs` of ``bands``; masked and scaled lazily as xarray decodes CF when asked."""
    attrs = band_attrs(bands, variable.dtype, record)
    described = variable.copy(deep=False)
    described.attrs.update(attrs)
    if not mask_and_scale:
        return described
    # xarray decodes one scale and offset for the whole variable; per-band ones it cannot apply
    if "scales" in attrs or "offsets" in attrs:
        raise ValueError(f"{record}: its bands have different scales or offsets, which mask_and_scale=True "
                         "cannot apply to one variable; open with mask_and_scale=False")
    return decode_cf_variable(None, described, mask_and_scale=True, decode_times=False, decode_endianness=False,
                              stack_char_dim=False, use_cftime=False, decode_timedelta=False)


__all__ = ["band_attrs", "described_stack", "described_variable"]
