"""The one :class:`Layout` every view of an image or Cube adapts, so dims, coords and attrs cannot drift (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..format.blob import Header
from ..format.geo import Georeferencing, RasterType
from .alignment import check_aligned
from .coords import GRID_MAPPING, corner_transform, grid_mapping_attrs, spatial_coords

#: The data variable, as rioxarray's engine names it.
VARIABLE = "band_data"


@dataclass(frozen=True)
class Coordinate:

    dims: tuple[str, ...]
    values: np.ndarray
    attrs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Layout:
    """``band_data`` of one image, or of a Cube of aligned images stacked along ``stack_dim``: dims, shape, one
    frame as the chunk, coordinates, attributes and encoding."""

    headers: tuple[Header, ...]
    sources: tuple[str, ...]
    georeferencing: Georeferencing | None
    #: The name of the stacking dimension of a Cube; ``None`` for one image.
    stack_dim: str | None = None

    @property
    def grid(self):
        return self.headers[0].grid

    @property
    def sample_type(self):
        return self.headers[0].sample_type

    @property
    def dims(self) -> tuple[str, ...]:
        return (*self._stack(self.stack_dim), "band", "y", "x")

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self._stack(len(self.headers)), *self.grid.shape)

    @property
    def chunks(self) -> tuple[int, ...]:
        """One frame, one image deep."""
        grid = self.grid
        return (*self._stack(1), grid.bands_per_frame, grid.tile_length, grid.tile_width)

    @property
    def dtype(self) -> np.dtype:
        """What the reader returns (``virtual.codec.zarr_dtype`` may widen it)."""
        return self.sample_type.dtype

    @property
    def raster_type(self) -> RasterType:
        return RasterType.AREA if self.georeferencing is None else self.georeferencing.raster_type

    @property
    def attrs(self) -> dict:
        defined = self.georeferencing is not None and self.georeferencing.is_defined
        return {"AREA_OR_POINT": self.raster_type.name.title()} if defined else {}

    @cached_property
    def coords(self) -> dict[str, Coordinate]:
        grid = self.grid
        spatial = spatial_coords(corner_transform(self.georeferencing), grid.image_width, grid.image_length)
        return {
            "band": Coordinate(("band",), np.arange(1, grid.samples_per_pixel + 1, dtype=np.int64)),
            **{name: Coordinate(dims, values) for name, (dims, values) in spatial.items()},
            GRID_MAPPING: Coordinate((), np.int64(0), grid_mapping_attrs(self.georeferencing)),
        }

    @property
    def zarr_attrs(self) -> dict:
        """``band_data``'s attributes in Zarr: CF ``coordinates`` (``spatial_ref`` and any 2-D ones), the grid
        mapping, the sample type and a Cube's sources."""
        extra = [name for name, c in self.coords.items() if len(c.dims) > 1]
        attrs = {"coordinates": " ".join([GRID_MAPPING, *extra]), "grid_mapping": GRID_MAPPING,
                 "rumi_sample_type": self.sample_type.name, **self.attrs}
        if self.stack_dim is not None:
            attrs["rumi_sources"] = list(self.sources)
        return attrs

    @property
    def encoding(self) -> dict:
        grid = self.grid
        if self.stack_dim is None:
            encoding = {"source": self.sources[0], "header": self.headers[0].to_bytes()}
        else:
            encoding = {"headers": [h.to_bytes() for h in self.headers], "sources": list(self.sources)}
        return {
            **encoding,
            "grid_mapping": GRID_MAPPING,
            "preferred_chunks": {"band": grid.bands_per_frame, "y": grid.tile_length, "x": grid.tile_width},
            "tile_size": (grid.tile_length, grid.tile_width),
            "frame_unit": grid.frame_unit.name.lower(),
            "sample_type": self.sample_type.name,
            "raster_type": self.raster_type.name.lower(),
        }

    def _stack(self, value) -> tuple:
        return () if self.stack_dim is None else (value,)


def image_layout(image) -> Layout:
    """The :class:`Layout` of one opened image."""
    return Layout((image.header,), (image.source.url,), image.georeferencing)


def cube_layout(images: Sequence, dim: str, names: Sequence[str] | None = None) -> Layout:
    """The :class:`Layout` of aligned images stacked along ``dim``; ``ValueError`` naming how one differs."""
    if not images:
        raise ValueError("a Cube needs at least one image")
    check_aligned(images, names)
    return Layout(tuple(i.header for i in images), tuple(i.source.url for i in images), images[0].georeferencing,
                  stack_dim=dim)


__all__ = ["VARIABLE", "Coordinate", "Layout", "cube_layout", "image_layout"]
