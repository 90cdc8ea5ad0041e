"""Exact byte ranges from a local path or any fsspec URL.

A :class:`ByteSource` is a small picklable value (a URL and its storage
options): Dask tasks carry it to worker processes, where the file system is
looked up again (fsspec caches instances, so it is reused across tasks), and
so does a forked child, which inherits the parent's sources as they are.
Local files are read with ``os.pread``; nothing is read ahead.

Remote reads are retried on transient errors (5xx, dropped connections,
timeouts, bodies cut short) under a bounded :class:`~xarray_rumi.io.retry.RetryPolicy`,
through a file system whose own retries are off (:func:`single_try_file_system`),
so the policy's ``attempts`` is what one failing read costs; whatever cannot be
read raises an ``OSError`` naming the URL and byte range.  Every read is checked
by length: a short or over-long answer is never returned.

A range that runs past the end of the file is a :class:`FileEndedError`, never
retried: the file is shorter than whatever located the range (a blob made
before the file was cut, say).  Locally the descriptor's size says so at no
cost; remotely a short answer or a 416 is followed by one size request, which
tells a file that really ends there from a body cut off in transit (retried).

A source keeps to one version of its file (:meth:`ByteSource.pin`): locally
each read's descriptor is checked against it (``fstat``, no extra call),
remotely each request carries its ETag (``If-Match``), and a file replaced or
rewritten since is a :class:`FileChangedError`, never bytes of two files.
"""

from __future__ import annotations

import copy
import os
import secrets
import sys
import weakref
from dataclasses import dataclass, field
from functools import cache, cached_property

import fsspec
from fsspec.core import url_to_fs

from .engine import MAX_GAP, fetch_ranges
from .retry import DEFAULT_POLICY, RetryPolicy, TransientReadError, is_changed, is_past_the_end, retried
from .urls import is_local, local_path
from .versions import FileChangedError, FileIdentity, if_match, info, pin_for


class FileEndedError(OSError):
    """A range that runs past the end of the file, which is ``size`` bytes: asking again gets the same.

    Readers turn it into a :class:`~xarray_rumi.RumiFormatError` naming the
    frame (``frames.truncated``).

    >>> error = FileEndedError("x.rumi", 100, 300, 250)
    >>> str(error), error.missing
    ('short read from x.rumi: bytes 100-300 run past its end at byte 250 (50 bytes missing)', 50)
    """

    def __init__(self, url: str, start: int, stop: int, size: int) -> None:
        self.url, self.start, self.stop, self.size = url, start, stop, size
        super().__init__(f"short read from {url}: bytes {start}-{stop} run past its end at byte {size} "
                         f"({self.missing} bytes missing)")

    @property
    def missing(self) -> int:
        """Bytes of the range the file does not hold."""
        return self.stop - max(self.start, self.size)

    def __reduce__(self):
        return type(self), (self.url, self.start, self.stop, self.size)


def single_try_file_system(url: str, storage_options: dict | None = None):
    """The fsspec file system and path of ``url``, its own retries turned off for reads.

    Reads retry under a :class:`~xarray_rumi.io.retry.RetryPolicy` alone (the
    module docstring of :mod:`xarray_rumi.io.retry` says why).  Of the file
    systems we read through, only s3fs retries by itself: it gets s3fs's
    retry loops cut to one try and botocore's retries off, unless
    ``storage_options`` set botocore's (``config_kwargs={"retries": ...}``).
    fsspec's HTTP file system does not retry; aiohttp under it sends an
    idempotent request once more when the connection drops before an answer
    (RFC 9112, section 9.3.1), which no public option turns off.  Chained
    URLs (``simplecache::s3://...``) and other file systems are used as
    fsspec makes them.

    The file system is fsspec's cached instance for these options, separate
    from the one ``fsspec.filesystem("s3", **storage_options)`` gives, which
    keeps its retries.

    >>> fs, path = single_try_file_system("s3://bucket/scene.rumi", {"anon": True})
    >>> path, fs.retries, fs.config_kwargs["retries"]
    ('bucket/scene.rumi', 1, {'total_max_attempts': 1, 'mode': 'standard'})
    >>> fs is single_try_file_system("s3://bucket/other.rumi", {"anon": True})[0]
    True
    """
    fs, path = url_to_fs(url, **(storage_options or {}))
    s3fs = sys.modules.get("s3fs")  # an S3FileSystem means fsspec has imported s3fs
    if s3fs is not None and type(fs) is s3fs.S3FileSystem:
        fs = _single_try_s3(fs.storage_args, fs.storage_options)
    return fs, path


