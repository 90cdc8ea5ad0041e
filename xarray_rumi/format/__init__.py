"""rumi 0.1.0 as pure functions and small value types: no I/O, no xarray."""

from .blob import Header
from .dtypes import SAMPLE_TYPES, SampleType, sample_type, sample_type_for_dtype, sample_type_from_name
from .geo import Georeferencing, ModelType, RasterType, georeferencing, registry_entry, resolve_crs
from .grid import FrameGrid, FrameUnit
from .ifd import ParsedIFD, build_prefix, check_frame_layout, parse_prefix, prefix_size
from .placement import base_frame_offset, georeferencing_offset
from .limits import DEFAULT_LIMITS, Limits

__all__ = [
    "DEFAULT_LIMITS", "SAMPLE_TYPES", "FrameGrid", "FrameUnit", "Georeferencing", "Header", "Limits",
    "ModelType", "ParsedIFD", "RasterType", "SampleType", "base_frame_offset", "build_prefix",
    "check_frame_layout", "georeferencing", "georeferencing_offset", "parse_prefix", "prefix_size",
    "registry_entry", "resolve_crs", "sample_type", "sample_type_for_dtype", "sample_type_from_name",
]
