"""Exact byte ranges from a local path or any fsspec URL, retried, checked by length, kept to one file version.

Retries, short reads and replaced files: docs/reliability.md.
"""

from __future__ import annotations

import copy
import os
import secrets
import sys
import weakref
from dataclasses import astuple, dataclass, field
from functools import cache, cached_property

import fsspec
from fsspec.core import url_to_fs

from ..runtime.fork import in_forked_child
from .engine import MAX_GAP, MAX_REQUEST, fetch_ranges
from .ranged import ReportingFileSystem, get_s3, reports_versions
from .retry import (DEFAULT_POLICY, RetryPolicy, TransientReadError, describe_ranges, is_changed, is_past_the_end,
                    retried)
from .urls import is_local, local_path
from .versions import FileChangedError, FileIdentity, if_match, info, pin_for


class FileEndedError(OSError):
    """A range that runs past the end of the file, which is ``size`` bytes: asking again gets the same."""

    def __init__(self, url: str, start: int, stop: int, size: int) -> None:
        self.url, self.start, self.stop, self.size = url, start, stop, size
        super().__init__(f"short read from {url}: bytes {start}-{stop} run past its end at byte {size} "
                         f"({self.missing} bytes missing)")

    @property
    def missing(self) -> int:
        return self.stop - max(self.start, self.size)

    def __reduce__(self):
        return type(self), (self.url, self.start, self.stop, self.size)


def single_try_file_system(url: str, storage_options: dict | None = None):
    """The fsspec file system and path of ``url``; s3fs's and botocore's retries off, unless the options set them.

    >>> fs, path = single_try_file_system("s3://bucket/scene.rumi", {"anon": True})
    >>> path, fs.retries, fs.config_kwargs["retries"]
    ('bucket/scene.rumi', 1, {'total_max_attempts': 1, 'mode': 'standard'})
    """
    fs, path = url_to_fs(url, **(storage_options or {}))
    s3fs = sys.modules.get("s3fs")  # not imported: fs cannot be an S3FileSystem
    if s3fs is not None and type(fs) is s3fs.S3FileSystem:
        fs = _single_try_s3(fs.storage_args, fs.storage_options)
    return fs, path


def _single_try_s3(args, kwargs):
    return _single_try_s3_class()(*args, **kwargs)


@cache
def _single_try_s3_class():
    """s3fs's file system trying each request once; made on first use, as s3fs is optional."""
    from s3fs import S3FileSystem

    class SingleTryS3FileSystem(S3FileSystem):
        # s3fs's two nested retry loops around each GET: a class attribute, so plain S3FileSystems keep theirs.
        retries = 1

        def __init__(self, *args, config_kwargs=None, **kwargs):
            config_kwargs = copy.deepcopy(config_kwargs or {})
            # copied: botocore writes into a dict lacking either key, which would change fsspec's cache key
            config_kwargs.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
            super().__init__(*args, config_kwargs=config_kwargs, **kwargs)

        def __reduce__(self):
            # The class is made in a function, so pickle finds it through one.
            return _single_try_s3, (self.storage_args, self.storage_options)

        async def _cat_file(self, path, version_id=None, start=None, end=None, if_match=None, **kwargs):
            # s3fs has no option for GetObject's IfMatch: a replaced object must be a 412, never its bytes.
            if if_match is None or start is None or end is None:
                return await super()._cat_file(path, version_id=version_id, start=start, end=end, **kwargs)
            body, _ = await get_s3(self, path, start, end, {"if_match": if_match}, version_id=version_id)
            return body

    return SingleTryS3FileSystem


_in_use: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # by id; the sources hold them
_inherited: list = []


def _keep_the_parents_file_systems() -> None:
    # collecting them in the child would stall its reads (docs/reliability.md, "Sources across processes")
    _inherited.extend(_in_use.values())
    _in_use.clear()


in_forked_child(_keep_the_parents_file_systems)


