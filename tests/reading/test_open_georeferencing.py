"""Georeferencing a caller, an Item or a catalog row claims for a file, compared with the file's own tags.

Where an open or a read fetches the file's head anyway, the tags come in the
same batch and a contradiction is refused naming who claimed what and the
file; an open with a blob and georeferencing still sends nothing.  Requests
are counted on a Range HTTP server started by the test.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi import Georeferencing, RumiFormatError
from xarray_rumi.format.blob import Header
from xarray_rumi.format.geo import ModelType
from xarray_rumi.format.head import ifd_head_ranges
from xarray_rumi.format.placement import georeferencing_offset
from xarray_rumi.reading.checked import checked_blobs

# The ranges each read asks for, one request each (the read engine would merge them).
pytestmark = pytest.mark.usefixtures("unmerged_requests")

CRS, TRANSFORM = 32633, (10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0)
IFD_HEAD = (0, 252)
#: What the file does not say, each way a claim can be wrong.
WRONG = {
    "crs": dict(crs=32632, transform=TRANSFORM),
    "transform": dict(crs=CRS, transform=(10.0, 0.0, 500010.0, 0.0, -10.0, 5000000.0)),
    "resolution": dict(crs=CRS, transform=(20.0, 0.0, 500000.0, 0.0, -20.0, 5000000.0)),
    "raster type": dict(crs=CRS, transform=TRANSFORM, raster_type="point"),
}


@pytest.fixture
def served(http_server):
    """``(server, url, blob, values)``: a 2-band 32 x 48 uint16 file in EPSG:32633 served over HTTP."""
    values = np.arange(2 * 32 * 48, dtype="uint16").reshape(2, 32, 48)
    blob = xarray_rumi.write(f"{http_server.root}/scene.rumi", values, tile_size=16, crs=CRS, transform=TRANSFORM)
    http_server.requests.clear()
    return http_server, f"{http_server.url}/scene.rumi", blob, values


def _tags(blob: bytes) -> tuple[int, int]:
    start = georeferencing_offset(Header.from_bytes(blob).grid)
    return start, start + 160


def _first_frames(blob: bytes) -> list[tuple[int, int]]:
    """The byte ranges of the frames at the first tile position, one a band."""
    header = Header.from_bytes(blob)
    starts, stops = header.ranges(np.array([header.grid.frame_index(0, 0, band) for band in (0, 1)]))
    return list(zip(starts.tolist(), stops.tolist()))


def test_a_blob_and_a_right_claim_open_with_no_request_and_check_in_the_first_reads_batch(served):
    server, url, blob, values = served
    image = xarray_rumi.open_image(url, header=blob, crs=CRS, transform=TRANSFORM)
    assert server.requests == []
    np.testing.assert_array_equal(image.read(rows=slice(0, 16), cols=slice(0, 16)), values[:, :16, :16])
    # the two frames (one a band), the IFD head and the tags: one batch, no round trip of its own
    assert sorted(r.range for r in server.get_requests()) == sorted(_first_frames(blob) + [IFD_HEAD, _tags(blob)])
    server.requests.clear()
    again = xarray_rumi.open_image(url, header=blob, crs=CRS, transform=TRANSFORM)
    again.read(rows=slice(0, 16), cols=slice(0, 16))
    assert sorted(r.range for r in server.get_requests()) == sorted(_first_frames(blob))  # once per process


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_claim_with_a_blob_is_refused_at_the_first_read_naming_both(served, wrong):
    server, url, blob, _ = served
    ds = xr.open_dataset(url, engine="rumi", header=blob, chunks={}, **WRONG[wrong])
    assert server.requests == []
    with pytest.raises(RumiFormatError, match="georeferencing.matches-file") as refused:
        ds.band_data[:, :16, :16].values
    message = str(refused.value)
    assert f"crs=/transform= says EPSG:{WRONG[wrong]['crs']}" in message
    assert f"the tags of {url} say EPSG:32633, PixelIsArea, transform (10, 0, 500000, 0, -10, 5000000)" in message
    # the head and the tags, and nothing but them and the two frames (the other task's frame may never be
    # asked for once the first fails, or it may check for itself)
    asked = {r.range for r in server.get_requests()}
    assert {IFD_HEAD, _tags(blob)} <= asked <= set(_first_frames(blob) + [IFD_HEAD, _tags(blob)])
    with pytest.raises(RumiFormatError, match="georeferencing.matches-file"):
        ds.band_data[:, :16, :16].values   # refused again: a wrong claim is never recorded as checked


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_claim_without_a_blob_is_refused_at_open_with_no_extra_request(served, wrong):
    server, url, _, _ = served
    with pytest.raises(RumiFormatError, match=r"georeferencing.matches-file: crs=/transform= says .*; the tags of"):
        xarray_rumi.open_image(url, **WRONG[wrong])
    assert [r.method for r in server.requests] == ["GET"]   # the IFD, its answer stating the size, as any open


def test_a_right_claim_without_a_blob_opens(served):
    _, url, _, values = served
    ds = xr.open_dataset(url, engine="rumi", crs=CRS, transform=TRANSFORM)
    assert ds.rio.crs.to_epsg() == CRS
    np.testing.assert_array_equal(ds.band_data.values, values)


def test_a_georeferencing_value_is_a_claim_named_as_given(served):
    server, url, blob, _ = served
    stale = Georeferencing(32632, ModelType.PROJECTED, transform=TRANSFORM)
    image = xarray_rumi.open_image(url, header=blob, georeferencing=stale, claimed_by="STAC Item 'scene'")
    with pytest.raises(RumiFormatError, match=f"STAC Item 'scene' says EPSG:32632.*the tags of {url} say EPSG:32633"):
        image.read()
    with pytest.raises(RumiFormatError, match="georeferencing= says EPSG:32632"):
        xarray_rumi.open_image(url, georeferencing=stale)


def test_a_file_without_a_crs_takes_the_callers(http_server):
    values = np.ones((1, 16, 16), "uint8")
    blob = xarray_rumi.write(f"{http_server.root}/chip.rumi", values)
    url = f"{http_server.url}/chip.rumi"
    for header in (blob, None):
        ds = xr.open_dataset(url, engine="rumi", header=header, crs=CRS, transform=TRANSFORM)
        assert ds.rio.crs.to_epsg() == CRS and float(ds.x[0]) == 500005.0
        np.testing.assert_array_equal(ds.band_data.values, values)


def test_georeferencing_false_and_verify_false_claim_nothing_and_fetch_no_tags(served):
    server, url, blob, values = served
    dropped = xarray_rumi.open_image(url, header=blob, georeferencing=False)
    np.testing.assert_array_equal(dropped.read(), values)
    trusted = xarray_rumi.open_image(f"{url}?trusted", header=blob, crs=32632, transform=TRANSFORM, verify=False)
    np.testing.assert_array_equal(trusted.read(), values)
    assert _tags(blob) not in [r.range for r in server.get_requests()]
    assert xarray_rumi.open_image(url, crs=32632, transform=TRANSFORM, verify=False).georeferencing.epsg == 32632


def test_five_bands_fetch_the_tags_with_the_sample_formats(http_server):
    values = np.arange(5 * 16 * 16, dtype="int16").reshape(5, 16, 16)
    blob = xarray_rumi.write(f"{http_server.root}/five.rumi", values, crs=CRS, transform=TRANSFORM)
    url = f"{http_server.url}/five.rumi"
    ranges = ifd_head_ranges(Header.from_bytes(blob).grid, georeferencing=True)
    assert len(ranges) == 2 and ranges[1][1] == _tags(blob)[1]
    np.testing.assert_array_equal(xarray_rumi.open_image(url, header=blob, crs=CRS, transform=TRANSFORM).read(), values)
    assert set(ranges) <= {r.range for r in http_server.get_requests()}
    with pytest.raises(RumiFormatError, match="crs=/transform= says EPSG:32632"):
        xarray_rumi.open_image(f"{url}?again", header=blob, crs=32632, transform=TRANSFORM).read()


def test_a_pickled_image_carries_its_claim_to_be_checked_where_it_is_read(served):
    _, url, blob, _ = served
    image = xarray_rumi.open_image(url, header=blob, crs=32632, transform=TRANSFORM)
    shipped = pickle.loads(pickle.dumps(image))
    assert shipped.claimed_by == "crs=/transform="
    with pytest.raises(RumiFormatError, match="georeferencing.matches-file"):
        shipped.read()


def test_a_blob_checked_without_a_claim_still_checks_a_later_claim(served):
    server, url, blob, _ = served
    xarray_rumi.open_image(url, header=blob)   # checks the blob (and reads the tags)
    image = xarray_rumi.open_image(url, header=blob, crs=32632, transform=TRANSFORM)
    assert image.blob_key not in checked_blobs
    with pytest.raises(RumiFormatError, match="georeferencing.matches-file"):
        image.read()


def test_a_singular_georeferencing_value_is_refused_before_anything_is_read(served):
    server, url, blob, _ = served
    flat = Georeferencing(CRS, ModelType.PROJECTED, transform=(0.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0))
    for open_ in (lambda: xarray_rumi.open_image(url, header=blob, georeferencing=flat),
                  lambda: xarray_rumi.open_cube([url], [blob], georeferencing=flat)):
        with pytest.raises(ValueError, match=r"transform is singular \(a\*e - b\*d == 0\) \(a zero x resolution"):
            open_()
    assert server.requests == []
