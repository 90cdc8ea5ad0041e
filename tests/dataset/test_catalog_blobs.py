"""A catalog's blobs: checked together before any image is opened, the one refused named by its file."""

from __future__ import annotations

import pytest

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.dataset.catalog import build, catalog_images, read
from xarray_rumi.io.source import ByteSource

pytest.importorskip("pyarrow")


@pytest.fixture
def table(tmp_path, write_images):
    """A catalog of four images of one grid, two of them with the same blob."""
    paths = write_images([0, 1, 1, 2], (1, 40, 40), compression="portable")
    return read(build(paths, tmp_path / "c.parquet"))


def test_rows_alike_share_what_they_record(table):
    images = catalog_images(table)[1]
    assert bytes(table.header[1]) == bytes(table.header[2])
    assert images[1].header is images[2].header  # one blob, parsed once
    assert len({id(image.georeferencing) for image in images}) == 1


def test_a_damaged_blob_is_refused_naming_its_file_before_any_read(table, monkeypatch):
    reads = []
    monkeypatch.setattr(ByteSource, "read", lambda self, *a, **kw: reads.append(self.url))
    monkeypatch.setattr(ByteSource, "read_many", lambda self, *a, **kw: reads.append(self.url))
    blob = bytes(table.header[3])
    table.loc[3, "header"] = blob[:-1] + bytes([blob[-1] | 0x80])  # a padding bit set
    for opening in (xarray_rumi.open_catalog, xarray_rumi.open_collection):
        with pytest.raises(RumiFormatError, match=rf"blob.padding: image 3 \('{table.url[3]}'\)"):
            opening(table)
    assert reads == []
