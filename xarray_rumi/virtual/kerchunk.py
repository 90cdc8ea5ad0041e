"""Kerchunk (version 1) references to the frames of rumi files."""

from __future__ import annotations

import base64
import json

import numpy as np

from ..datamodel.variable import VARIABLE, Layout, cube_layout, image_layout
from ..io.urls import absolute
from ..reading.open import open_image
from .chunks import zarr_dtype
from .codec import OpenZLCodec
from .edges import chunk_references


def references(path, header=None, **open_kwargs) -> dict:
    """Kerchunk version-1 references to every frame of a rumi file.

    >>> import numpy as np, tempfile, os, xarray as xr, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> data = np.arange(2 * 5 * 7, dtype="uint16").reshape(2, 5, 7)
    >>> refs = references(path, xarray_rumi.write(path, data, tile_size=4, crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6)))
    >>> ds = xr.open_dataset("reference://", engine="zarr", backend_kwargs={"consolidated": False,
    ...                      "storage_options": {"fo": refs}})
    >>> bool((ds.band_data.values == data).all()), float(ds.x[0])
    (True, 500005.0)
    """
    return layout_references(image_layout(open_image(absolute(path), header, **open_kwargs)))


def cube_references(paths, dim: str = "time", headers=None, **open_kwargs) -> dict:
    """One reference set stacking grid-aligned files along a new dimension ``dim``."""
    headers = list(headers) if headers is not None else [None] * len(paths)
    if len(headers) != len(paths):
        raise ValueError(f"{len(paths)} files but {len(headers)} headers")
    images = [open_image(absolute(p), h, **open_kwargs) for p, h in zip(paths, headers)]
    return layout_references(cube_layout(images, dim))


def layout_references(layout: Layout) -> dict:
    """The reference set of an image's or a Cube's :class:`~xarray_rumi.datamodel.variable.Layout`."""
    grid, sample = layout.grid, layout.sample_type
    plan = chunk_references(list(layout.headers))
    codec = OpenZLCodec(sample_type=sample.name, chunk_shape=layout.chunks[-3:],
                        image_shape=(grid.image_length, grid.image_width))
    refs = {".zgroup": compact_json({"zarr_format": 2}), ".zattrs": compact_json({})}
    zarray = _zarray(layout.shape, layout.chunks, zarr_dtype(sample), codec.get_config())
    refs[f"{VARIABLE}/.zarray"] = compact_json(zarray)
    refs[f"{VARIABLE}/.zattrs"] = compact_json({"_ARRAY_DIMENSIONS": list(layout.dims), **layout.zarr_attrs})

    rows, cols, bands = grid.frame_locations()
    keys = [f"{b}.{r}.{c}" for b, r, c in zip(bands.tolist(), rows.tolist(), cols.tolist())]
    for n, url in enumerate(layout.sources):
        prefix = f"{VARIABLE}/{n}." if layout.stack_dim is not None else f"{VARIABLE}/"
        for key, start, length in zip(keys, plan.starts[n].tolist(), plan.lengths[n].tolist()):
            refs[prefix + key] = [url, start, length]

    for name, coordinate in layout.coords.items():
        refs.update(_inline(name, coordinate))
    return consolidated({"version": 1, "refs": refs})


_METADATA = (".zarray", ".zattrs", ".zgroup")


def consolidated(refs: dict) -> dict:
    """``refs`` with Zarr v2 consolidated metadata (``.zmetadata``) made from its metadata keys."""
    entries = {k: v for k, v in refs["refs"].items() if k != ".zmetadata"}
    metadata = {k: v if isinstance(v, dict) else json.loads(v) for k, v in entries.items()
                if k.rsplit("/", 1)[-1] in _METADATA}
    zmetadata = compact_json({"zarr_consolidated_format": 1, "metadata": metadata})
    return {**refs, "refs": {**entries, ".zmetadata": zmetadata}}


def _zarray(shape, chunks, dtype: np.dtype, compressor) -> dict:
    # fill_value null: rumi has no nodata, and xarray would mask real pixels with a _FillValue
    return {
        "zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": np.dtype(dtype).str,
        "compressor": compressor, "filters": None, "fill_value": None, "order": "C", "dimension_separator": ".",
    }


def _inline(name: str, coordinate) -> dict:
    """A coordinate stored whole in the references, as one base64 chunk (``tobytes`` gives C order)."""
    values = np.asarray(coordinate.values)
    key = ".".join("0" for _ in values.shape) or "0"
    return {
        f"{name}/.zarray": compact_json(_zarray(values.shape, values.shape, values.dtype, None)),
        f"{name}/.zattrs": compact_json({"_ARRAY_DIMENSIONS": list(coordinate.dims), **coordinate.attrs}),
        f"{name}/{key}": "base64:" + base64.b64encode(values.astype(values.dtype.newbyteorder("<")).tobytes()).decode(),
    }


def compact_json(value) -> str:
    """``value`` as a reference set stores its metadata: JSON without spaces."""
    return json.dumps(value, separators=(",", ":"))