def pinned_by_next_read(source) -> bool:
    """Whether ``source`` keeps to no version yet and its next read's answers will fix one (any source kind)."""
    return getattr(source, "identity", True) is None and getattr(source, "pins_on_read", False)


@dataclass(frozen=True)
class ByteSource:
    """Where a file lives, and exact byte ranges of it; picklable, keeping to the version pinned.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"; _ = p.write_bytes(b"abcdef")
    >>> source = ByteSource(str(p))
    >>> source.read(1, 4), source.read_many([0, 4], [2, 6]), source.size()
    (b'bcd', [b'ab', b'ef'], 6)
    """

    url: str
    storage_options: dict = field(default_factory=dict, compare=False, hash=False)
    #: how remote reads are retried; local reads never are
    retry: RetryPolicy = field(default=DEFAULT_POLICY, compare=False, hash=False)

    def __post_init__(self) -> None:
        # shared by the source's copies in this process, and pickled
        object.__setattr__(self, "_pin", pin_for(secrets.token_hex(8), None))

    @classmethod
    def of(cls, path, storage_options=None, retry: RetryPolicy = DEFAULT_POLICY) -> ByteSource:
        return cls(os.fspath(path), dict(storage_options or {}), retry)

    @property
    def identity(self) -> FileIdentity | None:
        """The version of the file this source keeps to, once pinned."""
        return self._pin.identity

    def pin(self) -> FileIdentity:
        """Keep to the file as it is now (a stat, or one ``fs.info`` request): later reads refuse any other version."""
        if self._pin.identity is None:
            with self._pin.lock:  # threads meeting an unpinned source ask the file once between them
                if self._pin.identity is None:
                    self._pin.identity = self._identity_now()
        return self._pin.identity

    def _identity_now(self) -> FileIdentity:
        if self.is_local:
            return FileIdentity.of_stat(os.stat(self.local_path))
        fs, path = self._read_fs_path
        return FileIdentity.of_info(retried(lambda: info(fs, path), policy=self.retry,
                                            describe=f"the size of {self.url}"))

    def _keep_to(self, found: FileIdentity) -> None:
        """Pin the version an answer states, if none is; another version is a changed file."""
        if self._pin.identity is None:
            with self._pin.lock:
                if self._pin.identity is None:
                    self._pin.identity = found
        pinned = self._pin.identity
        # a HEAD may lack the ETag a GET states: compare what both state
        if pinned != found and any(a is not None and b is not None and a != b
                                   for a, b in zip(astuple(pinned), astuple(found))):
            raise FileChangedError(self.url, pinned, found)

    @property
    def is_local(self) -> bool:
        return is_local(self.url)

    @property
    def pins_on_read(self) -> bool:
        """Whether a read pins the source from its own answer (``fstat``, ``Content-Range`` and ``ETag``)."""
        return self.is_local or reports_versions(self._read_fs_path[0])

    @cached_property
    def local_path(self) -> str:
        return local_path(self.url)

    @property
    def _fs_path(self):
        # as the caller configured it, retries included: for writes
        return self._in_this_process("writes", lambda: url_to_fs(self.url, **self.storage_options))

    @property
    def _read_fs_path(self):
        return self._in_this_process("reads", lambda: single_try_file_system(self.url, self.storage_options))

    def _in_this_process(self, use: str, look_up):
        """The file system and path for ``use``, looked up once in each process (fsspec's are not fork-safe)."""
        pid = os.getpid()
        found = self._file_systems.get(use)
        if found is None or found[0] != pid:
            found = self._file_systems[use] = (pid, *look_up())
            _in_use[id(found[1])] = found[1]
        return found[1:]

    @cached_property
    def _file_systems(self) -> dict:
        # use -> (process id, file system, path)
        return {}

    def __getstate__(self):
        return {"url": self.url, "storage_options": self.storage_options, "retry": self.retry,
                "pin": (self._pin.token, self._pin.identity)}

    def __setstate__(self, state):
        object.__setattr__(self, "url", state["url"])
        object.__setattr__(self, "storage_options", state["storage_options"])
        object.__setattr__(self, "retry", state["retry"])
        object.__setattr__(self, "_pin", pin_for(*state["pin"]))

    def read(self, start: int, stop: int, *, exact: bool = True) -> bytes:
        """Bytes ``[start, stop)``: a range past the end is :class:`FileEndedError`, or without ``exact`` cut there."""
        return self._read_ranges([start], [stop], exact=exact)[0]

    def read_many(self, starts, stops, *, max_gap: int = MAX_GAP, max_request: int = MAX_REQUEST,
                  on_ready=None) -> list[bytes]:
        """Several exact ranges, remotely in merged requests (through gaps of at most ``max_gap`` bytes).

        ``on_ready(positions, pieces)`` receives remote ranges as their requests complete.
        """
        return self._read_ranges(starts, stops, max_gap=max_gap, max_request=max_request, on_ready=on_ready)

    def _read_ranges(self, starts, stops, *, exact: bool = True, max_gap: int = MAX_GAP,
                     max_request: int = MAX_REQUEST, on_ready=None) -> list[bytes]:
        starts, stops = [int(s) for s in starts], [int(s) for s in stops]
        if self.is_local:
            out, size = _pread_many(self.local_path, starts, stops, self._keep_to)
            return [data if len(data) < b - a and not exact else check_length(self.url, a, b, data, lambda: size)
                    for data, a, b in zip(out, starts, stops)]
        fs, path = self._read_fs_path
        out: list[bytes | None] = [None] * len(starts)
        first_failure: list[str] = []

        def attempt() -> list[bytes]:
            missing = [i for i, data in enumerate(out) if data is None]
            ready = None if on_ready is None else lambda positions, pieces: on_ready([missing[p] for p in positions],
                                                                                      pieces)
            got, found = self._fetch(fs, path, [starts[i] for i in missing], [stops[i] for i in missing],
                                     max_gap=max_gap, max_request=max_request, on_ready=ready)
            failure, sizes = None, []
            for i, answer, identity in zip(missing, got, found):
                try:
                    out[i] = self._checked_answer(starts[i], stops[i], answer, sizes=sizes, exact=exact,
                                                  found=identity)
                except Exception as exc:  # noqa: BLE001 - classified by retried()
                    # a final failure is raised before a transient one beside it
                    final = (FileEndedError, FileChangedError)
                    if failure is None or (isinstance(exc, final) and not isinstance(failure[1], final)):
                        failure = (i, exc)
            if failure is not None:
                i, exc = failure
                first_failure[:] = [describe_ranges(self.url, starts[i:i + 1], stops[i:i + 1])]
                raise exc
            return out

        return retried(attempt, policy=self.retry,
                       describe=lambda: first_failure[0] if first_failure else describe_ranges(self.url, starts, stops))

    def _fetch(self, fs, path: str, starts, stops, *, max_gap: int, max_request: int = MAX_REQUEST,
               on_ready=None) -> tuple[list, list]:
        """Each range's answer (bytes or error) and the version its response stated; unpinned, nothing early."""
        pinned = self._pin.identity
        if pinned is not None or not reports_versions(fs):
            answers = fetch_ranges(fs, path, starts, stops, max_gap=max_gap, max_request=max_request,
                                   request_options=if_match(fs, pinned.etag if pinned else None), on_ready=on_ready)
            return answers, [None] * len(starts)
        reporting = ReportingFileSystem(fs)
        answers = fetch_ranges(reporting, path, starts, stops, max_gap=max_gap, max_request=max_request)
        return answers, [reporting.stated(a, b) for a, b in zip(starts, stops)]

    def _checked_answer(self, start: int, stop: int, answer, *, sizes: list, exact: bool = True,
                        found: FileIdentity | None = None) -> bytes:
        """An answer (bytes or error) if it is exactly the range, else why not; ``found`` pins the source."""
        if found is not None:
            self._keep_to(found)
        if isinstance(answer, BaseException):
            if self._pin.identity is not None and is_changed(answer):  # a 412 to If-Match
                raise FileChangedError(self.url, self._pin.identity, None)
            if not is_past_the_end(answer):
                raise answer
            answer = b""
        if len(answer) < stop - start and not exact:
            return answer
        return check_length(self.url, start, stop, answer, lambda: self._size_now(found, sizes))

    def _size_now(self, found: FileIdentity | None, sizes: list) -> int | None:
        if found is None and not sizes:
            sizes.append(FileIdentity.of_info(info(*self._read_fs_path)))
        now, pinned = found or sizes[0], self._pin.identity
        # a 416 may state the size without an ETag: only a differing ETag says the file changed
        if pinned is not None and None not in (pinned.etag, now.etag) and now.etag != pinned.etag:
            raise FileChangedError(self.url, pinned, now)
        return now.size

    def size(self) -> int:
        """The file's size in bytes: a stat locally, one request remotely."""
        if self.is_local:
            return os.stat(self.local_path).st_size
        fs, path = self._read_fs_path
        return int(retried(lambda: fs.size(path), policy=self.retry, describe=f"the size of {self.url}"))


