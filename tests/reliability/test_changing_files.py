"""Files that change under a reader: rewritten in place, or replaced atomically, between or during reads.

A read keeps to the version of the file it opened: locally each read's
descriptor is checked against it (device, inode, size, modification time),
remotely each request carries its ETag (``If-Match``), so a changed file is a
``FileChangedError`` (an ``OSError``) naming it, never bytes of two files.  The
record of checked (file, blob) pairs names the version it checked, so a file
rewritten in place is checked again against an old blob, which is refused.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr
from flaky_server import FlakyProxy
from servers import RangeServer

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.io.source import FileChangedError

CRS, TRANSFORM = 32618, (30, 0, 500000, 0, -30, 4000000)
SHAPE, TILE = (1, 64, 64), 16  # 16 frames
UINT16 = np.full(SHAPE, 35025, np.uint16)
INT16 = UINT16.view(np.int16)  # -30511: the same bytes, another type


def _layout(value: int) -> np.ndarray:
    """Frames of one value each: files of two values have the same frame sizes, so a blob of one fits the other."""
    return np.full(SHAPE, value, np.uint16)


def _open(path, blob=None, mode="blob+georeferencing", **kwargs):
    if mode == "ifd":
        return xr.open_dataset(path, engine="rumi", **kwargs)
    if mode == "blob":
        return xr.open_dataset(path, engine="rumi", header=blob, **kwargs)
    return xr.open_dataset(path, engine="rumi", header=blob, crs=CRS, transform=TRANSFORM, **kwargs)


# -- the record of checked pairs names the version it checked -------------------------------------------


@pytest.mark.parametrize("mode", ["blob+georeferencing", "blob"])
def test_a_file_rewritten_in_place_is_checked_again_against_an_old_blob(tmp_path, mode):
    path = tmp_path / "scene.rumi"
    old_blob = xarray_rumi.write(path, UINT16, tile_size=TILE, crs=CRS, transform=TRANSFORM)
    assert int(_open(path, old_blob, mode).band_data[0, 0, 0]) == 35025   # checked, and recorded
    xarray_rumi.write(path, INT16, tile_size=TILE, crs=CRS, transform=TRANSFORM)
    assert int(_open(path, mode="ifd").band_data[0, 0, 0]) == -30511
    with pytest.raises(RumiFormatError, match="blob.matches-file: blob says uint16"):
        _open(path, old_blob, mode).band_data.values


def test_open_cube_checks_a_rewritten_file_again(tmp_path):
    path = tmp_path / "scene.rumi"
    old_blob = xarray_rumi.write(path, UINT16, tile_size=TILE, crs=CRS, transform=TRANSFORM)
    cube = xarray_rumi.open_cube([str(path)], headers=[old_blob], crs=CRS, transform=TRANSFORM)
    assert int(cube.band_data[0, 0, 0, 0]) == 35025
    xarray_rumi.write(path, INT16, tile_size=TILE, crs=CRS, transform=TRANSFORM)
    with pytest.raises(RumiFormatError, match="blob.matches-file"):
        xarray_rumi.open_cube([str(path)], headers=[old_blob], crs=CRS, transform=TRANSFORM).band_data.values


# -- a read keeps to the file it opened (locally) ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["ifd", "blob", "blob+georeferencing"])
@pytest.mark.parametrize("chunks", [None, {}])
def test_an_atomic_replace_between_two_reads_is_refused_never_mixed(tmp_path, mode, chunks):
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, _layout(1), tile_size=TILE, crs=CRS, transform=TRANSFORM)
    ds = _open(path, blob, mode, chunks=chunks)
    assert (ds.band_data[:, :32].values == 1).all()
    assert xarray_rumi.write(path, _layout(2), tile_size=TILE, crs=CRS, transform=TRANSFORM) == blob  # same layout
    with pytest.raises(FileChangedError, match=rf"{path} changed since it was opened: .* open it again"):
        ds.band_data[:, 32:].values
    assert issubclass(FileChangedError, OSError)
    assert (_open(path, blob, mode).band_data.values == 2).all()   # a new open reads the new file


def test_a_file_rewritten_in_place_under_an_open_image_is_refused(tmp_path):
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, _layout(1), tile_size=TILE, crs=CRS, transform=TRANSFORM)
    image = xarray_rumi.open_image(path, header=blob)
    image.read(rows=slice(0, 16))
    with open(path, "r+b") as f:   # same inode, bytes changed in place
        f.seek(-1, os.SEEK_END)
        f.write(b"\0")
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 1_000_000))   # a clock too coarse to tell is not relied on
    with pytest.raises(FileChangedError, match="changed since it was opened"):
        image.read(rows=slice(16, 32))


def test_a_stale_blob_met_during_a_rewrite_says_the_file_changed_not_that_it_is_cut_short(tmp_path):
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, _layout(1), tile_size=TILE, crs=CRS, transform=TRANSFORM)
    image = xarray_rumi.open_image(path, header=blob)
    image.read(rows=slice(0, 16))
    xarray_rumi.write(path, np.zeros((1, 16, 16), np.uint16), tile_size=TILE)   # far shorter now
    with pytest.raises(FileChangedError, match="changed since it was opened") as raised:
        image.read()
    assert "cut" not in str(raised.value)


def test_the_version_an_image_keeps_to_travels_with_it_to_another_process(tmp_path):
    """Dask workers and forked children read the version the image was opened on, or refuse."""
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, _layout(1), tile_size=TILE, crs=CRS, transform=TRANSFORM)
    shipped = tmp_path / "image.pickle"
    shipped.write_bytes(pickle.dumps(xarray_rumi.open_image(path, header=blob)))
    xarray_rumi.write(path, _layout(2), tile_size=TILE, crs=CRS, transform=TRANSFORM)
    script = textwrap.dedent(f"""
        import pickle
        from xarray_rumi.io.source import FileChangedError
        image = pickle.loads(open({str(shipped)!r}, "rb").read())
        try:
            image.read()
        except FileChangedError as error:
            print("refused:", error)
        else:
            print("read")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=os.getcwd(),
                         env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=120)
    assert out.stdout.startswith("refused:") and "changed since it was opened" in out.stdout, out.stderr


