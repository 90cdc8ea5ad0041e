"""validate() with and without a blob, blobs that disagree with their file, reading over HTTP."""

from __future__ import annotations

import dataclasses
import pickle
import struct

import numpy as np
import pytest
from _rumi_bytes import make, ramp

import xarray_rumi
from xarray_rumi import Limits, RumiFormatError
from xarray_rumi.format.blob import Header

FIELDS = struct.Struct("<IHIIHHHBBBIB")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A 3-band uint16 file with tile frames, its blob and its bytes."""
    return make(tmp_path_factory.mktemp("w"), ramp((3, 40, 50)), tile_size=16)


def patch_blob(blob: bytes, **changes) -> bytes:
    names = ("magic", "version", "width", "length", "tile_width", "tile_length", "bands", "bits", "fmt", "unit",
             "count_min", "count_bits")
    values = dict(zip(names, FIELDS.unpack_from(blob)))
    values.update(changes)
    return FIELDS.pack(*(values[n] for n in names)) + blob[28:]


def blob_on(blob: bytes, counts=None, **grid) -> bytes:
    """A valid blob of ``blob``'s sample type on its grid changed by ``grid``, each frame 50 bytes or ``counts``."""
    header = Header.from_bytes(blob)
    changed = dataclasses.replace(header.grid, **grid)
    counts = np.full(changed.frame_count, 50) if counts is None else counts
    return Header.from_byte_counts(changed, header.sample_type, counts).to_bytes()


def blob_rule(path, blob) -> str:
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.validate(path, blob)
    return info.value.rule


def test_validate_accepts_what_write_produced(written):
    path, blob, _ = written
    assert xarray_rumi.validate(path) is None
    assert xarray_rumi.validate(path, blob) is None
    assert xarray_rumi.header_from_file(path) == blob


def test_header_forms(written, tmp_path):
    path, blob, _ = written
    blob_path = tmp_path / "f.header"
    blob_path.write_bytes(blob)
    xarray_rumi.validate(path, str(blob_path))
    xarray_rumi.validate(path, blob_path)
    xarray_rumi.validate(path, Header.from_bytes(blob))
    xarray_rumi.validate(path, bytearray(blob))
    with pytest.raises(TypeError):
        xarray_rumi.validate(path, 12345)


@pytest.mark.parametrize("changes", [
    dict(width=51), dict(width=49), dict(length=41), dict(tile_width=8), dict(tile_length=32),
    dict(bits=16, fmt=2),            # int16 rather than uint16
    dict(bits=16, fmt=3),            # float16
    dict(bits=32, fmt=1),
], ids=lambda c: ",".join(c))
def test_blob_disagreeing_with_the_file(written, changes):
    path, blob, _ = written
    grid = Header.from_bytes(blob).grid
    on_grid = {{"width": "image_width", "length": "image_length"}.get(k, k): v
               for k, v in changes.items() if k in ("width", "length", "tile_width", "tile_length")}
    if dataclasses.replace(grid, **on_grid).frame_count == grid.frame_count:
        candidate = patch_blob(blob, **changes)
    else:  # a grid with another N needs its own counts to be a valid blob at all
        candidate = patch_blob(blob_on(blob, **on_grid), **{k: v for k, v in changes.items() if k in ("bits", "fmt")})
    Header.from_bytes(candidate)  # valid on its own
    assert blob_rule(path, candidate) == "blob.matches-file"


def test_blob_with_other_bands(written):
    path, blob, _ = written
    for bands in (1, 2, 4):
        assert blob_rule(path, blob_on(blob, samples_per_pixel=bands)) == "blob.matches-file"


def test_blob_with_the_other_frame_unit(written):
    path, blob, _ = written
    counts = Header.from_bytes(blob).byte_counts()[:12]   # 12 cells of 3 bands: the file's first 12 counts
    assert blob_rule(path, blob_on(blob, counts, frame_unit=1)) == "blob.matches-file"


def test_blob_with_other_byte_counts(written):
    path, blob, _ = written
    header = Header.from_bytes(blob)
    counts = header.byte_counts().copy()
    counts[[4, 5]] = counts[[5, 4]]  # same total, same file size, wrong frames
    if counts[4] == counts[5]:
        counts[4] += 1
        counts[5] -= 1
    swapped = Header.from_byte_counts(header.grid, header.sample_type, counts).to_bytes()
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.validate(path, swapped)
    assert info.value.rule == "blob.matches-file" and "frame 4" in str(info.value)
    shifted = patch_blob(blob, count_min=header.count_min + 1)
    assert blob_rule(path, shifted) == "blob.matches-file"


