"""One failing remote read costs ``RetryPolicy.attempts`` requests, not that times the file system's own.

A :class:`FlakyProxy` in front of a moto S3 server and of a ``RangeServer``
(both on 127.0.0.1, started and stopped here) fails every ranged GET and
counts them.  Before the file system's own retries were turned off, one S3
read under 3 attempts was 75 GETs for a ``503 SlowDown`` and 15 for a 500.
"""

from __future__ import annotations

import logging
import pathlib
import pickle

import pytest
from flaky_server import FlakyProxy
from s3_server import s3_server
from servers import RangeServer

from xarray_rumi.io.retry import RetryPolicy, is_transient
from xarray_rumi.io.source import ByteSource, FileEndedError, read_bytes

POLICY = RetryPolicy(attempts=3, backoff=0.001)
DATA = bytes(range(256)) * 16
S3_URL = "s3://bucket/x.bin"


@pytest.fixture(scope="module")
def s3():
    s3fs = pytest.importorskip("s3fs")
    with s3_server("bucket") as options:
        s3fs.S3FileSystem(**options).pipe(S3_URL, DATA)
        yield options


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    root = tmp_path_factory.mktemp("origin")
    (root / "x.bin").write_bytes(DATA)
    with RangeServer(str(root)) as server:
        yield server


def through(proxy, options, **more):
    """``options`` with S3 requests sent through ``proxy``."""
    return dict(options, endpoint_url=proxy.url, **more)


def failed_gets(proxy) -> int:
    return sum(1 for r in proxy.requests if r.fault)


def retries_logged(caplog) -> list[logging.LogRecord]:
    """Our records only: moto's server logs each request at INFO too."""
    return [r for r in caplog.records if r.name.startswith("xarray_rumi.io")]


@pytest.mark.parametrize("fault", ["503", "500", "short", "truncated"])
def test_a_failing_s3_read_is_tried_exactly_attempts_times(s3, fault):
    with FlakyProxy(s3["endpoint_url"], always=fault) as proxy:
        source = ByteSource(S3_URL, through(proxy, s3), POLICY)
        with pytest.raises(OSError, match=rf"bytes 100-300 of {S3_URL} after 3 attempts"):
            source.read(100, 300)
        assert failed_gets(proxy) == POLICY.attempts


def test_a_dropped_s3_connection_costs_at_most_two_requests_per_attempt(s3):
    # aiohttp sends an idempotent request once more when the connection drops
    # before an answer (RFC 9112, 9.3.1); nothing public turns that off.
    with FlakyProxy(s3["endpoint_url"], always="drop") as proxy:
        source = ByteSource(S3_URL, through(proxy, s3), POLICY)
        with pytest.raises(OSError, match="after 3 attempts"):
            source.read(100, 300)
        assert POLICY.attempts <= failed_gets(proxy) <= 2 * POLICY.attempts


def test_each_request_of_a_failing_s3_batch_is_tried_exactly_attempts_times(s3):
    with FlakyProxy(s3["endpoint_url"], always="503") as proxy:
        source = ByteSource(S3_URL, through(proxy, s3), POLICY)
        with pytest.raises(OSError, match="after 3 attempts"):
            source.read_many([0, 1000], [10, 1010])
        ranges = [r.range for r in proxy.requests if r.fault]
    # the two ranges lie close enough to share one request (xarray_rumi.io.engine)
    assert ranges == ["bytes=0-1009"] * 3


def test_a_blob_fetched_from_s3_is_tried_exactly_attempts_times(s3):
    every_get = lambda method, path, headers: method == "GET"  # noqa: E731
    with FlakyProxy(s3["endpoint_url"], always="503", when=every_get) as proxy:
        with pytest.raises(OSError, match=f"cannot read {S3_URL} after 3 attempts"):
            read_bytes(S3_URL, through(proxy, s3), POLICY, max_size=len(DATA), claimed_size=lambda first: None)
        assert failed_gets(proxy) == POLICY.attempts


def test_an_s3_retry_is_logged_and_the_bytes_are_exact(s3, caplog):
    with FlakyProxy(s3["endpoint_url"], ["503"]) as proxy, caplog.at_level(logging.INFO, logger="xarray_rumi.io"):
        assert ByteSource(S3_URL, through(proxy, s3), POLICY).read(100, 300) == DATA[100:300]
        assert [r.fault for r in proxy.requests] == ["503", None]
    [record] = retries_logged(caplog)
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith(f"bytes 100-300 of {S3_URL}: attempt 1 of 3 failed, retrying in ")
    assert record.getMessage().endswith("(503 SlowDown)")


