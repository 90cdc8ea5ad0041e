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
