"""The examples of docs/virtual-zarr.md run, in order, as written; and its first screen holds.

That screen says which routes read a rumi file's zeros as zeros and which
(upstream, in VirtualiZarr and xarray) turns them into NaN.  The tests of the
broken route assert the upstream behaviour of today: when one fails, upstream
changed, and the page must say so.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr
from doc_blocks import run_blocks

import xarray_rumi

UPDATE_THE_PAGE = "update the first screen of docs/virtual-zarr.md (and the Virtual Cubes paragraph)"
GEO = dict(crs=32633, transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_virtual_zarr_page_examples_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("virtualizarr")
    pytest.importorskip("icechunk")
    monkeypatch.chdir(tmp_path)
    assert run_blocks("docs/virtual-zarr.md") >= 6
    printed = capsys.readouterr().out.split()
    assert "openzl" in printed and "ManifestArray" in printed


@pytest.fixture
def half_zeros(tmp_path):
    """A uint16 file whose left half is 0, its blob, and its virtual dataset through ``RumiParser``."""
    virtualizarr = pytest.importorskip("virtualizarr")
    obstore = pytest.importorskip("obstore")
    from obspec_utils.registry import ObjectStoreRegistry

    data = np.zeros((2, 64, 64), "uint16")
    data[:, :, 32:] = 7
    path = str(tmp_path / "zeros.rumi")
    blob = xarray_rumi.write(path, data, tile_size=32, **GEO)
    registry = ObjectStoreRegistry({"file://": obstore.store.LocalStore()})
    vds = virtualizarr.open_virtual_dataset(f"file://{path}", registry=registry,
                                            parser=xarray_rumi.RumiParser(header=blob))
    return data, path, vds


def _open_references(fo, consolidated=None, **kwargs) -> xr.Dataset:
    """``consolidated=False`` for VirtualiZarr's references, which carry no ``.zmetadata`` (ours do)."""
    return xr.open_dataset("reference://", engine="zarr", **kwargs, backend_kwargs={
        "consolidated": consolidated, "storage_options": {"fo": fo, "remote_protocol": "file"}})


def _assert_zeros_read_as_zeros(ds: xr.Dataset, data: np.ndarray) -> None:
    values = ds.band_data.values
    assert values.dtype == np.uint16, values.dtype   # masking would have made it float with NaN
    assert (values.reshape(data.shape) == data).all()
    assert int(ds.spatial_ref) == 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_icechunk_reads_zeros_as_zeros(half_zeros, tmp_path):
    icechunk = pytest.importorskip("icechunk")
    data, _, vds = half_zeros
    prefix = f"file://{tmp_path}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(tmp_path))))
    local_access = getattr(icechunk.credentials, "LocalFileSystemAccess", None)
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")), config,
                                      authorize_virtual_chunk_access={prefix: local_access})
    session = repo.writable_session("main")
    vds.vz.to_icechunk(session.store)
    session.commit("zeros")
    _assert_zeros_read_as_zeros(xr.open_zarr(repo.readonly_session("main").store, consolidated=False), data)


def test_xarray_rumi_references_and_rumi_refs_read_zeros_as_zeros(half_zeros, tmp_path):
    from xarray_rumi.cli import main

    data, path, _ = half_zeros
    _assert_zeros_read_as_zeros(_open_references(xarray_rumi.references(path)), data)
    cube = str(tmp_path / "cube.json")
    assert main(["refs", path, path, "--cube", "time", "-o", cube]) == 0
    stacked = _open_references(cube)
    assert stacked.band_data.dtype == np.uint16
    assert (stacked.band_data.values == np.stack([data, data])).all()
    assert int(stacked.spatial_ref) == 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_virtualizarr_kerchunk_writer_reads_zeros_as_zeros_with_mask_and_scale_false(half_zeros):
    data, _, vds = half_zeros
    refs = vds.vz.to_kerchunk(format="dict")
    _assert_zeros_read_as_zeros(_open_references(refs, consolidated=False, mask_and_scale=False), data)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_upstream_still_reads_zeros_as_nan_through_virtualizarr_kerchunk_writer(half_zeros):
    """VirtualiZarr issue 478 and xarray issue 10269, as they stand: the page warns of both."""
    data, _, vds = half_zeros
    refs = vds.vz.to_kerchunk(format="dict")
    fill_value = json.loads(refs["refs"]["band_data/.zarray"])["fill_value"]
    assert fill_value == 0, f"VirtualiZarr's Kerchunk writer writes fill_value {fill_value!r} now: {UPDATE_THE_PAGE}"
    zero = (0,) * data.ndim
    for options in ({}, {"use_zarr_fill_value_as_mask": False}):
        band_data = _open_references(refs, consolidated=False, **options).band_data
        assert np.isnan(band_data.values[zero]), (
            f"xarray reads VirtualiZarr's Kerchunk references with {options or 'its defaults'} without masking "
            f"zeros now: {UPDATE_THE_PAGE}")
