"""Georeferencing: the 4 x 4 ModelTransformation matrix and the 16-short GeoKeys."""

from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass
from functools import lru_cache

from ..errors import RumiFormatError


class ModelType(enum.IntEnum):
    UNDEFINED = 0
    PROJECTED = 1
    GEOGRAPHIC = 2


class RasterType(enum.IntEnum):
    AREA = 1
    POINT = 2

    @classmethod
    def parse(cls, value) -> RasterType:
        """Accept ``"area"``/``"point"``, 1/2 or a ``RasterType``; ``ValueError`` otherwise."""
        if isinstance(value, str) and value.lower() in ("area", "point"):
            return cls[value.upper()]
        if isinstance(value, int) and not isinstance(value, bool) and value in (1, 2):
            return cls(value)
        raise ValueError(f"raster_type must be 'area' or 'point', got {value!r}")


EPSG_MIN, EPSG_MAX = 1024, 32766
IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)  # affine (a, b, c, d, e, f) of no georeferencing
KEY_MODEL_TYPE, KEY_RASTER_TYPE, KEY_GEOGRAPHIC, KEY_PROJECTED = 1024, 1025, 2048, 3072
_MATRIX = struct.Struct("<16d")
_KEYS = struct.Struct("<16H")


@dataclass(frozen=True)
class Georeferencing:
    """What the two georeferencing tags say; ``transform`` is ``affine.Affine``'s ``(a, b, c, d, e, f)``.

    >>> g = Georeferencing(epsg=32618, model_type=ModelType.PROJECTED,
    ...                    transform=(30.0, 0.0, 101985.0, 0.0, -30.0, 2826915.0))
    >>> Georeferencing.from_tags(g.model_transformation(), g.geo_keys()) == g
    True
    """

    epsg: int | None = None
    model_type: ModelType = ModelType.UNDEFINED
    raster_type: RasterType = RasterType.AREA
    transform: tuple[float, ...] = IDENTITY

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_type", ModelType(int(self.model_type)))
        object.__setattr__(self, "raster_type", RasterType(int(self.raster_type)))
        object.__setattr__(self, "transform", tuple(float(v) for v in self.transform))

    @property
    def is_defined(self) -> bool:
        return self.model_type is not ModelType.UNDEFINED

    @property
    def crs_code(self) -> str | None:
        """The CRS as ``"EPSG:<code>"``, ``None`` without one."""
        return f"EPSG:{self.epsg}" if self.is_defined else None

    def model_transformation(self) -> bytes:
        """The 16 doubles of ModelTransformationTag, row-major."""
        a, b, c, d, e, f = self.transform
        return _MATRIX.pack(a, b, 0.0, c, d, e, 0.0, f, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)

    def geo_keys(self) -> bytes:
        """The 16 shorts of GeoKeyDirectoryTag."""
        crs_key = KEY_PROJECTED if self.model_type is ModelType.PROJECTED else KEY_GEOGRAPHIC
        code = self.epsg if self.is_defined else 0
        return _KEYS.pack(
            1, 1, 0, 3,
            KEY_MODEL_TYPE, 0, 1, int(self.model_type),
            KEY_RASTER_TYPE, 0, 1, int(self.raster_type),
            crs_key, 0, 1, code,
        )

    @classmethod
    def from_tags(cls, matrix_bytes: bytes, keys_bytes: bytes) -> Georeferencing:
        """Parse and check the two tags' values (spec: *Georeferencing*)."""
        m = _MATRIX.unpack(matrix_bytes)
        keys = _KEYS.unpack(keys_bytes)
        version, revision, minor, count = keys[:4]
        if (version, revision, count) != (1, 1, 3) or minor not in (0, 1):
            raise RumiFormatError("georeferencing.geokey-header", f"GeoKeyDirectory header must be (1, 1, 0, 3), "
                                  f"got {keys[:4]}")
        entries = [keys[4 + 4 * i: 8 + 4 * i] for i in range(3)]
        ids = tuple(e[0] for e in entries)
        for key_id, location, key_count, _ in entries:
            if location != 0 or key_count != 1:
                raise RumiFormatError("georeferencing.geokey-inline",
                                      f"GeoKey {key_id} must be stored inline (location 0, count 1)")
        if ids[:2] != (KEY_MODEL_TYPE, KEY_RASTER_TYPE) or ids[2] not in (KEY_GEOGRAPHIC, KEY_PROJECTED):
            raise RumiFormatError("georeferencing.geokeys", f"keys must be 1024, 1025 and 2048 or 3072, got {ids}")
        model, raster, code = (e[3] for e in entries)
        if raster not in (1, 2):
            raise RumiFormatError("georeferencing.raster-type", f"GTRasterTypeGeoKey must be 1 or 2, got {raster}")
        if model not in (0, 1, 2):
            raise RumiFormatError("georeferencing.model-type", f"GTModelTypeGeoKey must be 0, 1 or 2, got {model}")
        if (m[8:12], m[12:16]) != ((0.0,) * 4, (0.0, 0.0, 0.0, 1.0)) or m[2] != 0.0 or m[6] != 0.0:
            raise RumiFormatError("georeferencing.matrix", "ModelTransformation must have a zero Z column, a zero "
                                  "third row and (0, 0, 0, 1) as its last row")
        transform = (m[0], m[1], m[3], m[4], m[5], m[7])
        if model == 0:
            if ids[2] != KEY_GEOGRAPHIC or code != 0:
                raise RumiFormatError("georeferencing.undefined",
                                      "undefined georeferencing needs GeographicTypeGeoKey (2048) equal to 0")
            if transform != IDENTITY:
                raise RumiFormatError("georeferencing.undefined",
                                      "undefined georeferencing needs the identity ModelTransformation the spec gives")
            return cls(None, ModelType.UNDEFINED, RasterType(raster), IDENTITY)
        expected_key = KEY_GEOGRAPHIC if model == ModelType.GEOGRAPHIC else KEY_PROJECTED
        if ids[2] != expected_key:
            raise RumiFormatError("georeferencing.model-key",
                                  f"GTModelTypeGeoKey {model} needs key {expected_key}, found {ids[2]}")
        if not all(math.isfinite(v) for v in transform):
            raise RumiFormatError("georeferencing.matrix", "ModelTransformation holds a non-finite value")
        if not EPSG_MIN <= code <= EPSG_MAX:
            raise RumiFormatError("georeferencing.epsg-range", f"EPSG code {code} is outside {EPSG_MIN}..{EPSG_MAX}")
        kind, registry_type = registry_entry(code)
        if kind is None:
            raise RumiFormatError("georeferencing.epsg-registry", f"EPSG:{code} is not defined by the EPSG registry")
        if registry_type is None:
            raise RumiFormatError("georeferencing.epsg-kind",
                                  f"EPSG:{code} is a {kind}; rumi stores only 2D geographic and projected CRSs")
        if registry_type != model:
            raise RumiFormatError("georeferencing.epsg-type", f"EPSG:{code} is {registry_type.name.lower()} in "
                                  f"the EPSG registry, but GTModelTypeGeoKey says {ModelType(model).name.lower()}")
        return cls(code, ModelType(model), RasterType(raster), transform)


