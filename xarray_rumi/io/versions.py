"""Which version of a file a read keeps to, and how a store is held to it (``If-Match``; docs/backend.md)."""

from __future__ import annotations

import datetime
import os
import sys
import threading
import weakref
from dataclasses import dataclass

from ..runtime.fork import in_forked_child


@dataclass(frozen=True)
class FileIdentity:
    """Which version of a file: its size and, locally, device, inode and mtime; remotely ETag and version id."""

    size: int | None
    device: int | None = None
    inode: int | None = None
    mtime_ns: int | None = None
    etag: str | None = None
    version_id: str | None = None

    @classmethod
    def of_stat(cls, stat: os.stat_result) -> FileIdentity:
        return cls(stat.st_size, stat.st_dev, stat.st_ino, stat.st_mtime_ns)

    @classmethod
    def of_info(cls, info: dict) -> FileIdentity:
        etag = info.get("ETag") or info.get("etag")
        version = info.get("VersionId") or info.get("version_id")
        size = info.get("size")  # None without Content-Length
        return cls(None if size is None else int(size), etag=etag,
                   version_id=version if version not in ("null", "") else None)

    def describe(self) -> str:
        parts = [f"{self.size} bytes" if self.size is not None else "size unknown"]
        if self.inode is not None:
            modified = datetime.datetime.fromtimestamp(self.mtime_ns / 1e9, datetime.timezone.utc)
            parts.append(f"inode {self.inode}, modified {modified.isoformat(timespec='microseconds')}")
        if self.etag is not None:
            parts.append(f"ETag {self.etag}")
        if self.version_id is not None:
            parts.append(f"version {self.version_id}")
        return ", ".join(parts)

    def key(self) -> bytes:
        """These fields as bytes, for keys that must change when the file does."""
        return repr((self.size, self.device, self.inode, self.mtime_ns, self.etag, self.version_id)).encode()


class FileChangedError(OSError):
    """The file is no longer the version a source opened (``now``: ``None`` after a 412); never retried."""

    def __init__(self, url: str, was: FileIdentity, now: FileIdentity | None) -> None:
        self.url, self.was, self.now = url, was, now
        now_text = now.describe() if now is not None else "another version (the store refused its ETag)"
        super().__init__(f"{url} changed since it was opened: it was {was.describe()}, it is now {now_text}; "
                         "a read keeps to the file it opened: open it again to read the new one")

    def __reduce__(self):
        return type(self), (self.url, self.was, self.now)


class _Pin:
    """The version a source keeps to, shared by the source's copies in a process."""

    __slots__ = ("token", "identity", "lock", "__weakref__")

    def __init__(self, token: str, identity: FileIdentity | None) -> None:
        self.token, self.identity, self.lock = token, identity, threading.Lock()


#: By token: a source unpickled here again finds its own.
_pins: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def pin_for(token: str, identity: FileIdentity | None) -> _Pin:
    pin = _pins.get(token)
    if pin is None:
        pin = _pins.setdefault(token, _Pin(token, identity))
    if pin.identity is None and identity is not None:
        pin.identity = identity
    return pin


def unlock_pins() -> None:
    # A lock held by another thread at fork time would never be released in the child.
    for pin in list(_pins.values()):
        pin.lock = threading.Lock()


def info(fs, path: str) -> dict:
    """``fs.info(path)`` from the store itself, not s3fs's listings cache, which a rewrite outdates."""
    s3fs = sys.modules.get("s3fs")
    if s3fs is not None and isinstance(fs, s3fs.S3FileSystem):
        return fs.info(path, refresh=True)
    return fs.info(path)


def if_match(fs, etag: str | None) -> dict:
    """The keyword arguments that make ``fs.cat_file``/``cat_ranges`` refuse any version but ``etag``.

    >>> import fsspec
    >>> http = fsspec.filesystem("http")
    >>> if_match(http, '"abc"'), if_match(http, 'W/"abc"'), if_match(fsspec.filesystem("memory"), '"abc"')
    ({'headers': {'If-Match': '"abc"'}}, {}, {})
    """
    if etag is None or etag.startswith("W/"):  # If-Match compares strongly: a weak ETag would refuse every read
        return {}
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    if "http" in protocols or "https" in protocols:
        # a call's headers replace the file system's: keep the caller's
        return {"headers": {**getattr(fs, "kwargs", {}).get("headers", {}), "If-Match": etag}}
    if type(fs).__name__ == "SingleTryS3FileSystem":
        return {"if_match": etag}
    return {}


in_forked_child(unlock_pins)


__all__ = ["FileChangedError", "FileIdentity", "if_match", "info", "pin_for"]
