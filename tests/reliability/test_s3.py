"""Failing storage over S3: moto's ThreadedMotoServer behind a FlakyProxy, read with s3fs.

The file is uploaded straight to moto; reads go through the proxy, which
passes S3 requests on verbatim and fails the ranged GETs it is told to.
The storage options are the caller's plain ones: s3fs's and botocore's own
retries are off for reads, so every retry seen is xarray-rumi's.
"""

from __future__ import annotations


import numpy as np
import pytest
import xarray as xr
from flaky_server import FlakyProxy, ranged_get
from s3_server import s3_server

import xarray_rumi
from xarray_rumi.io.retry import DEFAULT_POLICY

pytest.importorskip("s3fs")

EXPECTED = np.random.default_rng(3).integers(-3000, 3000, (2, 40, 48), dtype=np.int16)


@pytest.fixture(scope="module")
def s3():
    with s3_server("bucket") as options:
        blob = xarray_rumi.write("s3://bucket/scene.rumi", EXPECTED, tile_size=16, storage_options=options)
        yield options, blob


def _through(proxy, options):
    return dict(options, endpoint_url=proxy.url)


@pytest.mark.parametrize("faults", [["drop", "drop"], ["500", "short", "truncated"]])
def test_transient_failures_are_retried_and_the_values_are_exact(s3, faults):
    options, blob = s3
    with FlakyProxy(options["endpoint_url"], faults) as proxy:
        ds = xr.open_dataset("s3://bucket/scene.rumi", engine="rumi", header=blob,
                             storage_options=_through(proxy, options))
        values = ds.band_data.values
        assert proxy.faults_injected == faults
    np.testing.assert_array_equal(values, EXPECTED)


def test_mixed_failures_on_per_frame_tasks_read_exact_values(s3):
    options, blob = s3
    with FlakyProxy(options["endpoint_url"], ["500", "503", "drop", "drop"]) as proxy:
        values = xr.open_dataset("s3://bucket/scene.rumi", engine="rumi", header=blob, chunks={},
                                 storage_options=_through(proxy, options)).band_data.values
        assert len(proxy.faults_injected) == 4
    np.testing.assert_array_equal(values, EXPECTED)


def test_a_persistent_failure_is_an_oserror_naming_url_and_range(s3):
    options, blob = s3
    header = xarray_rumi.open_image("s3://bucket/scene.rumi", blob, georeferencing=False).header
    start, stop = header.offset(0), header.offset(1)
    with FlakyProxy(options["endpoint_url"], always="500") as proxy:
        ds = xr.open_dataset("s3://bucket/scene.rumi", engine="rumi", header=blob, georeferencing=False,
                             chunks={}, storage_options=_through(proxy, options))
        with pytest.raises(OSError) as info:
            ds.band_data[0, :16, :16].values
        # The frame's requests, with the IFD head in each (a first read checks the blob; the two are
        # close enough to share one request, xarray_rumi.io.engine).
        attempts = [r.range for r in proxy.requests if r.fault].count(f"bytes=0-{stop - 1}")
    message = str(info.value)
    assert f"bytes {start}-{stop} of s3://bucket/scene.rumi after {DEFAULT_POLICY.attempts} attempts" in message
    # Exactly the policy's attempts: neither s3fs nor botocore tried again under them.
    assert attempts == DEFAULT_POLICY.attempts


def test_a_bit_flipped_in_transit_is_caught_never_returned(s3):
    options, blob = s3
    # A frame alone: the open checks the blob (its request starts at byte 0, with the IFD head).
    not_the_ifd_head = lambda method, path, headers: (  # noqa: E731
        ranged_get(method, path, headers) and not headers["Range"].startswith("bytes=0-"))
    with FlakyProxy(options["endpoint_url"], ["flip"], when=not_the_ifd_head) as proxy:
        ds = xr.open_dataset("s3://bucket/scene.rumi", engine="rumi", header=blob,
                             chunks={}, storage_options=_through(proxy, options))
        with pytest.raises(xarray_rumi.RumiFormatError, match="checksum"):
            ds.band_data[0, :16, :16].values


def test_a_blob_cut_in_transit_with_an_agreeing_length_is_retried_not_called_damaged(s3):
    import s3fs

    options, blob = s3
    s3fs.S3FileSystem(**options).pipe("s3://bucket/scene.rumi.header", blob)
    blob_gets = lambda method, path, headers: method == "GET" and ".header" in path  # noqa: E731
    with FlakyProxy(options["endpoint_url"], ["truncated"], when=blob_gets) as proxy:
        ds = xr.open_dataset("s3://bucket/scene.rumi", engine="rumi", header="s3://bucket/scene.rumi.header",
                             storage_options=_through(proxy, options))
        values = ds.band_data.values
        assert proxy.faults_injected == ["truncated"]
    np.testing.assert_array_equal(values, EXPECTED)