def test_botocore_retries_the_caller_sets_are_kept_and_their_options_left_alone(s3):
    retries = {"max_attempts": 1}  # botocore: one retry, so two tries per attempt
    with FlakyProxy(s3["endpoint_url"], always="500") as proxy:
        options = through(proxy, s3, config_kwargs={"retries": retries})
        as_given = pickle.loads(pickle.dumps(options))
        with pytest.raises(OSError, match="after 3 attempts"):
            ByteSource(S3_URL, options, POLICY).read(100, 300)
        assert failed_gets(proxy) == 2 * POLICY.attempts
    # botocore writes into the retries dict it is given; it was given a copy
    assert options == as_given and retries == {"max_attempts": 1}


def test_one_file_system_per_options_shared_by_sources_and_apart_from_the_callers(s3):
    s3fs = pytest.importorskip("s3fs")
    source = ByteSource(S3_URL, s3)
    assert source.read(0, 4) == DATA[:4]  # connected: botocore has seen the options
    fs = source._read_fs_path[0]
    # fsspec's instance cache still works: one client per process for these options,
    # whether the source was made here or unpickled as on a Dask worker.
    assert ByteSource(S3_URL, dict(s3))._read_fs_path[0] is fs
    assert pickle.loads(pickle.dumps(source))._read_fs_path[0] is fs
    assert pickle.loads(pickle.dumps(fs)) is fs
    callers = s3fs.S3FileSystem(**s3)
    assert callers is not fs and callers.retries == 5 and fs.retries == 1


def test_a_failing_http_read_is_tried_exactly_attempts_times(origin):
    with FlakyProxy(origin.url, always="503") as proxy:
        source = ByteSource(f"{proxy.url}/x.bin", retry=POLICY)
        with pytest.raises(OSError, match=r"bytes 100-300 of http://127\.0\.0\.1:\d+/x\.bin after 3 attempts"):
            source.read(100, 300)
        assert failed_gets(proxy) == POLICY.attempts


def test_a_dropped_http_connection_costs_at_most_two_requests_per_attempt(origin):
    with FlakyProxy(origin.url, always="drop") as proxy:
        source = ByteSource(f"{proxy.url}/x.bin", retry=POLICY)
        with pytest.raises(OSError, match="after 3 attempts"):
            source.read(100, 300)
        assert POLICY.attempts <= failed_gets(proxy) <= 2 * POLICY.attempts


def test_an_http_retry_is_logged_and_the_bytes_are_exact(origin, caplog):
    with FlakyProxy(origin.url, ["500"]) as proxy, caplog.at_level(logging.INFO, logger="xarray_rumi.io"):
        url = f"{proxy.url}/x.bin"
        assert ByteSource(url, retry=POLICY).read(100, 300) == DATA[100:300]
    [record] = retries_logged(caplog)
    assert record.getMessage().startswith(f"bytes 100-300 of {url}: attempt 1 of 3 failed, retrying in ")
    assert "500" in record.getMessage()


# -- ranges past the end of the file: final, never retried ---------------------------------

#: Ranges of ``DATA`` (4096 bytes) running past its end: partly (a short answer) and wholly (a 416).
PAST_THE_END = [(4000, 4200, 104), (4096, 4200, 104), (5000, 5100, 100)]


@pytest.mark.parametrize("start, stop, missing", PAST_THE_END)
def test_a_local_range_past_the_end_is_a_file_ended_error_with_the_files_size(tmp_path, start, stop, missing):
    path = tmp_path / "x.bin"
    path.write_bytes(DATA)
    source = ByteSource(str(path))
    for read in (lambda: source.read(start, stop), lambda: source.read_many([0, start], [10, stop])):
        with pytest.raises(FileEndedError) as info:
            read()
        assert (info.value.start, info.value.stop, info.value.size, info.value.missing) == (start, stop, 4096, missing)
        assert str(info.value) == (f"short read from {path}: bytes {start}-{stop} run past its end at byte 4096 "
                                   f"({missing} bytes missing)")
    assert source.read(4000, 4200, exact=False) == DATA[4000:]   # a first read may run past the end


@pytest.mark.parametrize("start, stop, missing", PAST_THE_END)
def test_an_http_range_past_the_end_is_asked_once_and_the_size_once(origin, start, stop, missing):
    """A short answer or a 416 from a file that really ends there: one GET, not ``attempts`` GETs.

    A source's first read takes the size from the answer's ``Content-Range``; a pinned source's reads
    (through the read engine, with ``If-Match``) ask it once, with a HEAD.
    """
    with FlakyProxy(origin.url) as proxy:
        source = ByteSource(f"{proxy.url}/x.bin", retry=POLICY)
        with pytest.raises(FileEndedError, match=rf"bytes {start}-{stop} run past its end at byte 4096"):
            source.read(start, stop)
        assert [(r.method, r.range) for r in proxy.requests] == [("GET", f"bytes={start}-{stop - 1}")]
        assert source.identity.size == len(DATA)
        proxy.requests.clear()
        with pytest.raises(FileEndedError, match=rf"bytes {start}-{stop} run past its end"):
            source.read_many([0, start, 100], [10, stop, 110])
        gets = [r.range for r in proxy.requests if r.method == "GET"]
        assert gets == [f"bytes=0-{stop - 1}"]   # the three share one request (xarray_rumi.io.engine)
        assert [r.method for r in proxy.requests].count("HEAD") == 1