# -- remotely: the ETag -----------------------------------------------------------------------------------


@pytest.fixture
def one_frame_a_request(monkeypatch):
    """The read engine sends each frame in a request of its own, as a read larger than one merged request does."""
    from xarray_rumi.io import engine, source

    monkeypatch.setattr(source, "fetch_ranges", lambda *args, **kwargs: engine.fetch_ranges(
        *args, **{**kwargs, "max_gap": 0, "max_request": 1}))


def _replace_on(nth: int, replace):
    """A FlakyProxy ``when`` that replaces the file as the ``nth`` ranged GET of a frame arrives, failing none."""
    seen = []

    def when(method, path, headers):
        if method == "GET" and "Range" in headers and headers["Range"] != "bytes=0-251":
            seen.append(headers["Range"])
            if len(seen) == nth:
                replace()
        return False

    return when


def test_over_http_a_file_replaced_between_two_requests_of_one_read_is_refused_never_mixed(tmp_path,
                                                                                          one_frame_a_request):
    blob = xarray_rumi.write(tmp_path / "scene.rumi", _layout(1), tile_size=TILE, crs=CRS, transform=TRANSFORM)
    replace = lambda: xarray_rumi.write(tmp_path / "scene.rumi", _layout(2), tile_size=TILE,  # noqa: E731
                                        crs=CRS, transform=TRANSFORM)
    with RangeServer(str(tmp_path)) as server, FlakyProxy(server.url, when=_replace_on(3, replace)) as proxy:
        ds = _open(f"{proxy.url}/scene.rumi", blob, "blob")
        with pytest.raises(FileChangedError, match=r"scene.rumi changed since it was opened: .*ETag"):
            ds.band_data.values   # one read of 16 frames, the file replaced at its third request
        assert (_open(f"{proxy.url}/scene.rumi", blob, "blob").band_data.values == 2).all()