def _single_try_s3(args, kwargs):
    return _single_try_s3_class()(*args, **kwargs)


@cache
def _single_try_s3_class():
    """s3fs's file system, trying each request once; made on first use, as s3fs is optional."""
    from s3fs import S3FileSystem

    class SingleTryS3FileSystem(S3FileSystem):
        # s3fs wraps every ranged GET in two nested loops of ``retries`` tries; a
        # class attribute, not an option, so a subclass sets it.  fsspec caches
        # instances per class, so those of plain S3FileSystem keep their 5.
        retries = 1

        def __init__(self, *args, config_kwargs=None, **kwargs):
            config_kwargs = copy.deepcopy(config_kwargs or {})
            # With both keys given, botocore uses the setting as it is; otherwise it
            # writes into the dict, which (not copied) would change the caller's
            # storage options and with them fsspec's cache key.
            config_kwargs.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
            super().__init__(*args, config_kwargs=config_kwargs, **kwargs)

        def __reduce__(self):
            # The class is made in a function, so pickle finds it through one.
            return _single_try_s3, (self.storage_args, self.storage_options)

        async def _cat_file(self, path, version_id=None, start=None, end=None, if_match=None, **kwargs):
            # s3fs has no option for GetObject's IfMatch: with one, the request is made here,
            # as s3fs makes it, so a replaced object is a 412, never its bytes.
            if if_match is None:
                return await super()._cat_file(path, version_id=version_id, start=start, end=end, **kwargs)
            from s3fs.core import version_id_kw

            bucket, key, in_path = self.split_path(path)
            params = {"Bucket": bucket, "Key": key, "IfMatch": if_match, **version_id_kw(version_id or in_path)}
            if start is not None or end is not None:
                params["Range"] = await self._process_limits(path, start, end)
            response = await self._call_s3("get_object", **params)
            try:
                return await response["Body"].read()
            finally:
                response["Body"].close()

    return SingleTryS3FileSystem


#: The file systems this process's sources have looked up, by id; weakly, as the sources hold them.
_in_use: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
#: Those a forked child found in use in the process it was forked from: kept for good.
_inherited: list = []


def _keep_the_parents_file_systems() -> None:
    # Collected in a forked child, an HTTP or S3 file system of the parent would close its
    # session on the parent's event loop, which looks running there but has no thread, and
    # wait a second for it (fsspec 2026.9): the child's own reads wait too when that happens
    # on their loop.  The parent closes them; the child leaves them alone.
    _inherited.extend(_in_use.values())
    _in_use.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_keep_the_parents_file_systems)


