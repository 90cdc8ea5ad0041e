"""Exact byte ranges through an obstore registry (VirtualiZarr's), checked and retried as ``ByteSource``'s."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from .retry import DEFAULT_POLICY, RetryPolicy, TransientReadError, describe_ranges, retried
from .source import FileEndedError, check_length

_STATUS = re.compile(r"status code: (\d{3})")
#: How obstore's reqwest client names a connection or a body that broke in transit.
_IN_TRANSIT = ("error sending request", "body error", "connection closed", "connection reset", "timed out")
#: How a local store names a range that starts at or past the end of the file.
_INVALID_RANGE = ("range was invalid", "InvalidRange")


def as_os_error(exc: BaseException) -> BaseException:
    """``exc``, an obstore error, as the ``OSError`` that says the same: missing, refused, a status, in transit."""
    if isinstance(exc, OSError):   # obstore raises FileNotFoundError itself for a missing object
        return exc
    message = str(exc).split("\n\nDebug source:")[0].strip() or type(exc).__name__
    name = type(exc).__name__
    if name == "NotFoundError":
        return FileNotFoundError(message)
    if name in ("PermissionDeniedError", "UnauthenticatedError"):
        return PermissionError(message)
    status = _STATUS.search(message)
    if status:
        error = OSError(message)
        error.status = int(status.group(1))   # what retries classify, as on aiohttp's errors
        return error
    if any(words in message for words in _IN_TRANSIT):
        return TransientReadError(message)
    return OSError(message)


def _past_the_end(exc: BaseException) -> bool:
    status = getattr(exc, "status", None)
    return status == 416 or any(words in str(exc) for words in _INVALID_RANGE)


@dataclass(frozen=True, eq=False)
class RegistrySource:
    """Exact byte ranges of ``url`` through an obstore ``registry``: the opener's byte source for VirtualiZarr.

    >>> import os, tempfile, obstore
    >>> from obspec_utils.registry import ObjectStoreRegistry
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"abcdef")
    >>> source = RegistrySource(f"file://{path}", ObjectStoreRegistry({"file://": obstore.store.LocalStore()}))
    >>> source.read(1, 4), source.read_many([0, 4], [2, 6]), source.size()
    (b'bcd', [b'ab', b'ef'], 6)
    """

    url: str
    registry: object = field(repr=False)
    retry: RetryPolicy = DEFAULT_POLICY
    #: the registry holds the credentials: nothing else tells sources apart (see ``reading.checked.blob_key``)
    storage_options: dict = field(default_factory=dict, repr=False)
    #: even a local file is read through the store, not the opener's local shortcuts
    is_local = False

    @cached_property
    def _store_path(self):
        return self.registry.resolve(self.url)

    def size(self) -> int:
        """The file's size in bytes: one request."""
        return int(retried(self._size_once, policy=self.retry, describe=f"the size of {self.url}"))

    def _size_once(self) -> int:
        import obstore

        store, path = self._store_path
        try:
            return int(obstore.head(store, path)["size"])
        except Exception as exc:  # noqa: BLE001 - translated for retried()
            raise as_os_error(exc) from exc

    def read(self, start: int, stop: int, *, exact: bool = True) -> bytes:
        """Bytes ``[start, stop)``; without ``exact`` the answer stops at the end of the file, never past it."""
        if stop <= start:
            return b""
        if not exact:
            return retried(lambda: self._get_to_the_end(start, stop), policy=self.retry,
                           describe=f"bytes {start}-{stop} of {self.url}")
        return self.read_many([start], [stop])[0]

    def _get_to_the_end(self, start: int, stop: int) -> bytes:
        import obstore

        store, path = self._store_path
        try:
            result = obstore.get(store, path, options={"range": (start, stop)})
            data = bytes(result.bytes())
        except Exception as exc:  # noqa: BLE001 - translated for retried()
            error = as_os_error(exc)
            if _past_the_end(error):
                return b""
            raise error from exc
        size = result.meta["size"]
        return check_length(self.url, start, max(start, min(stop, size)), data, lambda: size)   # cut at the end

    def read_many(self, starts, stops) -> list[bytes]:
        """Several exact ranges, in one ``obstore.get_ranges`` call (one for one range); only failed ones again."""
        starts, stops = [int(s) for s in starts], [int(s) for s in stops]
        out: list[bytes | None] = [b"" if b <= a else None for a, b in zip(starts, stops)]
        failed: list[str] = []

        def attempt() -> list[bytes]:
            missing = [i for i, data in enumerate(out) if data is None]
            if not missing:
                return out
            sizes: list = []
            ranges = [(starts[i], stops[i]) for i in missing]
            try:
                answers = self._get(*zip(*ranges))
            except BaseException as exc:
                # obstore's panic for a merged answer cut short: past the end, or cut in transit
                panic = type(exc).__name__ == "PanicException"
                if not (panic or isinstance(exc, Exception)):
                    raise   # KeyboardInterrupt and the like
                error = TransientReadError(f"short read from {self.url}: {exc}") if panic else as_os_error(exc)
                size = self._size_into(sizes) if panic or _past_the_end(error) else None
                for a, b in ranges:
                    if size is not None and b > size:
                        raise FileEndedError(self.url, a, b, size)
                failed[:] = [describe_ranges(self.url, *zip(*ranges))]
                raise error from exc
            for i, data in zip(missing, answers):
                failed[:] = [describe_ranges(self.url, starts[i:i + 1], stops[i:i + 1])]
                out[i] = check_length(self.url, starts[i], stops[i], data, lambda: self._size_into(sizes))
            return out

        return retried(attempt, policy=self.retry,
                       describe=lambda: failed[0] if failed else describe_ranges(self.url, starts, stops))

    def _get(self, starts, stops) -> list[bytes]:
        import obstore

        store, path = self._store_path
        if len(starts) == 1:
            return [bytes(obstore.get_range(store, path, start=starts[0], end=stops[0]))]
        return [bytes(b) for b in obstore.get_ranges(store, path, starts=starts, ends=stops)]

    def _size_into(self, sizes: list) -> int | None:
        if not sizes:  # asked once an attempt
            try:
                sizes.append(self._size_once())
            except Exception:  # noqa: BLE001 - the size is unknown: the read's own error is the one to report
                sizes.append(None)
        return sizes[0]


__all__ = ["RegistrySource", "as_os_error"]
