"""A VirtualiZarr parser: a rumi file as a ``ManifestStore`` of virtual chunks.

``band_data`` is a ``ManifestArray`` of the frames where they lie, decoded by
the zarr v3 ``"openzl"`` codec with the same configuration (and the same
edge table, see :mod:`xarray_rumi.virtual.edges`) as :func:`xarray_rumi.references`.

The coordinates are not in the file: they follow from the georeferencing.
VirtualiZarr manifests cannot hold inline data, so the parser puts the few
bytes of ``x``, ``y`` and ``band`` in an in-memory object store it registers
in the caller's registry under a ``memory://rumi-...`` prefix; they are
dimension coordinates, which ``open_virtual_dataset`` loads by default, so
``.vz.to_kerchunk`` inlines them and ``.vz.to_icechunk`` writes them as
ordinary chunks.  A rotated raster has 2-D ``xc``/``yc`` instead, which are
not dimension coordinates: pass them in ``loadable_variables``.
``spatial_ref`` has no chunk at all: its value 0 is the fill value and its
meaning is in its attributes.
"""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path

import numpy as np

from .codec import OpenZLBytesCodec, OpenZLChunks, OpenZLZarrCodec, zarr_dtype
from ..dataset.coords import GRID_MAPPING, corner_transform, grid_mapping_attrs, spatial_coords
from .edges import chunk_references
from ..format.geo import georeferencing
from ..reading.image import load_header, read_georeferencing, read_ifd
from .kerchunk import VARIABLE, coordinates_attribute


class RumiParser:
    """Parse a rumi file for ``virtualizarr.open_virtual_dataset``.

    ``header`` is blob bytes, a path/URL of a blob file, or ``None`` (parse the
    IFD).  ``crs``/``transform`` replace the file's georeferencing; with a
    header and both of them, nothing is read from the file.

    ``codec`` is how ``band_data`` names the OpenZL codec in its zarr v3
    metadata: ``"openzl"``, the array-to-bytes codec (the default; resolves
    through its entry point in any process), or ``"numcodecs.openzl"``,
    zarr's ``bytes`` serializer followed by the numcodecs codec.  Use the
    latter for ``.vz.to_kerchunk``: VirtualiZarr's Kerchunk writer drops
    array-to-bytes codecs, so with ``"openzl"`` it would write references with
    no codec at all.

    >>> import os, tempfile, numpy as np, obstore, virtualizarr, xarray_rumi
    >>> from obspec_utils.registry import ObjectStoreRegistry
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = xarray_rumi.write(path, np.ones((2, 50, 40), "uint16"), tile_size=32)
    >>> registry = ObjectStoreRegistry({"file://": obstore.store.LocalStore()})
    >>> vds = virtualizarr.open_virtual_dataset(f"file://{path}", registry=registry, parser=RumiParser(header=blob))
    >>> vds.band_data.data.manifest.shape_chunk_grid, vds.band_data.data.metadata.codecs[0].to_dict()["name"]
    ((2, 2, 2), 'openzl')
    """

    def __init__(self, header=None, *, crs=None, transform=None, raster_type="area", storage_options=None,
                 codec: str = "openzl"):
        if codec not in ("openzl", "numcodecs.openzl"):
            raise ValueError(f"codec must be 'openzl' or 'numcodecs.openzl', got {codec!r}")
        self.codec = codec
        self.header = header
        self.crs, self.transform, self.raster_type = crs, transform, raster_type
        self.storage_options = storage_options

    def __call__(self, url: str, registry):
        from virtualizarr.manifests import ManifestGroup, ManifestStore

        source = _RegistrySource(url, registry)
        supplied = None
        if self.crs is not None or self.transform is not None:
            supplied = georeferencing(self.crs, self.transform, self.raster_type)
        if self.header is None:
            parsed, header = read_ifd(source)
            georef = supplied or parsed.georeferencing
        else:
            header = load_header(self.header, self.storage_options)
            georef = supplied or read_georeferencing(source, header)

        coordinates = _CoordinateStore(registry)
        values = {"band": ("band", np.arange(1, header.grid.samples_per_pixel + 1, dtype=np.int64))}
        values.update(spatial_coords(corner_transform(georef), header.grid.image_width, header.grid.image_length))
        arrays = {VARIABLE: _frames_array(url, header, georef, self.codec, coordinates_attribute(values))}
        for name, (dims, data) in values.items():
            arrays[name] = coordinates.array(name, np.asarray(data), [dims] if isinstance(dims, str) else list(dims))
        arrays[GRID_MAPPING] = _scalar_array(grid_mapping_attrs(georef))
        return ManifestStore(group=ManifestGroup(arrays=arrays, attributes={}), registry=registry)


def _uri(url: str) -> str:
    return url if "://" in url else Path(url).absolute().as_uri()