@dataclass(frozen=True)
class ByteSource:
    """Where a file lives, and exact byte ranges of it.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"; _ = p.write_bytes(b"abcdef")
    >>> source = ByteSource(str(p))
    >>> source.read(1, 4), source.read_many([0, 4], [2, 6]), source.size()
    (b'bcd', [b'ab', b'ef'], 6)
    """

    url: str
    storage_options: dict = field(default_factory=dict, compare=False, hash=False)
    #: how remote reads are retried; local reads are never retried (a file is what it is).
    retry: RetryPolicy = field(default=DEFAULT_POLICY, compare=False, hash=False)

    def __post_init__(self) -> None:
        # The version of the file this source keeps to: unknown until pinned (by an open
        # that asks the file, or locally by the first read), then shared by every copy of
        # the source in this process, and carried by pickling once known.
        object.__setattr__(self, "_pin", pin_for(secrets.token_hex(8), None))

    @classmethod
    def of(cls, path, storage_options=None, retry: RetryPolicy = DEFAULT_POLICY) -> ByteSource:
        return cls(os.fspath(path), dict(storage_options or {}), retry)

    @property
    def identity(self) -> FileIdentity | None:
        """The version of the file this source keeps to, once known (see :meth:`pin`)."""
        return self._pin.identity

    def pin(self, identity: FileIdentity | None = None) -> FileIdentity:
        """Keep to the file as it is now (or to ``identity``): later reads refuse any other version.

        Returns the version kept to.  A source already pinned stays so;
        otherwise the file is asked, a stat locally, one size request remotely
        (the request :meth:`size` makes, with the ETag it carries).  A local
        source also pins itself on its first read, from that read's own
        descriptor, at no cost.

        >>> import tempfile, pathlib, os
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"; _ = p.write_bytes(b"abcdef")
        >>> source = ByteSource(str(p))
        >>> source.pin().size
        6
        >>> _ = p.write_bytes(b"abcdefgh")
        >>> source.read(0, 2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xarray_rumi.io.versions.FileChangedError: ... changed since it was opened: it was 6 bytes, ...
        """
        pinned = self._pin.identity
        if pinned is not None:
            return pinned
        with self._pin.lock:  # threads meeting an unpinned source ask the file once between them
            if self._pin.identity is None:
                self._pin.identity = identity if identity is not None else self.current_identity()
            return self._pin.identity

    def current_identity(self) -> FileIdentity:
        """The file's version now: a stat locally, one size request remotely (``fs.info``: a HEAD, ``HeadObject``)."""
        if self.is_local:
            return FileIdentity.of_stat(os.stat(self.local_path))
        fs, path = self._read_fs_path
        return FileIdentity.of_info(retried(lambda: info(fs, path), policy=self.retry,
                                            describe=f"the size of {self.url}"))

    def _keep_to(self, found: FileIdentity) -> None:
        """Refuse a local file that is not the version pinned; pin it if none is yet."""
        pin = self._pin
        expected = pin.identity
        if expected is None:
            with pin.lock:
                if pin.identity is None:
                    pin.identity = found
                expected = pin.identity
        if expected != found:
            raise FileChangedError(self.url, expected, found)

    def _request_kwargs(self, fs) -> dict:
        identity = self._pin.identity
        return if_match(fs, identity.etag if identity is not None else None)

    def _changed(self, exc: BaseException) -> BaseException:
        """``exc``, or the :class:`FileChangedError` it stands for (a 412 to ``If-Match``)."""
        identity = self._pin.identity
        if identity is not None and is_changed(exc):
            return FileChangedError(self.url, identity, None)
        return exc

    @property
    def is_local(self) -> bool:
        return is_local(self.url)

    @cached_property
    def local_path(self) -> str:
        return local_path(self.url)

    @property
    def _fs_path(self):
        # As the caller configured it, the file system's own retries included: writes use it.
        return self._in_this_process("writes", lambda: url_to_fs(self.url, **self.storage_options))

    @property
    def _read_fs_path(self):
        return self._in_this_process("reads", lambda: single_try_file_system(self.url, self.storage_options))

    def _in_this_process(self, use: str, look_up):
        """The file system and path for ``use``, looked up once in each process that uses them.

        fsspec's HTTP and S3 file systems run on an event loop of the process
        that made them, and refuse to work in a forked child ("This class is
        not fork-safe"), where a source opened before the fork (a training
        chips Dataset in PyTorch's forked workers) arrives as it was.  fsspec
        empties its instance cache in a forked child, so looking up again
        there gives the child file systems of its own.
        """
        pid = os.getpid()
        found = self._file_systems.get(use)
        if found is None or found[0] != pid:
            found = self._file_systems[use] = (pid, *look_up())
            _in_use[id(found[1])] = found[1]
        return found[1:]

    @cached_property
    def _file_systems(self) -> dict:
        # what _in_this_process found: use -> (process id, file system, path)
        return {}

    def __getstate__(self):
        # Ship the address and the version kept to; file systems are looked up again where used.
        return {"url": self.url, "storage_options": self.storage_options, "retry": self.retry,
                "pin": (self._pin.token, self._pin.identity)}

    def __setstate__(self, state):
        object.__setattr__(self, "url", state["url"])
        object.__setattr__(self, "storage_options", state["storage_options"])
        object.__setattr__(self, "retry", state.get("retry", DEFAULT_POLICY))
        token, identity = state.get("pin") or (secrets.token_hex(8), None)
        object.__setattr__(self, "_pin", pin_for(token, identity))

    def read(self, start: int, stop: int, *, exact: bool = True) -> bytes:
        """Bytes ``[start, stop)``; with ``exact``, a short read raises ``OSError``.

        Without ``exact`` the answer may be shorter (the file ended), never
        longer.  With it, a range past the end of the file raises
        :class:`FileEndedError`.
        """
        if self.is_local:
            (data,), size = _pread_many(self.local_path, [start], [stop], self._keep_to)
            _check_local(self.url, start, stop, data, size, exact=exact)
            return data
        fs, path = self._read_fs_path

        def attempt() -> bytes:
            try:
                answer = fs.cat_file(path, start=start, end=stop, **self._request_kwargs(fs))
            except Exception as exc:  # noqa: BLE001 - a 416 is an answer; anything else is re-raised
                answer = exc
            return self._checked_answer(start, stop, answer, sizes=[], exact=exact)

        return retried(attempt, policy=self.retry, describe=f"bytes {start}-{stop} of {self.url}")

    def read_many(self, starts, stops, *, max_gap: int = MAX_GAP, on_ready=None) -> list[bytes]:
        """Several exact ranges; remote ones through the read engine (:mod:`xarray_rumi.io.engine`).

        Remotely, neighbouring ranges share merged requests, sent together
        (ranges at most ``max_gap`` bytes apart too: ``0`` reads no byte not asked for);
        only the ranges of requests that failed are asked for again, under one
        :class:`RetryPolicy` for the batch; a range past the end of the file
        (:class:`FileEndedError`) fails the batch at once.  ``on_ready(positions,
        pieces)`` receives remote ranges answered whole as their requests complete.
        """
        starts, stops = [int(s) for s in starts], [int(s) for s in stops]
        if self.is_local:
            out, size = _pread_many(self.local_path, starts, stops, self._keep_to)
            for data, a, b in zip(out, starts, stops):
                _check_local(self.url, a, b, data, size, exact=True)
            return out
        fs, path = self._read_fs_path
        out: list[bytes | None] = [None] * len(starts)
        first_failure: list[str] = []  # names the range in the error, if one is raised

        def attempt() -> list[bytes]:
            missing = [i for i, data in enumerate(out) if data is None]
            ready = None if on_ready is None else lambda positions, pieces: on_ready([missing[p] for p in positions],
                                                                                      pieces)
            got = fetch_ranges(fs, path, [starts[i] for i in missing], [stops[i] for i in missing],
                               max_gap=max_gap, request_options=self._request_kwargs(fs), on_ready=ready)
            failure, sizes = None, []
            for i, answer in zip(missing, got):
                try:
                    out[i] = self._checked_answer(starts[i], stops[i], answer, sizes=sizes)
                except Exception as exc:  # noqa: BLE001 - classified by retried()
                    # A range past the end of the file, or a file that changed, is final: it is
                    # the one raised, so the batch is not tried again for a transient failure beside it.
                    final = (FileEndedError, FileChangedError)
                    if failure is None or (isinstance(exc, final) and not isinstance(failure[1], final)):
                        failure = (i, exc)
            if failure is not None:
                i, exc = failure
                first_failure[:] = [f"bytes {starts[i]}-{stops[i]} of {self.url}"]
                raise exc
            return out

        return retried(attempt, policy=self.retry, describe=lambda: (
            first_failure[0] if first_failure else f"{len(starts)} byte ranges of {self.url}"))

    def _checked_answer(self, start: int, stop: int, answer, *, sizes: list, exact: bool = True) -> bytes:
        """A remote answer (bytes, or the error the read raised) if it is exactly the range; else why not.

        A short answer or a 416 asks the file's size, once an attempt (``sizes``
        keeps it): a file shorter than ``stop`` is a :class:`FileEndedError`,
        anything else a body cut off in transit, which another try may get whole.
        """
        if isinstance(answer, BaseException):
            if not is_past_the_end(answer):
                raise self._changed(answer)
            answer = b""  # the range starts at or after the end of the file
        if len(answer) < stop - start and exact:
            if not sizes:
                sizes.append(FileIdentity.of_info(info(*self._read_fs_path)))
            now, pinned = sizes[0], self._pin.identity
            if pinned is not None and pinned.etag is not None and now.etag != pinned.etag:
                # a file replaced since it was opened, not one cut short
                raise FileChangedError(self.url, pinned, now)
            if now.size is not None and now.size < stop:
                raise FileEndedError(self.url, start, stop, now.size)
            raise TransientReadError(f"short read from {self.url}: bytes {start}-{stop} gave {len(answer)} bytes")
        _check_not_longer(self.url, start, stop, answer)
        return answer

    def size(self) -> int:
        """The file's size in bytes: a stat locally, one request remotely."""
        if self.is_local:
            return os.stat(self.local_path).st_size
        fs, path = self._read_fs_path
        return int(retried(lambda: fs.size(path), policy=self.retry, describe=f"the size of {self.url}"))


