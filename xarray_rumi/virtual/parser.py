"""A VirtualiZarr parser: a rumi file as a ``ManifestStore`` of virtual chunks."""

from __future__ import annotations

import uuid

import numpy as np

from ..datamodel.coords import GRID_MAPPING
from ..io.registry import RegistrySource
from ..io.retry import DEFAULT_POLICY
from ..io.urls import as_url
from ..datamodel.variable import VARIABLE, Layout, image_layout
from ..reading.open import caller_georeferencing, open_image
from .chunks import zarr_dtype
from .codec import OpenZLBytesCodec, OpenZLZarrCodec
from .edges import chunk_references

#: zarr's bytes serializer, for arrays of raw little-endian values.
_LITTLE_ENDIAN = {"name": "bytes", "configuration": {"endian": "little"}}


class RumiParser:
    """Parse a rumi file for ``virtualizarr.open_virtual_dataset``.

    >>> import os, tempfile, numpy as np, obstore, virtualizarr, xarray_rumi
    >>> from obspec_utils.registry import ObjectStoreRegistry
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = xarray_rumi.write(path, np.ones((2, 50, 40), "uint16"), tile_size=32)
    >>> registry = ObjectStoreRegistry({"file://": obstore.store.LocalStore()})
    >>> vds = virtualizarr.open_virtual_dataset(f"file://{path}", registry=registry, parser=RumiParser(header=blob))
    >>> vds.band_data.data.manifest.shape_chunk_grid, vds.band_data.data.metadata.codecs[1].to_dict()["name"]
    ((2, 2, 2), 'numcodecs.openzl')
    """

    def __init__(self, header=None, *, codec: str = "numcodecs.openzl", **open_kwargs):
        if codec not in ("openzl", "numcodecs.openzl"):
            raise ValueError(f"codec must be 'openzl' or 'numcodecs.openzl', got {codec!r}")
        # Refuse contradictory georeferencing now, not at the first file.
        caller_georeferencing(*(open_kwargs.get(k) for k in ("crs", "transform", "raster_type", "georeferencing")))
        self.codec, self.header, self.open_kwargs = codec, header, open_kwargs

    def __call__(self, url: str, registry):
        from virtualizarr.manifests import ManifestGroup, ManifestStore

        source = RegistrySource(url, registry, self.open_kwargs.get("retry", DEFAULT_POLICY))
        layout = image_layout(open_image(source, self.header, **self.open_kwargs))
        arrays = {VARIABLE: _frames_array(url, layout, self.codec), **_coordinate_arrays(layout, registry)}
        return ManifestStore(group=ManifestGroup(arrays=arrays, attributes={}), registry=registry)


def _frames_array(url: str, layout: Layout, codec_name: str):
    grid, sample = layout.grid, layout.sample_type
    plan = chunk_references(list(layout.headers))
    config = dict(sample_type=sample.name, chunk_shape=layout.chunks, image_shape=(grid.image_length, grid.image_width))
    codecs = ([OpenZLZarrCodec(**config).to_dict()] if codec_name == "openzl"
              else [_LITTLE_ENDIAN, OpenZLBytesCodec(**config).to_dict()])
    # frame-index order to the chunk grid, (band, row, col)
    offsets, lengths = (grid.on_frame_grid(np.asarray(v, np.uint64)) for v in (plan.starts[0], plan.lengths[0]))
    paths = np.full(grid.frame_grid_shape, as_url(url), dtype=np.dtypes.StringDType())
    return _manifest_array(dict(paths=paths, offsets=offsets, lengths=lengths), shape=layout.shape,
                           data_type=zarr_dtype(sample), chunk_shape=layout.chunks, codecs=codecs,
                           attributes=layout.zarr_attrs, dimension_names=list(layout.dims))


def _manifest_array(chunks: dict | None, **metadata):
    """A ``ManifestArray`` of zarr v3 ``metadata`` (fill value 0) and the chunks ``ChunkManifest.from_arrays`` takes
    (``None``: a scalar with no chunk)."""
    from virtualizarr.manifests import ChunkManifest, ManifestArray
    from virtualizarr.manifests.utils import create_v3_array_metadata

    manifest = ChunkManifest(entries={}, shape=()) if chunks is None else ChunkManifest.from_arrays(**chunks)
    return ManifestArray(metadata=create_v3_array_metadata(fill_value=0, **metadata), chunkmanifest=manifest)


def _coordinate_arrays(layout: Layout, registry) -> dict:
    """The coordinates as virtual arrays, their bytes in an in-memory store registered in ``registry``."""
    import obstore
    from obstore.store import MemoryStore

    prefix, store = f"memory://rumi-{uuid.uuid4().hex}", MemoryStore()
    registry.register(prefix, store)
    arrays = {}
    for name, coordinate in layout.coords.items():
        if name == GRID_MAPPING:   # a scalar with no chunk: its attributes are what it says
            arrays[name] = _manifest_array(None, shape=(), data_type=np.dtype(np.int64), chunk_shape=(),
                                           codecs=[_LITTLE_ENDIAN], attributes=coordinate.attrs, dimension_names=[])
            continue
        values = np.asarray(coordinate.values)
        data = values.astype(values.dtype.newbyteorder("<")).tobytes()
        obstore.put(store, name, data)
        ones = (1,) * values.ndim
        chunks = dict(paths=np.full(ones, f"{prefix}/{name}", dtype=np.dtypes.StringDType()),
                      offsets=np.zeros(ones, np.uint64), lengths=np.full(ones, len(data), np.uint64))
        arrays[name] = _manifest_array(chunks, shape=values.shape, data_type=values.dtype, chunk_shape=values.shape,
                                       codecs=[_LITTLE_ENDIAN], dimension_names=list(coordinate.dims))
    return arrays


__all__ = ["RumiParser"]
