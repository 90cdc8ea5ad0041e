"""Paths and URLs: telling them apart, and the one form each consumer wants (unencoded: fsspec, obstore and
Kerchunk take a path with a space as it is)."""

from __future__ import annotations

import os

FILE_SCHEME = "file://"


def is_url(location) -> bool:
    """Whether ``location`` is written as a URL (``file://`` included), not as a bare path."""
    return "://" in os.fspath(location)


def is_local(location) -> bool:
    """Whether ``location`` is a file on this machine: a bare path or a ``file://`` URL."""
    location = os.fspath(location)
    return not is_url(location) or location.startswith(FILE_SCHEME)


def local_path(location) -> str:
    """The path of a local ``location``: a bare path as it is, a ``file://`` URL without its scheme."""
    return os.fspath(location).removeprefix(FILE_SCHEME)


def absolute(location) -> str:
    """A URL as it is; a local file as an absolute path (what Kerchunk references point at)."""
    location = os.fspath(location)
    return os.path.abspath(local_path(location)) if is_local(location) else location


def as_url(location) -> str:
    """A URL as it is; a local file as a ``file://`` URL of its absolute path (what object stores resolve)."""
    location = os.fspath(location)
    return FILE_SCHEME + absolute(location) if is_local(location) else location


__all__ = ["FILE_SCHEME", "absolute", "as_url", "is_local", "is_url", "local_path"]
