"""The one opener: what it reads for each combination of arguments, its refusals, its log."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.io.source import ByteSource
from xarray_rumi.reading.checked import checked_blobs


@pytest.fixture
def written(tmp_path):
    path = str(tmp_path / "a.rumi")
    data = np.arange(2 * 20 * 30, dtype="uint16").reshape(2, 20, 30)
    blob = xarray_rumi.write(path, data, tile_size=16, crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6))
    checked_blobs.clear()   # as a new process: nothing checked yet
    return path, blob, data


@pytest.fixture
def reads(monkeypatch):
    """The byte ranges every ByteSource reads, as (start, stop)."""
    seen = []
    read, read_many = ByteSource.read, ByteSource.read_many
    monkeypatch.setattr(ByteSource, "read", lambda self, a, b, **kw: seen.append((a, b)) or read(self, a, b, **kw))
    monkeypatch.setattr(ByteSource, "read_many",
                        lambda self, starts, stops: seen.extend(zip(starts, stops)) or read_many(self, starts, stops))
    return seen


def test_what_each_combination_reads(written, reads):
    path, blob, data = written
    image = xarray_rumi.open_image(path, header=blob, crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6))
    assert reads == []   # blob and georeferencing given: nothing
    assert xarray_rumi.open_image(path, header=blob, georeferencing=False).georeferencing.is_defined is False
    assert reads == []
    xarray_rumi.open_image(path, header=blob)
    assert [b - a for a, b in reads] == [252, 160]   # the IFD head and the georeferencing, one batch
    reads.clear()
    xarray_rumi.open_image(path)
    assert len(reads) == 1 and reads[0][0] == 0   # the IFD, one read
    np.testing.assert_array_equal(image.read(), data)


def test_read_georef_is_gone_georeferencing_false_says_it(written, reads):
    """0.1.0 was never released, so the older spelling ``read_georef=`` went before anyone relied on it."""
    path, blob, _ = written
    with pytest.raises(TypeError, match="read_georef"):
        xarray_rumi.open_image(path, blob, read_georef=False)
    image = xarray_rumi.open_image(path, blob, georeferencing=False)
    assert reads == [] and not image.georeferencing.is_defined


def test_a_refused_blob_is_logged(written, caplog):
    path, blob, _ = written
    lying = blob[:21] + bytes([3]) + blob[22:]   # float16, as wide as uint16
    with caplog.at_level(logging.INFO, logger="xarray_rumi.reading"), \
            pytest.raises(xarray_rumi.RumiFormatError, match="blob.matches-file"):
        xarray_rumi.open_image(path, header=lying)
    assert any("refused the blob" in r.getMessage() and path in r.getMessage() for r in caplog.records)


def test_opener_refuses_what_it_cannot_open(written):
    path, blob, _ = written
    with pytest.raises(TypeError, match="path, an fsspec URL or a byte source"):
        xarray_rumi.open_image(3, header=blob)
    with pytest.raises(TypeError, match="georeferencing must be"):
        xarray_rumi.open_image(path, header=blob, georeferencing="EPSG:4326")
    with pytest.raises(ValueError, match="either georeferencing="):
        xarray_rumi.open_image(path, header=blob, crs=4326, transform=(1, 0, 0, 0, -1, 0),
                               georeferencing=xarray_rumi.Georeferencing())


def test_a_caller_georeferencing_object_is_used_as_given(written):
    path, blob, _ = written
    given = xarray_rumi.open_image(path, header=blob).georeferencing
    assert isinstance(given, xarray_rumi.Georeferencing)
    assert xarray_rumi.open_image(path, header=blob, georeferencing=given).georeferencing == given


def test_open_images_names_the_image_a_refusal_is_about(tmp_path):
    from xarray_rumi.reading.open import open_images

    paths = [str(tmp_path / f"{i}.rumi") for i in range(3)]
    blobs = [xarray_rumi.write(p, np.full((1, 20, 30), i, "uint16"), tile_size=16) for i, p in enumerate(paths)]
    other = xarray_rumi.write(str(tmp_path / "other.rumi"), np.zeros((1, 20, 30), "uint8"), tile_size=16)
    with pytest.raises(xarray_rumi.RumiFormatError, match=r"^blob\.matches-file: image 2 \('.*2\.rumi'\): "):
        open_images(paths, [blobs[0], blobs[1], other])
    with open(paths[1], "wb") as f:
        f.write(b"not a TIFF" * 100)
    with pytest.raises(xarray_rumi.RumiFormatError, match=r"^file-profile\.little-endian: image 1 \('.*1\.rumi'\): "):
        open_images(paths, [None] * 3)


def test_a_blob_checked_at_open_reads_the_tags_after_five_bands_sample_formats(tmp_path):
    path = str(tmp_path / "five.rumi")
    blob = xarray_rumi.write(path, np.zeros((5, 16, 16), "int16"), crs=32633, transform=(10, 0, 5e5, 0, -10, 6e6))
    checked_blobs.clear()   # the check's last range holds the sample formats, then the tags
    opened = xarray_rumi.open_image(path, header=blob).georeferencing
    assert opened.epsg == 32633 and opened == xarray_rumi.open_image(path).georeferencing
