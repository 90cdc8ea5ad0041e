"""Failing storage over HTTP: a FlakyProxy in front of a RangeServer on 127.0.0.1.

Transient failures (5xx, dropped connections, bodies cut short, timeouts) are
retried with backoff and a bounded number of attempts and the values are the
written ones; a persistent failure is an OSError naming the URL and the byte
range; a bit flipped in transit is caught by the frame checksum.
"""

from __future__ import annotations

import time

import aiohttp
import numpy as np
import pytest
import xarray as xr
from flaky_server import FlakyProxy, ranged_get
from servers import RangeServer

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.io.retry import DEFAULT_POLICY, RetryPolicy
from xarray_rumi.io.source import ByteSource

EXPECTED = np.random.default_rng(7).integers(0, 4000, (2, 40, 48), dtype=np.uint16)
IFD_HEAD = "bytes=0-251"  # the Range header of the 252 bytes a blob is checked against


def frame_gets(method: str, path: str, headers) -> bool:
    """Ranged GETs of frames alone: not those from the file's first byte, which hold the IFD head.

    The head a blob is checked against is asked for with the georeferencing at
    open, or with a first read's frames, in one request (``xarray_rumi.io.engine``).
    """
    return ranged_get(method, path, headers) and not headers["Range"].startswith("bytes=0-")


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    root = tmp_path_factory.mktemp("http")
    blob = xarray_rumi.write(root / "scene.rumi", EXPECTED, tile_size=16, crs=32618,
                             transform=(30, 0, 500000, 0, -30, 4000000))
    with RangeServer(str(root)) as server:
        yield server, blob


def _values(url, blob, *, chunks=None, storage_options=None):
    ds = xr.open_dataset(url, engine="rumi", header=blob, chunks=chunks, storage_options=storage_options)
    return ds.band_data.values


@pytest.mark.parametrize("faults, chunks", [
    (["503", "500"], {}), (["drop", "drop"], None), (["short"], {}), (["truncated"], None),
], ids=["503-500-per-frame", "drop-drop", "short-per-frame", "truncated"])
def test_transient_failures_are_retried_and_the_values_are_exact(origin, faults, chunks):
    server, blob = origin
    with FlakyProxy(server.url, faults) as proxy:
        values = _values(f"{proxy.url}/scene.rumi", blob, chunks=chunks)
        injected = proxy.faults_injected
    np.testing.assert_array_equal(values, EXPECTED)
    assert injected == faults  # every fault was met, and retried past


def test_a_slow_response_times_out_and_is_retried(origin):
    """The proxy holds the answer until the client gives up, so only the client's timeout decides."""
    server, blob = origin
    options = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=2)}}
    with FlakyProxy(server.url, ["slow"], delay=60) as proxy:
        values = _values(f"{proxy.url}/scene.rumi", blob, storage_options=options)
        assert proxy.faults_injected == ["slow"]
        assert proxy.client_gave_up.wait(timeout=30)   # it hung up on the held answer
        requests = list(proxy.requests)
    np.testing.assert_array_equal(values, EXPECTED)
    # gave up on the slow answer and asked again for the same bytes, which came at once
    (slow,) = [r for r in requests if r.fault]
    assert [r.range for r in requests].count(slow.range) == 2


def test_a_persistent_failure_is_an_oserror_naming_url_and_range_after_bounded_attempts(origin):
    server, blob = origin
    header = xarray_rumi.open_image(server.url + "/scene.rumi", blob, georeferencing=False).header
    start, stop = header.offset(0), header.offset(1)
    with FlakyProxy(server.url, always="500") as proxy:
        url = f"{proxy.url}/scene.rumi"
        ds = xr.open_dataset(url, engine="rumi", header=blob, georeferencing=False, chunks={})
        started = time.monotonic()
        with pytest.raises(OSError) as info:
            ds.band_data[0, :16, :16].values  # exactly frame 0: one range
        elapsed = time.monotonic() - started
        failed = [r.range for r in proxy.requests if r.fault]
    message = str(info.value)
    assert url in message and f"bytes {start}-{stop}" in message and "500" in message
    assert f"after {DEFAULT_POLICY.attempts} attempts" in message
    # Bounded: the frame with the IFD head (a first read checks the blob; the two share one request,
    # xarray_rumi.io.engine) was tried that often.
    assert failed == [f"bytes=0-{stop - 1}"] * DEFAULT_POLICY.attempts
    # Backoff: at least the jittered minimum of the waits between the attempts.
    minimum = sum(min(DEFAULT_POLICY.backoff * DEFAULT_POLICY.factor**i, DEFAULT_POLICY.max_backoff)
                  for i in range(DEFAULT_POLICY.attempts - 1)) * (1 - DEFAULT_POLICY.jitter)
    assert elapsed >= minimum


