"""The engine, Kerchunk references and the VirtualiZarr parser show one file the same way.

All three adapt one layout (``xarray_rumi.datamodel.variable``); this is what a
user sees of that through each one's own reader: dims, coordinates,
coordinate values and attributes.  Kerchunk references and the VirtualiZarr
parser store three attributes the engine keeps elsewhere: ``grid_mapping``
(the engine's encoding, as xarray's netCDF and rasterio engines decode it),
``coordinates`` (CF: which variables are coordinates) and
``rumi_sample_type`` (the on-disk type, which Zarr cannot always name); they
are compared with what the engine says of them.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import xarray_rumi

obstore = pytest.importorskip("obstore")
virtualizarr = pytest.importorskip("virtualizarr")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402

#: What Kerchunk references and the VirtualiZarr parser store as attributes and the engine as encoding or coordinates.
STORED_ONLY = ("grid_mapping", "coordinates", "rumi_sample_type")

CASES = {
    "tile-area": ((2, 50, 40), "uint16", dict(tile_size=32, crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6))),
    "cell-point": ((3, 20, 30), "int16", dict(tile_size=16, frame_unit="cell", crs=4326,
                                              transform=(0.1, 0, 10, 0, -0.1, 50), raster_type="point")),
    "no-crs": ((1, 6, 6), "uint8", dict(tile_size=4)),
    "rotated": ((1, 10, 12), "float32", dict(tile_size=8, crs=32618, transform=(30, 5, 5e5, 5, -30, 4e6))),
    "bfloat16": ((5, 9, 9), "bfloat16", dict(tile_size=4, crs=3857, transform=(1, 0, 0, 0, -1, 0))),
}


def _three_datasets(path, blob, rotated):
    engine = xr.open_dataset(path, engine="rumi", header=blob)
    refs = xarray_rumi.references(path, blob)
    kerchunk = xr.open_dataset("reference://", engine="zarr",
                               backend_kwargs={"consolidated": False, "storage_options": {"fo": refs}})
    registry = ObjectStoreRegistry({"file://": obstore.store.LocalStore()})
    loadable = ["band", "xc", "yc"] if rotated else None   # 2-D coordinates load only when asked for
    virtual = virtualizarr.open_virtual_dataset(f"file://{path}", registry=registry, loadable_variables=loadable,
                                                parser=xarray_rumi.RumiParser(header=blob))
    return {"engine": engine, "kerchunk": kerchunk, "virtualizarr": virtual}


@pytest.mark.parametrize("case", CASES)
def test_engine_kerchunk_and_virtualizarr_show_the_same_dataset(tmp_path, case):
    shape, dtype, options = CASES[case]
    path = str(tmp_path / f"{case}.rumi")
    data = (np.arange(np.prod(shape)) % 97).reshape(shape).astype(np.dtype(dtype) if dtype != "bfloat16" else
                                                                     __import__("ml_dtypes").bfloat16)
    blob = xarray_rumi.write(path, data, compression="portable", **options)
    datasets = _three_datasets(path, blob, rotated="rotated" in case)
    engine = datasets["engine"]
    band = engine.band_data
    assert band.encoding["grid_mapping"] == "spatial_ref"
    for name, dataset in datasets.items():
        assert dict(dataset.sizes) == dict(engine.sizes), name
        assert dataset.band_data.dims == band.dims, name
        assert set(dataset.coords) == set(engine.coords), name
        assert dataset.attrs == engine.attrs == {}, name
        shown = {k: v for k, v in dataset.band_data.attrs.items() if k not in STORED_ONLY}
        assert shown == band.attrs, name
        for coord in engine.coords:
            assert dataset[coord].dims == engine[coord].dims, (name, coord)
            assert dataset[coord].attrs == engine[coord].attrs, (name, coord)
            if name != "virtualizarr" or coord != "spatial_ref":   # a virtual scalar is a ManifestArray
                np.testing.assert_array_equal(np.asarray(dataset[coord].values), engine[coord].values)
                assert dataset[coord].dtype == engine[coord].dtype, (name, coord)
        if name != "engine":
            stored = dataset.band_data.attrs
            assert stored["rumi_sample_type"] == band.encoding["sample_type"], name
            grid_mapping = stored.get("grid_mapping", dataset.band_data.encoding.get("grid_mapping"))
            assert grid_mapping == "spatial_ref", name
            extra = " xc yc" if "rotated" in case else ""
            coordinates = stored.get("coordinates", dataset.band_data.encoding.get("coordinates"))
            assert coordinates == "spatial_ref" + extra, name
    for name in ("engine", "kerchunk"):
        values = datasets[name].band_data.values
        np.testing.assert_array_equal(values.astype(np.float64), data.astype(np.float64))


def test_every_way_of_opening_shares_the_opener_defaults(tmp_path):
    """Each takes the opener's parameters, with the same defaults and the same refusals."""
    path = str(tmp_path / "a.rumi")
    blob = xarray_rumi.write(path, np.zeros((1, 8, 8), "uint8"), tile_size=4, crs=4326, transform=(1, 0, 0, 0, -1, 0))
    registry = ObjectStoreRegistry({"file://": obstore.store.LocalStore()})
    opens = {
        "engine": lambda **kw: xr.open_dataset(path, engine="rumi", header=blob, **kw),
        "references": lambda **kw: xarray_rumi.references(path, blob, **kw),
        "parser": lambda **kw: xarray_rumi.RumiParser(header=blob, **kw)(f"file://{path}", registry),
        "open_cube": lambda **kw: xarray_rumi.open_cube([path], [blob], **kw),
    }
    for name, open_with in opens.items():
        with pytest.raises(ValueError, match="raster_type= overrides the file's georeferencing only"):
            open_with(raster_type="point")
        with pytest.raises(ValueError, match="georeferencing=False means no CRS"):
            open_with(georeferencing=False, crs=4326, transform=(1, 0, 0, 0, -1, 0))
        with pytest.raises(TypeError, match="retry must be"):
            open_with(retry=3)
        with pytest.raises(xarray_rumi.RumiFormatError, match="limits"):
            open_with(limits=xarray_rumi.Limits(max_frames=2))
        open_with(georeferencing=False, verify=False)   # accepted everywhere
