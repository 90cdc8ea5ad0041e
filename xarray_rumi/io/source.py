"""Exact byte ranges from a local path or any fsspec URL.

A :class:`ByteSource` is a small picklable value (a URL and its storage
options): Dask tasks carry it to worker processes, where the file system is
looked up again (fsspec caches instances, so it is reused across tasks).
Local files are read with ``os.pread``; nothing is read ahead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property

import fsspec
from fsspec.core import url_to_fs


def _is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


@dataclass(frozen=True)
class ByteSource:
    """Where a file lives.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"; _ = p.write_bytes(b"abcdef")
    >>> ByteSource(str(p)).read(1, 4)
    b'bcd'
    """

    url: str
    storage_options: dict = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def of(cls, path, storage_options=None) -> ByteSource:
        return cls(os.fspath(path), dict(storage_options or {}))

    @property
    def is_local(self) -> bool:
        return _is_local(self.url)

    @cached_property
    def local_path(self) -> str:
        return self.url[len("file://"):] if self.url.startswith("file://") else self.url

    @cached_property
    def _fs_path(self):
        return url_to_fs(self.url, **self.storage_options)

    def __getstate__(self):
        # Ship only the address; file systems are looked up again where used.
        return {"url": self.url, "storage_options": self.storage_options}

    def __setstate__(self, state):
        object.__setattr__(self, "url", state["url"])
        object.__setattr__(self, "storage_options", state["storage_options"])

    def read(self, start: int, stop: int, *, exact: bool = True) -> bytes:
        """Bytes ``[start, stop)``; with ``exact``, a short read raises ``OSError``."""
        if self.is_local:
            data = _pread_many(self.local_path, [start], [stop])[0]
        else:
            fs, path = self._fs_path
            data = fs.cat_file(path, start=start, end=stop)
        if exact:
            _check_length(self.url, start, stop, data)
        return data

    def read_many(self, starts, stops) -> list[bytes]:
        """Several exact ranges; remote ones go out together through ``cat_ranges``."""
        starts, stops = [int(s) for s in starts], [int(s) for s in stops]
        if self.is_local:
            out = _pread_many(self.local_path, starts, stops)
        else:
            fs, path = self._fs_path
            out = fs.cat_ranges([path] * len(starts), starts, stops)
        for data, a, b in zip(out, starts, stops):
            if isinstance(data, Exception):
                raise OSError(f"cannot read bytes {a}-{b} of {self.url}: {data}") from data
            _check_length(self.url, a, b, data)
        return out

    def size(self) -> int:
        if self.is_local:
            return os.stat(self.local_path).st_size
        fs, path = self._fs_path
        return int(fs.size(path))


def _check_length(url: str, start: int, stop: int, data: bytes) -> None:
    if len(data) == stop - start:
        return
    # Longer than asked: a server that ignored the Range header sent the whole
    # object; the bytes cannot be trusted to start where they should.
    kind = "short read" if len(data) < stop - start else "server ignored the byte range"
    raise OSError(f"{kind} from {url}: bytes {start}-{stop} gave {len(data)} bytes")


def _pread_many(path: str, starts, stops) -> list[bytes]:
    # A bare descriptor, not a buffered file object: a frame read is then one
    # open, one pread per range and one close, with no read-ahead.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        return [os.pread(fd, b - a, a) for a, b in zip(starts, stops)]
    finally:
        os.close(fd)


def read_bytes(path_or_url, storage_options=None) -> bytes:
    """A whole (small) file, such as a header blob beside its image."""
    with fsspec.open(os.fspath(path_or_url), "rb", **(storage_options or {})) as f:
        return f.read()