def _check_not_longer(url: str, start: int, stop: int, data: bytes) -> None:
    if len(data) > stop - start:
        # A server that ignored the Range header sent the whole object; the bytes
        # cannot be trusted to start where they should, and asking again will not help.
        raise OSError(f"server ignored the byte range: {url} bytes {start}-{stop} gave {len(data)} bytes")


def _check_local(url: str, start: int, stop: int, data: bytes, size: int, *, exact: bool) -> None:
    if len(data) == stop - start or not exact:
        return
    if size < stop:
        raise FileEndedError(url, start, stop, size)
    raise OSError(f"short read from {url}: bytes {start}-{stop} gave {len(data)} bytes")


def _pread_many(path: str, starts, stops, keep_to=None) -> tuple[list[bytes], int]:
    """The ranges, and the file's size as the descriptor saw it; ``keep_to(identity)`` first refuses another file."""
    # A bare descriptor, not a buffered file object: a frame read is then one
    # open, one pread per range and one close, with no read-ahead.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        stat = os.fstat(fd)
        if keep_to is not None:
            # the path is opened again for each read: this descriptor's file must be the one opened
            keep_to(FileIdentity.of_stat(stat))
        # Ask for no more than the file holds: pread allocates what it is asked for
        # first, and a damaged blob may claim frames of gigabytes.  The caller's
        # length check then reports the short read, with this size.
        size = stat.st_size
        return [os.pread(fd, max(0, min(b, size) - a), a) for a, b in zip(starts, stops)], size
    finally:
        os.close(fd)


