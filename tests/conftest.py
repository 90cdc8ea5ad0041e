"""Shared fixtures: real rasters from ../shared/data, temporary paths."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests/servers.py

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> pathlib.Path:
    """The real test rasters; tests that need them skip, saying why, without them."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real rasters not found at {SHARED_DATA} (../shared/data beside the repository)")
    return SHARED_DATA


@pytest.fixture
def http_server(tmp_path):
    """A Range-honouring HTTP server for ``tmp_path`` that counts its requests."""
    from servers import RangeServer

    with RangeServer(str(tmp_path)) as server:
        yield server


@pytest.fixture
def unmerged_requests(monkeypatch):
    """The read engine sends each range in a request of its own, so a server's log shows the ranges a read asks for.

    Also what a read larger than one merged request (2 MiB) does: its requests are many.
    """
    from xarray_rumi.io import engine, source

    monkeypatch.setattr(source, "fetch_ranges", lambda *args, **kwargs: engine.fetch_ranges(
        *args, **{**kwargs, "max_gap": 0, "max_request": 1}))


@pytest.fixture
def no_read_ahead(monkeypatch):
    """Remote whole-frame reads fetch their own frame only, for tests that count what a check (not a sweep) asks.

    Concurrent reads of neighbouring frames look like a sweep to the read-ahead, which then fetches
    frames of the band that no read asked for (``xarray_rumi.reading.readahead``).
    """
    from xarray_rumi.reading import readahead

    monkeypatch.setattr(readahead, "_key", lambda image: None)
