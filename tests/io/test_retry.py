"""The retry loop on its own: what is logged, what is raised, which S3 answers are transient."""

from __future__ import annotations

import logging

import pytest

from xarray_rumi.io.retry import RetryPolicy, is_transient, retried

FAST = RetryPolicy(attempts=3, backoff=0.001)
WHAT = "bytes 10-20 of s3://bucket/scene.rumi"


def failing(times: int, error: Exception):
    """A read that raises ``error`` ``times`` times, then returns ``b"ok"``; it counts its calls."""
    calls = []

    def read():
        calls.append(1)
        if len(calls) <= times:
            raise error
        return b"ok"

    read.calls = calls
    return read


def test_each_retry_is_logged_at_info_with_what_which_attempt_and_why(caplog):
    read = failing(2, ConnectionResetError("connection reset by peer"))
    with caplog.at_level(logging.INFO, logger="xarray_rumi.io"):
        assert retried(read, policy=FAST, describe=WHAT) == b"ok"
    assert [(r.name, r.levelno) for r in caplog.records] == [("xarray_rumi.io.retry", logging.INFO)] * 2
    for attempt, record in enumerate(caplog.records, start=1):
        message = record.getMessage()
        assert message.startswith(f"{WHAT}: attempt {attempt} of 3 failed, retrying in ")
        assert message.endswith("ConnectionResetError: connection reset by peer")


def test_giving_up_raises_and_logs_no_warning(caplog):
    read = failing(99, TimeoutError("read timed out"))
    with caplog.at_level(logging.INFO, logger="xarray_rumi.io"):
        with pytest.raises(OSError, match=f"cannot read {WHAT} after 3 attempts: TimeoutError: read timed out"):
            retried(read, policy=FAST, describe=WHAT)
    assert len(read.calls) == FAST.attempts
    # the retries, not the giving up: the error says that
    assert [r.levelno for r in caplog.records] == [logging.INFO] * (FAST.attempts - 1)


def test_an_error_retrying_cannot_fix_is_raised_at_once_and_not_logged(caplog):
    read = failing(99, FileNotFoundError("s3://bucket/missing.rumi"))
    with caplog.at_level(logging.DEBUG, logger="xarray_rumi.io"):
        with pytest.raises(FileNotFoundError):
            retried(read, policy=FAST, describe=WHAT)
    assert len(read.calls) == 1 and caplog.records == []


def test_describe_is_called_only_when_something_is_written():
    described = []

    def describe():
        described.append(1)
        return WHAT

    assert retried(failing(0, TimeoutError()), policy=FAST, describe=describe) == b"ok"
    assert described == []


def _s3_error(code: str, status: int) -> OSError:
    """An S3 error as s3fs raises it: botocore's ClientError translated into an OSError."""
    botocore = pytest.importorskip("botocore.exceptions")
    s3fs_errors = pytest.importorskip("s3fs.errors")
    error = botocore.ClientError({"Error": {"Code": code, "Message": "..."},
                                  "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")
    try:
        raise s3fs_errors.translate_boto_error(error) from error
    except Exception as translated:  # noqa: BLE001 - the exception as a caller catches it, cause and all
        return translated


@pytest.mark.parametrize("code, status, transient", [
    ("SlowDown", 503, True),
    ("InternalError", 500, True),
    ("RequestTimeout", 400, True),  # S3's idle-socket timeout: a 400 that botocore retried
    ("ThrottlingException", 400, True),
    ("NoSuchKey", 404, False),
    ("AccessDenied", 403, False),
    ("InvalidRange", 416, False),
])
def test_s3_errors_botocore_retried_are_transient_and_no_others(code, status, transient):
    assert is_transient(_s3_error(code, status)) is transient


def test_a_range_past_the_end_is_recognised_through_s3fs_and_aiohttp_wrappers():
    """416: s3fs raises an OSError from botocore's InvalidRange, aiohttp a ClientResponseError with status 416."""
    from xarray_rumi.io.retry import is_past_the_end

    class ClientResponseError(Exception):
        status = 416

    assert is_past_the_end(_s3_error("InvalidRange", 416)) and is_past_the_end(ClientResponseError())
    assert not is_past_the_end(_s3_error("NoSuchKey", 404)) and not is_past_the_end(ConnectionResetError())