def test_invalid_blob_is_named_as_such(written):
    path, blob, _ = written
    assert blob_rule(path, patch_blob(blob, magic=0)) == "blob.magic"
    assert blob_rule(path, blob + b"\0") == "blob.size"
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.open_image(path, blob[:-1])
    assert info.value.rule == "blob.size"


def test_single_band_blob_with_either_frame_unit(tmp_path):
    values = ramp((1, 33, 47))
    path, blob, _ = make(tmp_path, values, tile_size=16)
    for unit in (0, 1):
        other = patch_blob(blob, unit=unit)
        xarray_rumi.validate(path, other)
        assert np.array_equal(xarray_rumi.open_image(path, other).read(), values)


def test_limits_apply_to_files_and_blobs(written):
    path, blob, _ = written
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.validate(path, limits=Limits(max_frames=10))
    assert info.value.rule == "fixed-ifd.limits"
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.open_image(path, blob, limits=Limits(max_frame_bytes=100))
    assert info.value.rule == "blob.limits"


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        xarray_rumi.validate(tmp_path / "absent.rumi")
    with pytest.raises(OSError):
        xarray_rumi.header_from_file(tmp_path / "absent.rumi")


def test_error_keeps_its_rule_across_pickling():
    err = pickle.loads(pickle.dumps(RumiFormatError("frames.order", "frame 3")))
    assert (err.rule, err.detail, str(err)) == ("frames.order", "frame 3", "frames.order: frame 3")


def test_over_http(tmp_path, http_server):
    values = ramp((2, 40, 40))
    path, blob, _ = make(tmp_path, values, tile_size=16)
    url = f"{http_server.url}/{path.name}"
    xarray_rumi.validate(url, blob)
    assert xarray_rumi.header_from_file(url) == blob
    http_server.requests.clear()
    image = xarray_rumi.open_image(url, blob, georeferencing=False)
    assert http_server.get_requests() == []  # a blob locates everything: opening reads nothing
    window = image.read(slice(1, 2), slice(0, 16), slice(16, 32))  # exactly one frame
    assert np.array_equal(window, values[1:2, 0:16, 16:32])
    start, stop = image.frame_range(image.grid.frame_index(0, 1, 1))
    assert [r.range for r in http_server.get_requests()] == [(start, stop)]
    http_server.requests.clear()
    xarray_rumi.open_image(url, blob)  # georeferencing: one 160-byte read just before the frames
    base = Header.from_bytes(blob).base_frame_offset
    assert [r.range for r in http_server.get_requests()] == [(base - 160, base)]


def test_real_rasters(shared_data, tmp_path):
    rasterio = pytest.importorskip("rasterio")
    for name in ("RGB.byte.tif", "RGBA.uint16.tif", "small_dem_3m_merged.tif", "cint16.tif"):
        with rasterio.open(shared_data / name) as src:
            values = src.read()
            epsg = src.crs.to_epsg() if src.crs else None
            transform = tuple(src.transform)[:6] if epsg else None
        sample_type = "cint16" if name == "cint16.tif" else None
        for unit in ("tile", "cell"):
            path, blob, _ = make(tmp_path, values, name=f"{name}.{unit}.rumi", tile_size=256, frame_unit=unit,
                                 crs=epsg, transform=transform, sample_type=sample_type, compression="auto")
            xarray_rumi.validate(path, blob)
            assert xarray_rumi.header_from_file(path) == blob
            image = xarray_rumi.open_image(path)
            assert np.array_equal(image.read(), values)
            if epsg:
                assert image.georeferencing.epsg == epsg
                assert image.georeferencing.transform == pytest.approx(transform)


# -- error prefixes: a frame's error names the frame and the file once ----------------------------------------


def _with_frame_1_damaged(tmp_path, written, how: str):
    from _rumi_bytes import put, save, tile_offsets

    data = written[2]
    at = int(tile_offsets(data)[1])
    if how == "not-openzl":
        return save(tmp_path, put(data, at, "<B", 0x28), "damaged.rumi")
    damaged = bytearray(data)
    damaged[at + 8: at + 24] = bytes(16)  # past the frame header: the frame says it is OpenZL but does not decode
    return save(tmp_path, bytes(damaged), "damaged.rumi")


@pytest.mark.parametrize("how, rule", [("not-openzl", "frame.openzl"), ("payload", None)])
def test_a_frame_error_names_the_frame_and_file_once(tmp_path, written, how, rule):
    path = _with_frame_1_damaged(tmp_path, written, how)
    with pytest.raises(RumiFormatError) as info:
        xarray_rumi.validate(path)
    error = info.value
    assert rule is None or error.rule == rule
    assert str(error).startswith(f"{error.rule}: frame 1 of {path}: ")
    assert str(error).count("frame 1") == 1