def test_a_persistent_failure_in_a_batch_names_the_failing_range(origin):
    server, blob = origin
    with FlakyProxy(server.url, always="short") as proxy:
        flaky = ByteSource(f"{proxy.url}/scene.rumi", retry=RetryPolicy(attempts=3, backoff=0.01))
        with pytest.raises(OSError, match=r"bytes 100-300 of http://127\.0\.0\.1:\d+/scene\.rumi after 3 attempts: ClientPayloadError"):
            flaky.read_many([100], [300])
        assert len(proxy.requests) == 3


def test_a_truncated_object_is_detected_by_length(origin):
    """The server's Content-Length agrees with the short body: only our length check sees it."""
    server, blob = origin
    with FlakyProxy(server.url, always="truncated") as proxy:
        flaky = ByteSource(f"{proxy.url}/scene.rumi", retry=RetryPolicy(attempts=2, backoff=0.01))
        with pytest.raises(OSError, match=r"bytes 100-300 of .* after 2 attempts: .*short read .* gave 100 bytes"):
            flaky.read(100, 300)
        with pytest.raises(OSError, match="short read"):
            flaky.read_many([0, 100], [50, 300])


def test_only_the_failed_ranges_of_a_batch_are_asked_for_again(origin):
    server, blob = origin
    with FlakyProxy(server.url, ["500"]) as proxy:
        source = ByteSource(f"{proxy.url}/scene.rumi", retry=RetryPolicy(backoff=0.01))
        far = len(open(server.root + "/scene.rumi", "rb").read()) - 10
        got = source.read_many([0, 1000, far], [10, 1010, far + 10])
        ranges = [r.range for r in proxy.requests if r.method == "GET"]
    data = open(server.root + "/scene.rumi", "rb").read()
    assert got == [data[0:10], data[1000:1010], data[far:far + 10]]
    # Close enough to share one request (xarray_rumi.io.engine), asked for again once;
    # tests/io/test_engine.py shows that of requests apart only the failed one is.
    assert ranges == [f"bytes=0-{far + 9}"] * 2


def test_a_missing_object_is_not_retried(origin):
    server, blob = origin
    with FlakyProxy(server.url) as proxy:
        with pytest.raises(FileNotFoundError):
            xr.open_dataset(f"{proxy.url}/missing.rumi", engine="rumi", header=blob).band_data.values
        # The georeferencing and the IFD head, asked for together at open (one request): once.
        assert len([r for r in proxy.requests if r.method == "GET"]) == 1


def test_a_bit_flipped_in_transit_is_caught_by_the_checksum_never_returned(origin):
    server, blob = origin
    with FlakyProxy(server.url, ["flip"], when=frame_gets) as proxy:
        ds = xr.open_dataset(f"{proxy.url}/scene.rumi", engine="rumi", header=blob, chunks={})  # checks the blob
        with pytest.raises(RumiFormatError, match="frame.decode"):
            ds.band_data[0, :16, :16].values
        assert proxy.faults_injected == ["flip"]


def test_a_bit_flipped_in_the_ifd_head_in_transit_is_an_error_never_other_values(origin):
    server, blob = origin
    with FlakyProxy(server.url, ["flip"], when=lambda *request: not frame_gets(*request)) as proxy:
        image = xarray_rumi.open_image(f"{proxy.url}/scene.rumi", blob, georeferencing=False)
        with pytest.raises(RumiFormatError):
            image.check_blob()   # the head alone, as a first read asks for it beside its frames
        assert [r.range for r in proxy.requests if r.fault] == [IFD_HEAD]
        # checked again by the next read, whose head arrives whole: the written values
        np.testing.assert_array_equal(image.read(rows=slice(0, 16), cols=slice(0, 16)), EXPECTED[:, :16, :16])


