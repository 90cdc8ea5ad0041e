"""A Cube's blobs: checked once each at open, together per grid, and the one refused named before any read."""

from __future__ import annotations

import base64
import os
from collections import Counter

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi import Limits, RumiFormatError, open_cube
from xarray_rumi.format.blob import HEADER_SIZE, Header, pack_residuals
from xarray_rumi.io.source import ByteSource

CRS, TRANSFORM = 32618, (10.0, 0.0, 600000.0, 0.0, -10.0, 5000000.0)


@pytest.fixture
def archive(tmp_path):
    """One file written, seven more names for it (symlinks), one blob for all: a repeated grid."""
    values = np.add.outer(np.arange(70), np.arange(90)).astype("uint16")[np.newaxis]
    first = tmp_path / "t0.rumi"
    blob = xarray_rumi.write(first, values, tile_size=16, frame_unit="tile", crs=CRS, transform=TRANSFORM,
                             compression="portable")
    paths = [str(first)]
    for i in range(1, 8):
        os.symlink(first, tmp_path / f"t{i}.rumi")
        paths.append(str(tmp_path / f"t{i}.rumi"))
    return paths, blob, values


@pytest.fixture
def reads(monkeypatch):
    seen = []
    read, read_many = ByteSource.read, ByteSource.read_many
    monkeypatch.setattr(ByteSource, "read", lambda self, a, b, **kw: seen.append(self.url) or read(self, a, b, **kw))
    monkeypatch.setattr(ByteSource, "read_many",
                        lambda self, starts, stops: seen.append(self.url) or read_many(self, starts, stops))
    return seen


@pytest.fixture
def checks(monkeypatch):
    """How many blobs were checked one by one (Header._check_canonical)."""
    count = [0]
    check = Header._check_canonical

    def counted(self, limits):
        count[0] += 1
        return check(self, limits)

    monkeypatch.setattr(Header, "_check_canonical", counted)
    return count


def _non_canonical(blob: bytes) -> bytes:
    """``blob`` with its smallest residuals 1, not 0: as long, but count_min is no longer the smallest count."""
    header = Header.from_bytes(blob)
    residuals = header.residuals()
    residuals[residuals == 0] = 1
    return blob[:HEADER_SIZE] + pack_residuals(residuals, header.count_bits)


def test_a_repeated_blob_is_checked_once(archive, reads, checks):
    paths, blob, values = archive
    cube = open_cube(paths, [blob] * len(paths), crs=CRS, transform=TRANSFORM)
    assert checks[0] == 1 and reads == []
    np.testing.assert_array_equal(cube.band_data.values, np.stack([values] * len(paths)))


def test_distinct_blobs_of_one_grid_are_checked_together(tmp_path, checks):
    rng = np.random.default_rng(0)
    paths = [str(tmp_path / f"d{i}.rumi") for i in range(12)]
    values = [rng.integers(0, 1000, (1, 70, 90), dtype="uint16") for i in range(12)]
    blobs = [xarray_rumi.write(p, v, tile_size=16, frame_unit="tile", crs=CRS, transform=TRANSFORM,
                               compression="portable") for p, v in zip(paths, values)]
    # Distinct blobs alike in every field but count_min are checked together; one alike to no other, alone.
    alike = Counter(b[:23] + b[27:28] for b in set(blobs))
    assert max(alike.values()) > 1
    cube = open_cube(paths, blobs, crs=CRS, transform=TRANSFORM)
    assert checks[0] == sum(1 for n in alike.values() if n == 1)
    np.testing.assert_array_equal(cube.band_data.values, np.stack(values))


@pytest.mark.parametrize("damage", ["non-canonical", "padding", "magic"])
def test_a_damaged_blob_among_good_ones_is_refused_naming_its_image_before_any_read(archive, reads, damage):
    paths, blob, _ = archive
    damaged = {"non-canonical": _non_canonical(blob),
               "padding": blob[:-1] + bytes([blob[-1] | 0x80]),
               "magic": b"EVOL" + blob[4:]}[damage]
    assert len(damaged) == len(blob) and Header.from_bytes(blob).count_bits % 8  # the last byte has padding bits
    headers = [blob] * len(paths)
    headers[5] = damaged
    with pytest.raises(RumiFormatError) as info:
        open_cube(paths, headers, crs=CRS, transform=TRANSFORM)
    rule = {"non-canonical": "blob.canonical", "padding": "blob.padding", "magic": "blob.magic"}[damage]
    assert info.value.rule == rule and info.value.detail.startswith(f"image 5 ({paths[5]!r}): ")
    assert reads == []


def test_the_callers_limits_hold_for_every_blob(archive):
    paths, blob, _ = archive
    largest = int(Header.from_bytes(blob).byte_counts().max())
    open_cube(paths, [blob] * len(paths), crs=CRS, transform=TRANSFORM, limits=Limits(max_frame_byte_count=largest))
    with pytest.raises(RumiFormatError, match=r"blob.limits: image 0 \("):
        open_cube(paths, [blob] * len(paths), crs=CRS, transform=TRANSFORM,
                  limits=Limits(max_frame_byte_count=largest - 1))


def test_stac_items_with_a_damaged_blob_name_the_file(archive, reads):
    paths, blob, _ = archive
    items = [xarray_rumi.stac.item(p, blob, datetime=f"2024-01-0{i + 1}T00:00:00Z").to_dict()
             for i, p in enumerate(paths)]
    items[3]["assets"]["data"]["rumi:header"] = base64.b64encode(_non_canonical(blob)).decode()
    reads.clear()  # making the Items read the files
    with pytest.raises(RumiFormatError, match=rf"blob.canonical: image 3 \('{paths[3]}'\)"):
        open_cube(items)
    assert reads == []


def test_stac_items_carry_their_blobs_and_assets_names_at_least_one(archive):
    paths, blob, _ = archive
    items = [xarray_rumi.stac.item(p, blob, datetime="2024-01-01T00:00:00Z").to_dict() for p in paths[:2]]
    with pytest.raises(ValueError, match="STAC Items carry their blobs; pass headers= only with paths"):
        open_cube(items, [blob, blob])
    with pytest.raises(ValueError, match="assets= names no asset"):
        open_cube(items, assets=[])