def check_length(url: str, start: int, stop: int, data, size) -> bytes:
    """``data`` if it is exactly bytes ``[start, stop)`` of ``url``, else why not (``size()``: the file's, or None)."""
    if len(data) > stop - start:
        # the Range header was ignored: asking again will not help
        raise OSError(f"server ignored the byte range: {url} bytes {start}-{stop} gave {len(data)} bytes")
    if len(data) < stop - start:
        known = size()
        if known is not None and known < stop:
            raise FileEndedError(url, start, stop, known)
        raise TransientReadError(f"short read from {url}: bytes {start}-{stop} gave {len(data)} bytes")
    return data


def _pread_many(path: str, starts, stops, keep_to) -> tuple[list[bytes], int]:
    """The ranges, and the file's size as the descriptor saw it; ``keep_to(identity)`` first refuses another file."""
    # a bare descriptor: a pread per range, no buffered read-ahead
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        stat = os.fstat(fd)
        keep_to(FileIdentity.of_stat(stat))
        # pread allocates what it is asked for, and a damaged blob may claim frames of gigabytes
        size = stat.st_size
        return [os.pread(fd, max(0, min(b, size) - a), a) for a, b in zip(starts, stops)], size
    finally:
        os.close(fd)


def read_bytes(path_or_url, storage_options, retry: RetryPolicy, *, max_size: int, claimed_size) -> bytes:
    """A small file's bytes: at most ``max_size + 1``, past ``claimed_size(first_bytes)`` by one (locally: or 64)."""
    url = os.fspath(path_or_url)
    if is_local(url):
        with fsspec.open(url, "rb", **(storage_options or {})) as f:
            head = f.read(64)
            claimed = claimed_size(head)
            # one byte past the claim shows a longer file, which the caller refuses
            return head if claimed is None else head + f.read(max(min(claimed + 1, max_size + 1) - len(head), 0))
    fs, path = single_try_file_system(url, storage_options)
    last: list[bytes] = []

    def attempt() -> bytes:
        try:
            data = fs.cat_file(path, start=0, end=max_size + 1)
        except Exception as exc:  # noqa: BLE001 - a 416 is an empty file's answer to a range
            if not is_past_the_end(exc):
                raise
            data = b""
        last[:] = [data]
        claimed = claimed_size(data)
        if claimed is not None and len(data) < claimed:
            raise _CutShort(f"short read from {url}: {len(data)} bytes, where its content says {claimed}")
        return data

    try:
        return retried(attempt, policy=retry, describe=url)
    except OSError as exc:
        if isinstance(exc.__cause__, _CutShort):   # the last attempt's answer was cut short too
            return last[0]  # for the caller to refuse
        raise


class _CutShort(TransientReadError):
    """A whole-file answer shorter than its content says."""

