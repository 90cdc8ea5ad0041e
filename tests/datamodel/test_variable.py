"""datamodel/variable.py: the one layout the engine, Cubes, Kerchunk references and the VirtualiZarr parser show.

That the three readers show it alike is ``tests/architecture/test_readers_agree.py``; here
is what the layout itself says of an image and of a Cube.
"""

from __future__ import annotations

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.datamodel.variable import VARIABLE, cube_layout, image_layout

UTM = dict(crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6))


def _image(tmp_path, name="a.rumi", shape=(3, 30, 20), **options):
    path = str(tmp_path / name)
    blob = xarray_rumi.write(path, np.zeros(shape, "uint16"), **{"tile_size": 16, **options})
    return xarray_rumi.open_image(path, header=blob)


@pytest.mark.parametrize("unit, chunks", [("tile", (1, 16, 8)), ("cell", (3, 16, 8))])
def test_an_image_is_band_data_on_band_y_x_chunked_by_frame(tmp_path, unit, chunks):
    image = _image(tmp_path, tile_size=(16, 8), frame_unit=unit, **UTM)
    layout = image_layout(image)
    assert VARIABLE == "band_data"
    assert (layout.dims, layout.shape, layout.chunks, layout.dtype) == (("band", "y", "x"), (3, 30, 20), chunks,
                                                                         np.dtype("uint16"))
    assert layout.encoding == {
        "source": image.source.url, "grid_mapping": "spatial_ref",
        "preferred_chunks": dict(zip(("band", "y", "x"), chunks)), "tile_size": (16, 8), "frame_unit": unit,
        "sample_type": "uint16", "raster_type": "area", "header": image.header.to_bytes(),
    }


def test_coordinates_are_rioxarrays_band_pixel_centres_and_spatial_ref(tmp_path):
    layout = image_layout(_image(tmp_path, **UTM))
    assert list(layout.coords) == ["band", "x", "y", "spatial_ref"]
    assert layout.coords["band"].values.tolist() == [1, 2, 3] and layout.coords["band"].values.dtype == np.int64
    assert layout.coords["x"].values[:2].tolist() == [500005.0, 500015.0]
    assert layout.coords["y"].values[:2].tolist() == [5999995.0, 5999985.0]
    assert layout.coords["spatial_ref"].dims == () and "crs_wkt" in layout.coords["spatial_ref"].attrs
    assert layout.zarr_attrs["coordinates"] == "spatial_ref"


def test_a_rotated_grid_has_two_dimensional_coordinates_named_in_the_cf_attribute(tmp_path):
    layout = image_layout(_image(tmp_path, crs=32618, transform=(30, 5, 5e5, 5, -30, 4e6)))
    assert [name for name, c in layout.coords.items() if c.dims == ("y", "x")] == ["xc", "yc"]
    assert layout.zarr_attrs["coordinates"] == "spatial_ref xc yc"


def test_area_or_point_is_said_only_where_there_is_georeferencing(tmp_path):
    assert image_layout(_image(tmp_path, "area.rumi", **UTM)).attrs == {"AREA_OR_POINT": "Area"}
    point = image_layout(_image(tmp_path, "point.rumi", raster_type="point", **UTM))
    assert point.attrs == {"AREA_OR_POINT": "Point"} and point.encoding["raster_type"] == "point"
    assert image_layout(_image(tmp_path, "bare.rumi")).attrs == {}


def test_a_cube_stacks_aligned_images_one_image_deep_with_every_blob_and_source(tmp_path):
    images = [_image(tmp_path, f"{i}.rumi", **UTM) for i in range(3)]
    layout = cube_layout(images, "time")
    assert (layout.dims, layout.shape, layout.chunks) == (("time", "band", "y", "x"), (3, 3, 30, 20), (1, 1, 16, 16))
    assert "source" not in layout.encoding and "header" not in layout.encoding
    assert layout.encoding["headers"] == [i.header.to_bytes() for i in images]
    assert layout.encoding["sources"] == [i.source.url for i in images]


def test_a_cube_needs_aligned_images_and_at_least_one(tmp_path):
    with pytest.raises(ValueError, match="at least one image"):
        cube_layout([], "time")
    images = [_image(tmp_path, "a.rumi", **UTM), _image(tmp_path, "b.rumi", shape=(3, 30, 21), **UTM)]
    with pytest.raises(ValueError, match=r"image 1 .* has shape \(3, 30, 21\), but image 0"):
        cube_layout(images, "time")
