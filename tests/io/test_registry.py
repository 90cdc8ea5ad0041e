"""io/registry.py: a VirtualiZarr registry read like every other source: exact, retried, a file's end named."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("obstore")
pytest.importorskip("obspec_utils")

import obstore  # noqa: E402
from flaky_server import FlakyProxy  # noqa: E402
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from obstore.store import HTTPStore, LocalStore  # noqa: E402
from servers import RangeServer  # noqa: E402

from xarray_rumi.io.registry import RegistrySource, as_os_error  # noqa: E402
from xarray_rumi.io.retry import RetryPolicy, is_transient  # noqa: E402
from xarray_rumi.io.source import FileEndedError  # noqa: E402

DATA = bytes(range(256)) * 40   # 10240 bytes
FAST = RetryPolicy(attempts=3, backoff=0.001)


@pytest.fixture
def local(tmp_path):
    (tmp_path / "a.bin").write_bytes(DATA)
    return RegistrySource(f"file://{tmp_path}/a.bin", ObjectStoreRegistry({"file://": LocalStore()}), FAST)


def test_exact_ranges(local):
    assert local.read(10, 20) == DATA[10:20]
    assert local.read_many([0, 5000, 10230], [4, 5100, 10240]) == [DATA[0:4], DATA[5000:5100], DATA[10230:]]
    assert local.read_many([7, 9], [7, 12]) == [b"", DATA[9:12]]   # an empty range asks nothing
    assert local.size() == len(DATA)
    assert local.read(10000, 20000, exact=False) == DATA[10000:]   # a first read may stop at the end


@pytest.mark.parametrize("starts, stops", [
    ([10000], [10300]),                    # a short answer
    ([10240], [10300]),                    # a range starting at the end: the store's "range was invalid"
    ([0, 20000], [5, 20010]),              # get_ranges panics on a range past the end of the request it merged
    ([0, 10000], [5, 10300]),
])
def test_a_range_past_the_end_is_file_ended_naming_it(local, starts, stops):
    with pytest.raises(FileEndedError) as ended:
        local.read_many(starts, stops)
    assert (ended.value.start, ended.value.stop, ended.value.size) == (starts[-1], stops[-1], len(DATA))


def _http(origin_url: str, proxy_url: str) -> RegistrySource:
    # the store's own retries off, so that the attempts counted are the policy's
    store = HTTPStore.from_url(proxy_url, client_options={"allow_http": True}, retry_config={"max_retries": 0})
    return RegistrySource(f"{proxy_url}/a.bin", ObjectStoreRegistry({proxy_url: store}), FAST)


@pytest.mark.parametrize("fault", ["503", "500", "drop", "short", "truncated"])
def test_failures_in_transit_are_retried_and_logged(tmp_path, caplog, fault):
    (tmp_path / "a.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url, [fault]) as proxy:
        source = _http(origin.url, proxy.url)
        with caplog.at_level(logging.INFO, logger="xarray_rumi.io"):
            assert source.read_many([100, 5000], [200, 5100]) == [DATA[100:200], DATA[5000:5100]]
    assert proxy.faults_injected == [fault]
    (retry,) = [r for r in caplog.records if r.name == "xarray_rumi.io.retry"]
    assert "attempt 1 of 3 failed" in retry.getMessage()


def test_whole_answers_are_cut_by_the_store_and_longer_ones_refused(tmp_path, monkeypatch):
    (tmp_path / "a.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url, always="whole") as proxy:
        source = _http(origin.url, proxy.url)
        assert source.read_many([10, 5000], [20, 5100]) == [DATA[10:20], DATA[5000:5100]]   # obstore cuts them
    calls = []
    monkeypatch.setattr(RegistrySource, "_get", lambda self, starts, stops: calls.append(1) or [DATA[:30]])
    with pytest.raises(OSError, match="ignored the byte range"):
        source.read(10, 20)
    assert len(calls) == 1   # not retried: asking again gets the same


def test_a_missing_file_is_not_retried(tmp_path):
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url, when=lambda *a: True) as proxy:
        source = _http(origin.url, proxy.url)
        with pytest.raises(FileNotFoundError):
            RegistrySource(f"{proxy.url}/nope.bin", source.registry, FAST).read(0, 10)
    assert len(proxy.requests) == 1


def test_a_range_past_the_end_over_http_is_asked_once_and_the_size_once(tmp_path):
    (tmp_path / "a.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url) as proxy:
        source = _http(origin.url, proxy.url)
        for start in (10000, 10240):   # a short answer, a 416
            proxy.requests.clear()
            with pytest.raises(FileEndedError):
                source.read(start, 10300)
            assert [r.method for r in proxy.requests] == ["GET", "HEAD"]


def test_obstore_errors_become_the_os_errors_retries_classify():
    class GenericError(Exception):
        pass

    class NotFoundError(Exception):
        pass

    sending = as_os_error(GenericError("Error performing GET http://h/a in 1ms - HTTP error: error sending request"))
    assert is_transient(sending)
    status = as_os_error(GenericError("... Server returned non-2xx status code: 403 Forbidden: <Error/>"))
    assert status.status == 403 and not is_transient(status)
    assert isinstance(as_os_error(NotFoundError("Object at location a not found")), FileNotFoundError)
    assert type(as_os_error(GenericError("something else"))) is OSError and not is_transient(
        as_os_error(GenericError("something else")))
    assert obstore  # the real store's types are what the names above stand for


def test_a_first_read_that_may_run_past_the_end_is_one_get_and_no_head(tmp_path):
    """The store cuts the range at the end of the file and its answer states the size: no HEAD before it."""
    (tmp_path / "a.bin").write_bytes(DATA)
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url, ["truncated"]) as proxy:
        source = _http(origin.url, proxy.url)
        assert source.read(10000, 20000, exact=False) == DATA[10000:]   # cut in transit once, then whole
        assert [(r.method, r.fault) for r in proxy.requests] == [("GET", "truncated"), ("GET", None)]
        proxy.requests.clear()
        assert source.read(10240, 20000, exact=False) == b""   # starts at the end: the store's 416
        assert [r.method for r in proxy.requests] == ["GET"]