def _frames_array(url: str, header, georef, codec_name: str, coordinates: str):
    from virtualizarr.manifests import ChunkManifest, ManifestArray
    from virtualizarr.manifests.utils import create_v3_array_metadata

    grid, sample = header.grid, header.sample_type
    plan = chunk_references([header])
    chunk = (grid.bands_per_frame, grid.tile_length, grid.tile_width)
    config = dict(sample_type=sample.name, chunk_shape=chunk, image_shape=(grid.image_length, grid.image_width),
                  **plan.codec_config())
    if codec_name == "openzl":
        codecs = [OpenZLZarrCodec(**config).to_dict()]
    else:
        with warnings.catch_warnings():  # zarr's "numcodecs codecs are not in the v3 spec": known, chosen
            warnings.simplefilter("ignore")
            bytes_codec = OpenZLBytesCodec(**OpenZLChunks(**config).to_config())
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, bytes_codec.to_dict()]
    attrs = {"coordinates": coordinates, "grid_mapping": GRID_MAPPING, "rumi_sample_type": sample.name}
    if georef is not None and georef.is_defined:
        attrs["AREA_OR_POINT"] = georef.raster_type.name.title()
    metadata = create_v3_array_metadata(
        shape=grid.shape, data_type=zarr_dtype(sample), chunk_shape=chunk, fill_value=0,
        codecs=codecs, attributes=attrs, dimension_names=["band", "y", "x"],
    )
    # Frame-index order is (row, col, band) for tile frames: the chunk grid is (band, row, col).
    grid_shape = (grid.samples_per_pixel // grid.bands_per_frame, grid.tiles_down, grid.tiles_across)

    def by_chunk(values):
        return np.asarray(values, np.uint64).reshape(grid.tiles_down, grid.tiles_across, grid_shape[0]).transpose(2, 0, 1)

    paths = np.full(grid_shape, _uri(url), dtype=np.dtypes.StringDType())
    manifest = ChunkManifest.from_arrays(paths=paths, offsets=by_chunk(plan.starts[0]), lengths=by_chunk(plan.lengths[0]))
    return ManifestArray(metadata=metadata, chunkmanifest=manifest)


def _scalar_array(attrs: dict):
    from virtualizarr.manifests import ChunkManifest, ManifestArray
    from virtualizarr.manifests.utils import create_v3_array_metadata

    metadata = create_v3_array_metadata(shape=(), data_type=np.dtype(np.int64), chunk_shape=(), fill_value=0,
                                        codecs=[{"name": "bytes", "configuration": {"endian": "little"}}],
                                        attributes=attrs, dimension_names=[])
    return ManifestArray(metadata=metadata, chunkmanifest=ChunkManifest(entries={}, shape=()))


class _CoordinateStore:
    """An in-memory object store holding coordinate bytes, registered in ``registry``."""

    def __init__(self, registry):
        from obstore.store import MemoryStore

        self.prefix = f"memory://rumi-{uuid.uuid4().hex}"
        self.store = MemoryStore()
        registry.register(self.prefix, self.store)

    def array(self, name: str, values: np.ndarray, dims: list[str]):
        import obstore
        from virtualizarr.manifests import ChunkManifest, ManifestArray
        from virtualizarr.manifests.utils import create_v3_array_metadata

        data = np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes()
        obstore.put(self.store, name, data)
        metadata = create_v3_array_metadata(
            shape=values.shape, data_type=values.dtype, chunk_shape=values.shape, fill_value=0,
            codecs=[{"name": "bytes", "configuration": {"endian": "little"}}], dimension_names=dims,
        )
        ones = (1,) * values.ndim
        manifest = ChunkManifest.from_arrays(
            paths=np.full(ones, f"{self.prefix}/{name}", dtype=np.dtypes.StringDType()),
            offsets=np.zeros(ones, np.uint64), lengths=np.full(ones, len(data), np.uint64),
        )
        return ManifestArray(metadata=metadata, chunkmanifest=manifest)


class _RegistrySource:
    """Byte ranges of ``url`` through a VirtualiZarr object store registry (what the reader needs of a source)."""

    def __init__(self, url: str, registry):
        self.url = url
        self.store, self.path = registry.resolve(url)

    def read(self, start: int, stop: int, *, exact: bool = True) -> bytes:
        import obstore

        if not exact:  # a first read that may run past the end of a small file
            size = obstore.head(self.store, self.path)["size"]
            stop = min(stop, size)
        data = bytes(obstore.get_range(self.store, self.path, start=start, end=stop)) if stop > start else b""
        if exact and len(data) != stop - start:
            raise OSError(f"short read from {self.url}: bytes {start}-{stop} gave {len(data)} bytes")
        return data


__all__ = ["RumiParser"]
