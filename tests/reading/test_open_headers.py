"""load_headers: the blobs of many images at once, each checked, the one refused named by its image."""

from __future__ import annotations

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi import Limits, RumiFormatError
from xarray_rumi.format.blob import Header, pack_residuals
from xarray_rumi.io.source import ByteSource
from xarray_rumi.reading.open import load_headers


@pytest.fixture
def blobs(tmp_path):
    """Three images of one grid (distinct content, so distinct blobs) and their paths."""
    paths = [str(tmp_path / f"t{i}.rumi") for i in range(3)]
    rng = np.random.default_rng(0)
    blobs = [xarray_rumi.write(p, rng.integers(0, 50 * (i + 1), (1, 70, 90), dtype="uint16"), tile_size=16,
                               frame_unit="tile", compression="portable") for i, p in enumerate(paths)]
    assert len(set(blobs)) == 3 and len({b[:23] for b in blobs}) == 1
    return paths, blobs


def test_every_kind_of_entry(blobs, tmp_path):
    paths, blob_bytes = blobs
    sidecar = tmp_path / "t2.header"
    sidecar.write_bytes(blob_bytes[2])
    given = Header.from_bytes(blob_bytes[1])
    headers = load_headers([blob_bytes[0], given, str(sidecar), None, bytearray(blob_bytes[0])],
                           [*paths, "t3", "t4"])
    assert headers[0] == Header.from_bytes(blob_bytes[0]) and headers[1] is given
    assert headers[2].to_bytes() == blob_bytes[2] and headers[3] is None and headers[4] is headers[0]


def test_a_damaged_blob_is_refused_naming_its_image(blobs):
    paths, blob_bytes = blobs
    header = Header.from_bytes(blob_bytes[1])
    # the smallest residual one more: the same length as the good blob, but count_min is no longer the minimum
    residuals = header.residuals()
    residuals[residuals == 0] = 1
    shifted = blob_bytes[1][:28] + pack_residuals(residuals, header.count_bits)
    assert len(shifted) == len(blob_bytes[1]) and shifted != blob_bytes[1]
    with pytest.raises(RumiFormatError) as info:
        load_headers([blob_bytes[0], None, shifted], paths)
    assert info.value.rule == "blob.canonical"
    assert info.value.detail.startswith(f"image 2 ({paths[2]!r}): count_min")


def test_limits_are_the_callers(blobs):
    paths, blob_bytes = blobs
    with pytest.raises(RumiFormatError, match=r"blob.limits: image 0 \(.*t0.rumi'\)"):
        load_headers(blob_bytes, paths, limits=Limits(max_frame_byte_count=8))


def test_refusals_of_the_arguments(blobs):
    paths, blob_bytes = blobs
    with pytest.raises(TypeError, match=r"got int for image 1 \('.*t1.rumi'\)"):
        load_headers([blob_bytes[0], 7, None], paths)
    with pytest.raises(ValueError, match="3 images but 2 headers"):
        load_headers(blob_bytes[:2], paths)


def test_an_image_opened_with_a_checked_header_reads_right(blobs):
    """The Header a batch gives is what open_image uses: it locates the same frames as one parsed alone."""
    paths, blob_bytes = blobs
    headers = load_headers(blob_bytes, paths)
    for path, blob, header in zip(paths, blob_bytes, headers):
        image = xarray_rumi.open_image(path, header=header)
        np.testing.assert_array_equal(image.read(), xarray_rumi.open_image(path, header=blob).read())
        assert ByteSource.of(path).size() == header.frames_end


def test_a_cube_of_remote_images_opens_in_two_round_trips_of_concurrent_requests(blobs):
    """Six images by blob URL: the six blobs at once, then the six heads (georeferencing + IFD head) at once."""
    import os
    import time

    from servers import RangeServer

    paths, blob_bytes = blobs
    root = os.path.dirname(paths[0])
    names = [f"c{i}.rumi" for i in range(6)]
    for i, name in enumerate(names):
        os.link(paths[i % 3], f"{root}/{name}")
        with open(f"{root}/{name}.header", "wb") as f:
            f.write(blob_bytes[i % 3])
    with RangeServer(root, latency=0.5) as server:
        urls = [f"{server.url}/{name}" for name in names]
        xarray_rumi.open_cube(urls[:1], headers=[blob_bytes[0]])   # the process's first HTTP use is slower
        server.take_stats()
        started = time.perf_counter()
        cube = xarray_rumi.open_cube(urls, headers=[f"{url}.header" for url in urls])
        seconds = time.perf_counter() - started
        stats = server.take_stats()
    assert stats["gets"] == 12 and stats["peak_in_flight"] == 6
    assert seconds < 4 * server.latency   # two round trips; one a request: twelve
    assert cube.band_data.shape == (6, 1, 70, 90)


def test_open_images_raises_the_first_images_error_in_order(blobs, tmp_path):
    from xarray_rumi.reading.open import open_images

    paths, blob_bytes = blobs
    with pytest.raises(FileNotFoundError, match="missing"):
        open_images([paths[0], str(tmp_path / "missing.rumi"), paths[1]], [blob_bytes[0], blob_bytes[1], blob_bytes[2]])


@pytest.mark.parametrize("georeferenced", [False, True])
def test_opens_that_ask_the_network_nothing_stay_in_the_callers_thread(blobs, tmp_path, monkeypatch, georeferenced):
    # a Cube of 100,000 local images (or of remote ones given blob and georeferencing) must not pay a thread each
    from xarray_rumi.reading import open as opening

    paths, blob_bytes = blobs
    for path, blob in zip(paths, blob_bytes):
        with open(f"{path}.header", "wb") as f:
            f.write(blob)
    handed = []
    monkeypatch.setattr(opening, "waiting_on_network", lambda *args: handed.append(args))
    extra = {"crs": "EPSG:32631", "transform": (1, 0, 0, 0, -1, 0)} if georeferenced else {}
    images = opening.open_images(paths, [f"{p}.header" for p in paths], **extra)
    assert handed == [] and [image.header.to_bytes() for image in images] == blob_bytes
