"""A source's first remote read states the file's version (size, ETag) in its own answer: no HEAD before it.

Over HTTP (``RangeServer``) and S3 (moto), each behind a counting ``FlakyProxy``.
"""

from __future__ import annotations

import fsspec
import numpy as np
import pytest
from flaky_server import FlakyProxy
from s3_server import s3_server
from servers import RangeServer

import xarray_rumi
from xarray_rumi.format.blob import Header
from xarray_rumi.io import ranged
from xarray_rumi.io.retry import RetryPolicy
from xarray_rumi.io.source import ByteSource
from xarray_rumi.io.versions import FileChangedError, FileIdentity, info

POLICY = RetryPolicy(attempts=3, backoff=0.001)
CRS, TRANSFORM = 32618, (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0)
VALUES = np.random.default_rng(3).integers(0, 4000, (2, 40, 48), dtype=np.uint16)


@pytest.fixture
def http(tmp_path):
    """``(url of the file, url of its blob, proxy, storage options, blob)`` over HTTP."""
    blob = xarray_rumi.write(tmp_path / "scene.rumi", VALUES, tile_size=16, crs=CRS, transform=TRANSFORM)
    with RangeServer(str(tmp_path)) as origin, FlakyProxy(origin.url) as proxy:
        yield f"{proxy.url}/scene.rumi", f"{proxy.url}/scene.rumi.header", proxy, {}, blob


@pytest.fixture
def s3(tmp_path):
    pytest.importorskip("s3fs")
    blob = xarray_rumi.write(tmp_path / "scene.rumi", VALUES, tile_size=16, crs=CRS, transform=TRANSFORM)
    with s3_server("bucket") as options:
        import s3fs

        fs = s3fs.S3FileSystem(**options)
        fs.put(str(tmp_path / "scene.rumi"), "bucket/scene.rumi")
        fs.put(str(tmp_path / "scene.rumi.header"), "bucket/scene.rumi.header")
        with FlakyProxy(options["endpoint_url"]) as proxy:
            through = dict(options, endpoint_url=proxy.url)
            yield "s3://bucket/scene.rumi", "s3://bucket/scene.rumi.header", proxy, through, blob


@pytest.fixture(params=["http", "s3"])
def remote(request):
    return request.getfixturevalue(request.param)


def _file_requests(proxy) -> list[str]:
    """The methods of the requests for the image (S3 also asks about its bucket)."""
    return [r.method for r in proxy.requests if r.path.split("?")[0].endswith("scene.rumi")]


def test_a_first_read_pins_the_version_its_answer_states_as_a_head_would(remote):
    url, _, proxy, options, _ = remote
    data = open_bytes(remote)
    proxy.requests.clear()
    source = ByteSource(url, options, POLICY)
    assert source.pins_on_read and source.identity is None
    assert source.read(10, 20) == data[10:20]
    assert _file_requests(proxy) == ["GET"]
    stated = source.identity
    asked = FileIdentity.of_info(info(*source._read_fs_path))   # what a HEAD says: the same version
    assert (stated.size, stated.etag) == (asked.size, asked.etag) and stated.size == len(data) and stated.etag


def open_bytes(remote) -> bytes:
    url, _, _, options, _ = remote
    with fsspec.open(url, "rb", **options) as f:
        return f.read()


def test_with_the_blobs_url_an_open_is_one_round_trip_and_no_head(remote):
    url, blob_url, proxy, options, blob = remote
    image = xarray_rumi.open_image(url, header=blob_url, storage_options=options)
    assert _file_requests(proxy) == ["GET"]   # the head, beside the blob's GET
    assert "HEAD" not in [r.method for r in proxy.requests if "scene.rumi" in r.path]
    assert image.opened_size == len(open_bytes(remote)) and image.georeferencing.epsg == CRS
    proxy.requests.clear()
    np.testing.assert_array_equal(image.read(), VALUES)   # checked at open: frames only, If-Match
    assert set(_file_requests(proxy)) == {"GET"}


def test_with_the_blobs_bytes_and_georeferencing_the_first_read_sends_no_head(remote):
    url, _, proxy, options, blob = remote
    image = xarray_rumi.open_image(url, header=blob, crs=CRS, transform=TRANSFORM, storage_options=options)
    assert _file_requests(proxy) == []
    np.testing.assert_array_equal(image.read(), VALUES)
    assert set(_file_requests(proxy)) == {"GET"} and image.source.identity is not None
    assert image.file_size == len(open_bytes(remote))


def test_answers_of_two_versions_in_one_first_read_are_a_changed_file(http, monkeypatch):
    url, _, proxy, options, _ = http
    real = ranged._get_http

    async def two_versions(fs, url, start, stop, options):
        body, stated = await real(fs, url, start, stop, options)
        return body, stated if start == 0 else FileIdentity(stated.size, etag='"another"')

    monkeypatch.setattr(ranged, "_get_http", two_versions)
    source = ByteSource(url, options, POLICY)
    with pytest.raises(FileChangedError, match='it is now .* ETag "another"'):
        source.read_many([0, 2000], [10, 2010], max_gap=0)   # two requests, the second answered by another file


def test_a_file_system_that_states_no_version_is_asked_it_first():
    fs = fsspec.filesystem("memory")
    path = xarray_rumi.write("memory://ranged/scene.rumi", VALUES, tile_size=16, crs=CRS, transform=TRANSFORM)
    assert not ranged.reports_versions(fs)
    image = xarray_rumi.open_image("memory://ranged/scene.rumi", header=path)
    assert not image.source.pins_on_read and image.source.identity.size == fs.size("/ranged/scene.rumi")
    np.testing.assert_array_equal(image.read(), VALUES)


def test_a_blob_checked_in_another_version_is_checked_again_when_the_first_answer_says_so(http, tmp_path):
    """A pair checked once reads no head beside its frames; an answer of another version brings the check back."""
    url, _, proxy, options, blob = http
    frames = Header.from_bytes(blob)
    window = {"rows": slice(0, 16), "cols": slice(0, 16)}   # frames 0 and 1: the first position's two bands

    def open_it():
        return xarray_rumi.open_image(url, header=blob, crs=CRS, transform=TRANSFORM, storage_options=options)

    open_it().read(**window)   # checks the blob, its head and tags riding with the frames
    proxy.requests.clear()
    np.testing.assert_array_equal(open_it().read(**window), VALUES[:, :16, :16])
    asked = sorted(tuple(int(n) for n in r.range.removeprefix("bytes=").split("-")) for r in proxy.requests)
    assert asked[0][0] == frames.offset(0) and asked[-1][1] == frames.offset(2) - 1   # frames only
    xarray_rumi.write(tmp_path / "scene.rumi", VALUES.astype("int16"), tile_size=16, crs=CRS, transform=TRANSFORM)
    proxy.requests.clear()
    with pytest.raises(xarray_rumi.RumiFormatError, match="blob.matches-file: blob says uint16"):
        open_it().read(**window)
    # the frames, then the head their answer called for
    assert [r.method for r in proxy.requests] == ["GET"] * (len(asked) + 1)
    assert proxy.requests[-1].range.startswith("bytes=0-")