@lru_cache(maxsize=4096)
def registry_entry(code: int) -> tuple[str | None, ModelType | None]:
    """``(kind, model type)`` of an EPSG code in the EPSG registry; ``None`` for what rumi cannot store.

    >>> registry_entry(7405)
    ('Compound CRS', None)
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        crs = CRS.from_epsg(int(code))
    except CRSError:
        return None, None
    # A compound CRS reports is_projected for its horizontal part.
    if crs.is_compound or len(crs.axis_info) != 2:
        return crs.type_name, None
    model = ModelType.PROJECTED if crs.is_projected else ModelType.GEOGRAPHIC if crs.is_geographic else None
    return crs.type_name, model


def resolve_crs(crs) -> tuple[int, ModelType]:
    """``(epsg, model_type)`` of anything pyproj reads that has an EPSG code; ``ValueError`` otherwise.

    >>> resolve_crs("EPSG:4326")
    (4326, <ModelType.GEOGRAPHIC: 2>)
    """
    # A code or a string names one CRS for good: resolved once per process, as pyproj is slow (docs/benchmarks.md).
    return _resolve_crs(crs) if isinstance(crs, (int, str)) else _resolve_crs.__wrapped__(crs)


@lru_cache(maxsize=256, typed=True)  # typed: True is not EPSG:1
def _resolve_crs(crs) -> tuple[int, ModelType]:
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        parsed = CRS.from_epsg(crs) if isinstance(crs, int) and not isinstance(crs, bool) else CRS.from_user_input(crs)
    except CRSError as exc:
        raise ValueError(f"cannot interpret CRS {crs!r}: {exc}") from None
    code = parsed.to_epsg(min_confidence=100)
    if code is None:
        raise ValueError(f"rumi stores a CRS only as an EPSG code, and {parsed.name!r} has none; "
                         "write an ordinary GeoTIFF, or drop the georeferencing explicitly")
    if not EPSG_MIN <= code <= EPSG_MAX:
        raise ValueError(f"EPSG:{code} is outside the range rumi can store ({EPSG_MIN}..{EPSG_MAX})")
    kind, model = registry_entry(code)
    if model is None:
        raise ValueError(f"EPSG:{code} is a {kind or 'code the EPSG registry does not define'}; "
                         "rumi stores only 2D geographic and projected CRSs")
    return code, model


# GDAL's arithmetic (``a * 0.5 + b * 0.5``), so coordinates agree with GDAL's bit for bit.


def corner_to_centre(transform) -> tuple[float, ...]:
    """A GDAL-style (pixel-corner) affine as a PixelIsPoint matrix's (pixel-centre) one.

    >>> corner_to_centre((30, 0, 100000, 0, -30, 200000))
    (30.0, 0.0, 100015.0, 0.0, -30.0, 199985.0)
    """
    a, b, c, d, e, f = (float(v) for v in tuple(transform)[:6])
    return (a, b, c + (a * 0.5 + b * 0.5), d, e, f + (d * 0.5 + e * 0.5))


def centre_to_corner(transform) -> tuple[float, ...]:
    """:func:`corner_to_centre` undone."""
    a, b, c, d, e, f = (float(v) for v in tuple(transform)[:6])
    return (a, b, c - (a * 0.5 + b * 0.5), d, e, f - (d * 0.5 + e * 0.5))


def affine_coefficients(transform) -> tuple[float, ...]:
    """``(a, b, c, d, e, f)`` of a transform (6 numbers, or an affine's 9) to store; ``ValueError`` for a singular one.

    >>> affine_coefficients((10, 10, 0, 10, 10, 0))
    Traceback (most recent call last):
    ...
    ValueError: transform is singular (a*e - b*d == 0): pixels would not have distinct positions; got (10, 10, 0, 10, 10, 0)
    """
    try:
        numbers = tuple(float(v) for v in tuple(transform))
    except (TypeError, ValueError):
        raise ValueError(f"transform must be six finite numbers, got {transform!r}") from None
    if len(numbers) == 9:
        if numbers[6:] != (0.0, 0.0, 1.0):
            raise ValueError(f"a 9-number transform must end in 0, 0, 1 (an affine matrix's last row), got "
                             f"{', '.join(f'{v:g}' for v in numbers[6:])}: it is not an affine transform")
        numbers = numbers[:6]
    if len(numbers) != 6 or not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"transform must be six finite numbers, got {transform!r}")
    a, b, _, d, e, _ = numbers
    if a * e - b * d == 0:
        zero = [name for name, first, second in (("x", a, d), ("y", b, e)) if first == 0 and second == 0]
        why = f" (a zero {zero[0]} resolution puts every {'column' if zero[0] == 'x' else 'row'} at the same {zero[0]})" \
            if zero else ""
        raise ValueError(f"transform is singular (a*e - b*d == 0){why}: pixels would not have distinct positions; "
                         f"got {transform!r}")
    return numbers


def georeferencing(crs=None, transform=None, raster_type="area", *, record: str | None = None,
                   fields=("crs", "transform", "raster_type")) -> Georeferencing:
    """The georeferencing a writer stores, or a ``record`` (STAC Item, catalog row) claims; its errors name
    ``record`` and the field (``fields``). Without a CRS a writer's transform is refused, a record's ignored.

    >>> georeferencing(32633, [10, 0, 5e5, 0, -10], record="catalog row 0 ('a.rumi')",
    ...                fields=("epsg", "transform", "raster_type"))
    Traceback (most recent call last):
    ...
    ValueError: catalog row 0 ('a.rumi'): transform: transform must be six finite numbers, got [10, 0, 500000.0, 0, -10]
    """
    crs_field, transform_field, raster_field = fields
    raster = _field(record, raster_field, RasterType.parse, "area" if raster_type is None else raster_type)
    if crs is None:
        if record is None and transform is not None and tuple(transform)[:6] != IDENTITY:
            raise ValueError("a transform without a CRS cannot be stored: rumi files with no CRS carry no transform")
        return Georeferencing(None, ModelType.UNDEFINED, raster, IDENTITY)
    code, model = _field(record, crs_field, resolve_crs, crs)
    if transform is None:
        raise ValueError(f"{record}: {transform_field}: a CRS needs a transform, and there is none" if record else
                         "a CRS needs a transform; pass transform=(x_res, row_rot, x_origin, col_rot, y_res, y_origin)")
    return Georeferencing(code, model, raster, _field(record, transform_field, affine_coefficients, transform))


def _field(record: str | None, name: str, parse, value):
    try:
        return parse(value)
    except (TypeError, ValueError) as exc:
        if record is None:
            raise
        raise ValueError(f"{record}: {name}: {exc}") from None


# Not every writer carries every double exactly in text: a billionth of a pixel, plus rounding.
_PIXEL_TOLERANCE = 1e-9
_ROUNDING = 1e-12


def check_claimed_georeferencing(claimed: Georeferencing, tags: Georeferencing, *, claimed_by: str, file: str) -> None:
    """Refuse (``georeferencing.matches-file``) a claim its file's tags contradict; no CRS contradicts nothing.

    >>> file = Georeferencing(32633, ModelType.PROJECTED, transform=(10, 0, 5e5, 0, -10, 5e6))
    >>> moved = Georeferencing(32633, ModelType.PROJECTED, transform=(10, 0, 5e5 + 10, 0, -10, 5e6))
    >>> check_claimed_georeferencing(moved, file, claimed_by="STAC Item 'a'", file="a.rumi")
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: georeferencing.matches-file: STAC Item 'a' says EPSG:32633, PixelIsArea, transform (10, 0, 500010, 0, -10, 5000000); the tags of a.rumi say EPSG:32633, PixelIsArea, transform (10, 0, 500000, 0, -10, 5000000)
    """
    if not tags.is_defined or _same_place(claimed, tags):
        return
    raise RumiFormatError("georeferencing.matches-file",
                          f"{claimed_by} says {describe(claimed)}; the tags of {file} say {describe(tags)}")


def _same_place(claimed: Georeferencing, tags: Georeferencing) -> bool:
    if (claimed.epsg, claimed.raster_type) != (tags.epsg, tags.raster_type):
        return False
    a, b, _, d, e, _ = tags.transform
    pixel = max(abs(a), abs(b), abs(d), abs(e))
    return all(abs(x - y) <= _PIXEL_TOLERANCE * pixel + _ROUNDING * max(abs(x), abs(y))
               for x, y in zip(claimed.transform, tags.transform))


def describe(georef: Georeferencing) -> str:
    """Georeferencing in a few words, for messages."""
    kind = f"PixelIs{georef.raster_type.name.title()}"
    if not georef.is_defined:
        return f"no CRS, {kind}"
    return f"{georef.crs_code}, {kind}, transform ({', '.join(f'{v:.15g}' for v in georef.transform)})"