def test_over_http_a_file_rewritten_in_place_is_checked_again_against_an_old_blob(tmp_path):
    path = tmp_path / "scene.rumi"
    old_blob = xarray_rumi.write(path, UINT16, tile_size=TILE, crs=CRS, transform=TRANSFORM)
    with RangeServer(str(tmp_path)) as server:
        url = f"{server.url}/scene.rumi"
        assert int(_open(url, old_blob).band_data[0, 0, 0]) == 35025
        xarray_rumi.write(path, INT16, tile_size=TILE, crs=CRS, transform=TRANSFORM)
        with pytest.raises(RumiFormatError, match="blob.matches-file: blob says uint16"):
            _open(url, old_blob).band_data.values


@pytest.fixture
def s3(tmp_path):
    s3fs = pytest.importorskip("s3fs")
    from s3_server import s3_server

    with s3_server("bucket") as options:
        yield options, s3fs.S3FileSystem(**options)


def test_on_s3_an_object_replaced_under_an_open_dataset_is_refused_never_mixed(s3):
    options, fs = s3
    url = "s3://bucket/scene.rumi"
    blob = xarray_rumi.write(url, _layout(1), tile_size=TILE, crs=CRS, transform=TRANSFORM, storage_options=options)
    ds = _open(url, blob, "blob", storage_options=options)
    assert (ds.band_data[:, :32].values == 1).all()
    xarray_rumi.write(url, _layout(2), tile_size=TILE, crs=CRS, transform=TRANSFORM, storage_options=options)
    with pytest.raises(FileChangedError, match=r"s3://bucket/scene.rumi changed since it was opened: .*ETag"):
        ds.band_data[:, 32:].values


def test_on_s3_an_object_rewritten_in_place_is_checked_again_against_an_old_blob(s3):
    options, fs = s3
    url = "s3://bucket/scene.rumi"
    old_blob = xarray_rumi.write(url, UINT16, tile_size=TILE, crs=CRS, transform=TRANSFORM, storage_options=options)
    assert int(_open(url, old_blob, storage_options=options).band_data[0, 0, 0]) == 35025
    xarray_rumi.write(url, INT16, tile_size=TILE, crs=CRS, transform=TRANSFORM, storage_options=options)
    with pytest.raises(RumiFormatError, match="blob.matches-file: blob says uint16"):
        _open(url, old_blob, storage_options=options).band_data.values


def test_on_s3_an_object_replaced_between_two_requests_of_one_read_is_refused_never_mixed(s3, tmp_path,
                                                                                        one_frame_a_request):
    import boto3

    options, fs = s3
    url = "s3://bucket/scene.rumi"
    blob = xarray_rumi.write(url, _layout(1), tile_size=TILE, crs=CRS, transform=TRANSFORM, storage_options=options)
    newer = tmp_path / "newer.rumi"
    xarray_rumi.write(newer, _layout(2), tile_size=TILE, crs=CRS, transform=TRANSFORM)
    client = boto3.client("s3", endpoint_url=options["endpoint_url"], aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="eu-west-1")
    replace = lambda: client.put_object(Bucket="bucket", Key="scene.rumi", Body=newer.read_bytes())  # noqa: E731
    with FlakyProxy(options["endpoint_url"], when=_replace_on(3, replace)) as proxy:
        through = dict(options, endpoint_url=proxy.url)
        ds = _open(url, blob, "blob", storage_options=through)
        with pytest.raises(FileChangedError, match=r"s3://bucket/scene.rumi changed since it was opened"):
            ds.band_data.values   # one read of 16 frames, the object replaced at its third request
    assert (_open(url, blob, "blob", storage_options=options).band_data.values == 2).all()