@pytest.mark.parametrize("start, stop, missing", PAST_THE_END)
def test_an_s3_range_past_the_end_is_asked_once_and_the_size_once(s3, start, stop, missing):
    with FlakyProxy(s3["endpoint_url"]) as proxy:
        source = ByteSource(S3_URL, through(proxy, s3), POLICY)
        with pytest.raises(FileEndedError, match=rf"bytes {start}-{stop} run past its end at byte 4096"):
            source.read(start, stop)
        with pytest.raises(FileEndedError, match=rf"bytes {start}-{stop} run past its end at byte 4096"):
            source.read_many([0, start], [10, stop])
        ranged = [r.range for r in proxy.requests if r.method == "GET" and r.range]
    # once a read, never retried; read_many's two ranges share one request (xarray_rumi.io.engine)
    assert ranged == [f"bytes={start}-{stop - 1}", f"bytes=0-{stop - 1}"]


def test_a_body_cut_in_transit_is_still_retried_after_the_size_says_the_file_holds_it(origin):
    """Content-Length agreeing with half a body: the size tells it from a file that ends there."""
    with FlakyProxy(origin.url, ["truncated"]) as proxy:
        source = ByteSource(f"{proxy.url}/x.bin", retry=POLICY)
        assert source.read(100, 300) == DATA[100:300]   # the answer's Content-Range says the file holds it
        assert [(r.method, r.fault) for r in proxy.requests] == [("GET", "truncated"), ("GET", None)]
    with FlakyProxy(origin.url, ["truncated"]) as proxy:
        source = ByteSource(f"{proxy.url}/x.bin", retry=POLICY)
        source.pin()
        assert source.read(100, 300) == DATA[100:300]   # a pinned source's reads state no size: it is asked
        assert [(r.method, r.fault) for r in proxy.requests] == [("HEAD", None), ("GET", "truncated"), ("HEAD", None),
                                                                 ("GET", None)]


def test_a_remote_first_read_past_the_end_of_an_empty_file_is_empty(origin):
    (pathlib.Path(origin.root) / "empty.bin").write_bytes(b"")
    assert ByteSource(f"{origin.url}/empty.bin", retry=POLICY).read(0, 100, exact=False) == b""


def test_a_file_ended_error_survives_pickling():
    error = pickle.loads(pickle.dumps(FileEndedError("s3://b/x.rumi", 10, 30, 20)))
    assert (error.url, error.start, error.stop, error.size, error.missing) == ("s3://b/x.rumi", 10, 30, 20, 10)
    assert isinstance(error, OSError) and not is_transient(error)


def test_a_source_keeps_to_the_version_it_pinned_and_a_changed_file_is_refused_at_once(tmp_path):
    """Over HTTP the pinned ETag goes out as If-Match: a replaced file is one 412, not retried, never its bytes."""
    from xarray_rumi.io.source import FileChangedError

    (tmp_path / "x.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as server:
        source = ByteSource(f"{server.url}/x.bin", retry=POLICY)
        pinned = source.pin()
        assert pinned.size == len(DATA) and pinned.etag and [r.method for r in server.requests] == ["HEAD"]
        assert source.read(0, 4) == DATA[:4]
        shipped = pickle.loads(pickle.dumps(source))
        assert shipped.identity == pinned   # travels to workers
        (tmp_path / "x.bin").write_bytes(DATA[::-1])
        server.requests.clear()
        with pytest.raises(FileChangedError, match=r"x.bin changed since it was opened: it was 4096 bytes, ETag"):
            source.read(0, 4)
        with pytest.raises(FileChangedError):
            shipped.read_many([0, 8], [4, 12])
        assert len(server.get_requests()) == 2   # one for the read, one for the batch (merged): none retried
        assert ByteSource(f"{server.url}/x.bin").read(0, 4) == DATA[::-1][:4]   # a new source reads the new file


def test_a_local_source_pins_the_file_its_first_read_found(tmp_path):
    from xarray_rumi.io.source import FileChangedError

    path = tmp_path / "x.bin"
    path.write_bytes(DATA)
    source = ByteSource(str(path))
    assert source.identity is None
    assert source.read(0, 4) == DATA[:4] and source.identity.size == len(DATA)   # the read's own fstat
    path.with_name("y.bin").write_bytes(DATA[::-1])
    path.with_name("y.bin").replace(path)   # an atomic replace
    with pytest.raises(FileChangedError, match="inode"):
        source.read_many([0], [4])
