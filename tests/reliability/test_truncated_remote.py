"""A rumi file cut short, read over HTTP (``RangeServer``) and S3 (moto), each behind a counting ``FlakyProxy``.

An open that reads the IFD or checks a blob takes the file's size from that
read's answer (``Content-Range``, no request of its own) and refuses the
file (``frames.truncated``).  A file cut after its blob
was made, opened from the blob and georeferencing (zero requests), is refused
by the read that meets the missing frame, naming it: the short answer, or the
416 for a frame wholly past the end, is asked for once, never retried, and
the size once, to tell it from a body cut off in transit.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import xarray as xr
from flaky_server import FlakyProxy
from s3_server import s3_server
from servers import RangeServer

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import Header

CRS, TRANSFORM = 32618, (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0)
#: 3 x 3 positions of 2 tile frames each (frame 2p + b is band b of position p), 18 frames.
VALUES = np.random.default_rng(9).integers(0, 4000, (2, 40, 48), dtype=np.uint16)
GEO = {"crs": CRS, "transform": TRANSFORM}


def _cut_file(root):
    """Write the file, keep its blob, then cut it inside frame 5 (band 2, rows 0-15, columns 32-47)."""
    blob = xarray_rumi.write(root / "scene.rumi", VALUES, tile_size=16, write_header=False, **GEO)
    header = Header.from_bytes(blob)
    keep = header.offset(5) + 3
    os.truncate(root / "scene.rumi", keep)
    return blob, header, keep


@pytest.fixture
def http(tmp_path):
    """``(url, proxy, blob, header, kept)``: the cut file over HTTP, every request counted."""
    blob, header, keep = _cut_file(tmp_path)
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url) as proxy:
        yield f"{proxy.url}/scene.rumi", proxy, {}, blob, header, keep


@pytest.fixture
def s3(tmp_path):
    """The same over S3: uploaded to moto, read through the proxy."""
    pytest.importorskip("s3fs")
    blob, header, keep = _cut_file(tmp_path)
    with s3_server("bucket") as options:
        import s3fs

        s3fs.S3FileSystem(**options).put(str(tmp_path / "scene.rumi"), "bucket/scene.rumi")
        with FlakyProxy(options["endpoint_url"]) as proxy:
            yield "s3://bucket/scene.rumi", proxy, dict(options, endpoint_url=proxy.url), blob, header, keep


@pytest.fixture(params=["http", "s3"])
def remote(request):
    return request.getfixturevalue(request.param)


def _requests(proxy) -> list[tuple[str, str | None]]:
    """``(method, Range)`` of the file's requests (S3 also sends a few of its own, for the bucket)."""
    return [(r.method, r.range) for r in proxy.requests if "scene.rumi" in r.path]


def _range(header, k: int) -> str:
    start, stop = header.offset(k), header.offset(k + 1)
    return f"bytes={start}-{stop - 1}"


def test_a_file_cut_after_its_blob_was_made_is_refused_by_the_read_naming_the_frame(remote, no_read_ahead):
    """Request counts without the read-ahead (frames 0-3 then 5 look like a sweep; its spans are refused alike)."""
    url, proxy, options, blob, header, keep = remote
    ds = xr.open_dataset(url, engine="rumi", header=blob, chunks={}, storage_options=options, **GEO)
    assert _requests(proxy) == []   # the open reads nothing
    np.testing.assert_array_equal(ds.band_data[:, :16, :32].values, VALUES[:, :16, :32])   # frames 0-3
    proxy.requests.clear()
    frame = re.escape(f"frames.truncated: frame 5 (bytes {header.offset(5)}-{header.offset(6)}) runs past the end "
                      f"of {url}, which is {keep} bytes; its frames end at byte {header.frames_end}")
    with pytest.raises(RumiFormatError, match=frame):
        ds.band_data[1, :16, 32:].values   # exactly frame 5, cut short
    # Asked once, not once an attempt; then the size, once.
    assert _requests(proxy) == [("GET", _range(header, 5)), ("HEAD", None)]
    proxy.requests.clear()
    with pytest.raises(RumiFormatError, match=re.escape(f"frames.truncated: frame 8 (bytes {header.offset(8)}-")):
        ds.band_data[0, 16:32, 16:32].values   # frame 8 lies wholly past the end: the store answers 416
    assert _requests(proxy) == [("GET", _range(header, 8)), ("HEAD", None)]


def test_lazy_reads_and_cubes_are_refused_alike(remote):
    url, proxy, options, blob, header, keep = remote
    lazy = xr.open_dataset(url, engine="rumi", header=blob, storage_options=options, **GEO)
    with pytest.raises(RumiFormatError, match="frames.truncated: frame 5 "):
        lazy.band_data.values
    proxy.requests.clear()
    cube = xarray_rumi.open_cube([url, url], [blob, blob], storage_options=options, chunks={}, **GEO)
    assert _requests(proxy) == []
    with pytest.raises(RumiFormatError, match=r"frames\.truncated: frame \d+ \(bytes"):
        cube.band_data.values


def test_an_open_that_reads_the_ifd_or_checks_the_blob_refuses_the_file_its_answer_says_is_cut(remote):
    url, proxy, options, blob, header, keep = remote
    refusal = rf"frames\.truncated: (the file|{re.escape(url)}) " + re.escape(
        f"is {keep} bytes, but its frames end at byte {header.frames_end}")
    missing = re.escape(f" ({header.frames_end - keep} bytes missing): frame 5 of 18 is the first cut short")
    with pytest.raises(RumiFormatError, match=refusal + missing):
        xarray_rumi.open_image(url, storage_options=options)
    assert [method for method, _ in _requests(proxy)] == ["GET"]   # the IFD; its answer states the size
    proxy.requests.clear()
    with pytest.raises(RumiFormatError, match=refusal):
        xarray_rumi.open_image(url, blob, storage_options=options)
    # georeferencing and IFD head in one GET (xarray_rumi.io.engine), whose answer states the size
    assert [method for method, _ in _requests(proxy)] == ["GET"]