def read_bytes(path_or_url, storage_options=None, retry: RetryPolicy = DEFAULT_POLICY, *,
               max_size: int | None = None, claimed_size=None) -> bytes:
    """A whole (small) file, such as a header blob beside its image; remotely, under ``retry``.

    With ``max_size``, at most ``max_size + 1`` bytes are read, so a caller
    refuses a larger file (``/dev/zero``, an image given by mistake) without
    reading it whole.  ``claimed_size(first_bytes)`` says how long the content
    itself claims to be (``None``: it cannot tell): a local file is then read
    no further than that, and a remote answer shorter than that is a body cut
    off in transit, tried again under ``retry``; when the tries run out, the
    last answer is returned for the caller to judge.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.rumi.header"; _ = p.write_bytes(b"blob")
    >>> read_bytes(p), read_bytes(p, max_size=2)
    (b'blob', b'blo')
    """
    url = os.fspath(path_or_url)
    limit = None if max_size is None else max_size + 1
    if is_local(url):
        with fsspec.open(url, "rb", **(storage_options or {})) as f:
            return _read_local(f, limit, claimed_size)
    fs, path = single_try_file_system(url, storage_options)
    last: list[bytes] = []

    def attempt() -> bytes:
        try:
            data = fs.cat_file(path) if limit is None else fs.cat_file(path, start=0, end=limit)
        except Exception as exc:  # noqa: BLE001 - a 416 is an empty file's answer to a range
            if not is_past_the_end(exc):
                raise
            data = b""
        last[:] = [data]
        claimed = claimed_size(data) if claimed_size is not None else None
        if claimed is not None and len(data) < claimed:
            raise _CutShort(f"short read from {url}: {len(data)} bytes, where its content says {claimed}")
        return data

    try:
        return retried(attempt, policy=retry, describe=url)
    except OSError as exc:
        if isinstance(exc, _CutShort) or isinstance(exc.__cause__, _CutShort):
            return last[0]  # what the content claims is then for the caller to refuse
        raise


class _CutShort(TransientReadError):
    """A whole-file answer shorter than its own content says it is."""


def _read_local(f, limit: int | None, claimed_size) -> bytes:
    if claimed_size is None:
        return f.read() if limit is None else f.read(limit)
    head = f.read(64)
    claimed = claimed_size(head)
    if claimed is None:
        return head  # its first bytes already say it is not what was asked for
    # One byte past the claim shows a longer file, which the caller refuses.
    rest = claimed + 1 - len(head)
    if limit is not None:
        rest = min(rest, limit - len(head))
    return head + f.read(max(rest, 0))
