"""The one retry mechanism of remote reads: which errors pass, how long to wait (docs/reliability.md)."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

logger = logging.getLogger(__name__)

#: HTTP statuses worth another try: timeouts, throttling and server-side errors.
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})

#: S3 error codes worth another try whatever their status (``RequestTimeout`` is a 400), as botocore's standard mode.
TRANSIENT_ERROR_CODES = frozenset({
    "RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete",
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "TooManyRequestsException", "ProvisionedThroughputExceededException", "TransactionInProgressException",
    "RequestLimitExceeded", "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled",
    "SlowDown", "EC2ThrottledException",
})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed remote read is tried again; ``attempts`` counts the first try.

    >>> policy = RetryPolicy(attempts=4, backoff=0.1, factor=2.0, jitter=0.0)
    >>> [round(w, 3) for w in policy.waits()]
    [0.1, 0.2, 0.4]
    """

    attempts: int = 5
    backoff: float = 0.1
    factor: float = 2.0
    max_backoff: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")
        if self.backoff < 0 or self.max_backoff < 0 or self.factor < 1 or not 0 <= self.jitter <= 1:
            raise ValueError("RetryPolicy needs backoff, max_backoff >= 0, factor >= 1 and 0 <= jitter <= 1")

    def waits(self) -> list[float]:
        """The waits between attempts, in seconds: ``min(backoff * factor**i, max_backoff)``, less up to ``jitter``."""
        out = []
        for i in range(self.attempts - 1):
            wait = min(self.backoff * self.factor**i, self.max_backoff)
            out.append(wait * (1 - self.jitter * random.random()))
        return out


DEFAULT_POLICY = RetryPolicy()


class TransientReadError(OSError):
    """A remote read that came back short although the file holds the range: worth another try."""


def is_past_the_end(exc: BaseException) -> bool:
    """Whether ``exc`` is the store's 416 (Range Not Satisfiable): the range starts at or past the file's end."""
    return _status(exc) == 416


def is_changed(exc: BaseException) -> bool:
    """Whether ``exc`` is the store's 412 (Precondition Failed) to ``If-Match``: another version of the object.

    >>> class Refused(Exception):
    ...     response = {"Error": {"Code": "PreconditionFailed"}, "ResponseMetadata": {"HTTPStatusCode": 412}}
    >>> is_changed(Refused()), is_changed(TimeoutError())
    (True, False)
    """
    return _status(exc) == 412 or _error_code(exc) == "PreconditionFailed"


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the read that raised ``exc`` may succeed (told by attributes and class names)."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(exc, (TimeoutError, ConnectionError, TransientReadError)):
        return True
    if _error_code(exc) in TRANSIENT_ERROR_CODES:
        return True
    status = _status(exc)
    if status is not None:
        return status in TRANSIENT_STATUSES
    names = {cls.__name__ for cls in type(exc).__mro__}
    # aiohttp's, botocore's and urllib3's; throttled S3 answers may carry broken XML, a cut body fail its checksum
    return bool(names & {
        "ClientConnectionError", "ClientPayloadError", "ServerDisconnectedError", "ClientOSError",
        "IncompleteReadError", "ResponseStreamingError", "IncompleteRead", "ProtocolError",
        "EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError", "ConnectTimeoutError",
        "HTTPClientError", "ResponseParserError", "FlexibleChecksumError",
    })


def _causes(exc: BaseException | None):
    """``exc`` and the errors it was raised from, a few deep (s3fs wraps botocore's in an OSError)."""
    for _ in range(5):
        if exc is None:
            return
        yield exc
        exc = exc.__cause__ or exc.__context__


def _error_code(exc: BaseException) -> str | None:
    for cause in _causes(exc):
        response = getattr(cause, "response", None)  # botocore.exceptions.ClientError
        if isinstance(response, dict) and isinstance(response.get("Error"), dict):
            return response["Error"].get("Code")
    return None


def _status(exc: BaseException | None) -> int | None:
    for cause in _causes(exc):
        status = getattr(cause, "status", None)  # aiohttp.ClientResponseError
        if isinstance(status, int):
            return status
        response = getattr(cause, "response", None)  # botocore.exceptions.ClientError
        if isinstance(response, dict):
            code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
    return None


def retried(read, *, policy: RetryPolicy = DEFAULT_POLICY, describe):
    """``read()``, tried again on transient errors (each logged, naming ``describe``); else an ``OSError`` naming it."""
    for attempt, wait in enumerate([*policy.waits(), None], start=1):
        try:
            return read()
        except Exception as exc:  # noqa: BLE001 - classified, and re-raised unless transient
            if not is_transient(exc):
                if isinstance(exc, OSError) or _status(exc) is None:  # not a storage error
                    raise
                raise OSError(f"cannot read {_text(describe)}: {_reason(exc)}") from exc
            if wait is None:  # the last attempt
                raise OSError(
                    f"cannot read {_text(describe)} after {policy.attempts} attempts: {_reason(exc)}") from exc
            logger.info("%s: attempt %d of %d failed, retrying in %.2f s: %s",
                        _text(describe), attempt, policy.attempts, wait, _reason(exc))
            time.sleep(wait)


def describe_ranges(url: str, starts, stops) -> str:
    """How an error names the ranges a read asked of ``url``: one range by its bytes, more by their count."""
    return f"bytes {starts[0]}-{stops[0]} of {url}" if len(starts) == 1 else f"{len(starts)} byte ranges of {url}"


def _text(describe) -> str:
    return describe() if callable(describe) else describe


def _reason(exc: BaseException) -> str:
    """``exc`` in one line, with the status and S3 code behind it (s3fs's OSErrors hide them)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    reason = f"{type(exc).__name__}: {text}" if not text.startswith(type(exc).__name__) else text
    hidden = [str(x) for x in (_status(exc), _error_code(exc)) if x is not None and str(x) not in reason]
    return f"{reason} ({' '.join(hidden)})" if hidden else reason
