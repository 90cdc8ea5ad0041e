"""io/urls.py: the one answer to "is this a URL, is it local, which form does a consumer want"."""

from __future__ import annotations

import os
import pathlib

import pytest

from xarray_rumi.io.source import ByteSource
from xarray_rumi.io.urls import absolute, as_url, is_local, is_url, local_path

LOCATIONS = {
    # location: (is_url, is_local)
    "a.rumi": (False, True),
    "/data/a b.rumi": (False, True),
    "file:///data/a.rumi": (True, True),
    "https://example.com/a.rumi": (True, False),
    "s3://bucket/a.rumi": (True, False),
    "simplecache::s3://bucket/a.rumi": (True, False),
}


@pytest.mark.parametrize("location", LOCATIONS)
def test_kinds(location):
    assert (is_url(location), is_local(location)) == LOCATIONS[location]
    assert is_local(pathlib.Path("a.rumi"))   # os.PathLike too


@pytest.mark.parametrize("location", LOCATIONS)
def test_forms(location):
    if is_local(location):
        path = os.path.abspath(local_path(location))
        assert absolute(location) == path and os.path.isabs(path)
        assert as_url(location) == "file://" + path   # never percent-encoded: obstore looks %20 up literally
        assert absolute(as_url(location)) == absolute(location)
    else:
        assert absolute(location) == as_url(location) == location


def test_byte_sources_read_file_urls_locally(tmp_path):
    path = tmp_path / "with space.bin"
    path.write_bytes(b"abcdef")
    source = ByteSource(as_url(path))
    assert source.is_local and source.local_path == str(path)
    assert source.read(1, 3) == b"bc"