def test_retry_is_an_argument_of_open_dataset_and_travels_with_the_pickled_dataset(origin):
    import pickle

    server, blob = origin
    frame = xarray_rumi.open_image(server.url + "/scene.rumi", blob, georeferencing=False).frame_range(0)
    with FlakyProxy(server.url, ["503"], when=frame_gets) as proxy:
        ds = xr.open_dataset(f"{proxy.url}/scene.rumi", engine="rumi", header=blob,
                             chunks={}, retry=RetryPolicy(attempts=1))
        ds = pickle.loads(pickle.dumps(ds))  # as a Dask graph ships it to workers
        with pytest.raises(OSError, match=rf"bytes {frame[0]}-{frame[1]} of .* after 1 attempts: .*503"):
            ds.band_data[0, :16, :16].values
        assert [r.fault for r in proxy.requests if r.range == f"bytes={frame[0]}-{frame[1] - 1}"] == ["503"]
    with FlakyProxy(server.url, ["503"], when=frame_gets) as proxy:  # the default policy rides it out
        ds = xr.open_dataset(f"{proxy.url}/scene.rumi", engine="rumi", header=blob, chunks={})
        np.testing.assert_array_equal(ds.band_data[0, :16, :16].values, EXPECTED[0, :16, :16])
        assert [r.fault for r in proxy.requests if r.range == f"bytes={frame[0]}-{frame[1] - 1}"] == ["503", None]


def test_retry_must_be_a_policy(origin):
    _, blob = origin
    with pytest.raises(TypeError, match="RetryPolicy"):
        xr.open_dataset("scene.rumi", engine="rumi", header=blob, retry=3)


def test_the_blob_and_the_ifd_are_fetched_with_retries_too(origin):
    server, blob = origin
    with open(server.root + "/scene.rumi.header", "rb") as f:
        assert f.read() == blob
    every_get = lambda method, path, headers: method == "GET"  # noqa: E731
    with FlakyProxy(server.url, ["503", "drop", "drop"], when=every_get) as proxy:
        url = f"{proxy.url}/scene.rumi"
        by_blob_url = _values(url, f"{url}.header")
        assert len(proxy.faults_injected) == 3
    with FlakyProxy(server.url, ["short", "500"]) as proxy:
        from_ifd = _values(f"{proxy.url}/scene.rumi", None)
        assert proxy.faults_injected == ["short", "500"]
    np.testing.assert_array_equal(by_blob_url, EXPECTED)
    np.testing.assert_array_equal(from_ifd, EXPECTED)


def test_retry_policy_travels_with_a_pickled_source():
    import pickle

    source = ByteSource("http://127.0.0.1:1/x.rumi", retry=RetryPolicy(attempts=2))
    assert pickle.loads(pickle.dumps(source)).retry == RetryPolicy(attempts=2)


@pytest.mark.parametrize("bad", [dict(attempts=0), dict(backoff=-1), dict(factor=0.5), dict(jitter=2)])
def test_retry_policy_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        RetryPolicy(**bad)


def _blob_gets(method: str, path: str, headers) -> bool:
    return method == "GET" and path.endswith(".header")


def test_a_blob_cut_in_transit_with_an_agreeing_length_is_retried_not_called_damaged(origin):
    """The blob's own fields say how long it is: a shorter body is a transfer fault, not a ``blob.size`` refusal."""
    server, blob = origin
    with FlakyProxy(server.url, ["truncated", "truncated"], when=_blob_gets) as proxy:
        url = f"{proxy.url}/scene.rumi"
        values = _values(url, f"{url}.header")
        assert proxy.faults_injected == ["truncated", "truncated"]
    np.testing.assert_array_equal(values, EXPECTED)
    with FlakyProxy(server.url, always="truncated", when=_blob_gets) as proxy:
        url = f"{proxy.url}/scene.rumi"
        with pytest.raises(RumiFormatError, match="blob.size"):   # only once the tries run out
            xarray_rumi.open_image(url, header=f"{url}.header", retry=RetryPolicy(attempts=3, backoff=0.001))
        assert len(proxy.faults_injected) == 3
