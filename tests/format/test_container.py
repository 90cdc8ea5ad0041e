"""The reference implementation's later container: refused as exactly that, through every way in.

Its file begins with ``RUMI``; its blob keeps the 0.1.0 magic and version but
has a 32-byte fixed part with a frame-time count at byte 14.  Damaged 0.1.0
files and blobs keep the rules they break.
"""

from __future__ import annotations

import struct

import pytest
import xarray as xr
from _rumi_bytes import make, put, ramp, save
from cli_runs import run

import xarray_rumi
from xarray_rumi import RumiFormatError

SAYS = "this package reads rumi spec 0.1.0 files (BigTIFF profile)"


def later_file() -> bytes:
    """A file of the later container: ``RUMI``, then what follows in it (a version and a body)."""
    return b"RUMI" + struct.pack("<HH", 2, 0) + bytes(range(256)) * 2


def later_blob() -> bytes:
    """A blob of the later container: magic and version as 0.1.0, 3 frame times at byte 14, 32-byte fixed part.

    Read at 0.1.0's places, bytes 20 and 21 give ``(sample_format=1, bits_per_sample=0)``, the pair the
    issue reported being refused with.
    """
    fixed = struct.pack("<IHIIHHHBBBIBI", 0x45564F4C, 1, 100, 80, 3, 64, 64, 0, 1, 0, 700, 8, 0)
    assert len(fixed) == 32 and fixed[14:16] == b"\x03\x00"
    return fixed + bytes(range(9))


@pytest.fixture
def written(tmp_path):
    return make(tmp_path, ramp((2, 40, 50)), tile_size=16)


def refused(call, *args, **kwargs) -> RumiFormatError:
    with pytest.raises(RumiFormatError) as info:
        call(*args, **kwargs)
    return info.value


def test_a_later_file_is_refused_as_the_later_container(tmp_path):
    path = save(tmp_path, later_file(), "later.rumi")
    for error in (refused(xarray_rumi.validate, path), refused(xr.open_dataset, path, engine="rumi"),
                  refused(xarray_rumi.header_from_file, path)):
        assert error.rule == "file-profile.later-container"
        assert "begins with RUMI" in str(error) and "later container" in str(error) and SAYS in str(error)


def test_a_later_blob_is_refused_as_the_later_container(tmp_path, written):
    path, _, _ = written
    blob_file = save(tmp_path, later_blob(), "later.header")
    for error in (refused(xarray_rumi.validate, path, later_blob()),
                  refused(xarray_rumi.validate, path, blob_file),
                  refused(xr.open_dataset, path, engine="rumi", header=later_blob()),
                  refused(xarray_rumi.open_cube, [path, path], [later_blob(), later_blob()])):
        assert error.rule == "blob.later-container"
        assert "blob.sample-encoding: (sample_format=1, bits_per_sample=0) is not a valid rumi pair" in str(error)
        assert "later container (32-byte fixed part, 3 frame times)" in str(error) and SAYS in str(error)


def test_a_later_file_given_as_a_blob_is_named_too(tmp_path, written):
    path, _, _ = written
    error = refused(xarray_rumi.validate, path, later_file()[:64])
    assert error.rule == "blob.later-container" and "begins with RUMI" in str(error)


def test_damaged_0_1_0_blobs_keep_their_rules(written):
    path, blob, _ = written
    assert len(blob) >= 32  # as long as a later blob: only the size its own fields claim tells them apart
    assert refused(xarray_rumi.validate, path, put(blob, 20, "<B", 0)).rule == "blob.sample-encoding"
    assert refused(xarray_rumi.validate, path, put(blob, 22, "<B", 7)).rule == "blob.frame-unit"
    assert refused(xarray_rumi.validate, path, put(blob, 27, "<B", 40)).rule == "blob.count-bits"
    assert refused(xarray_rumi.validate, path, put(blob, 0, "<I", 0)).rule == "blob.magic"
    assert refused(xarray_rumi.validate, path, blob[:-1]).rule == "blob.size"


def test_damaged_0_1_0_files_keep_their_rules(tmp_path, written):
    _, _, data = written
    assert refused(xarray_rumi.validate, save(tmp_path, b"RUMO" + data[4:], "x.rumi")).rule == \
        "file-profile.little-endian"
    assert refused(xarray_rumi.validate, save(tmp_path, b"MM" + data[2:], "y.rumi")).rule == \
        "file-profile.little-endian"


def test_the_commands_name_the_later_container(capsys, tmp_path, written):
    path, _, _ = written
    later = save(tmp_path, later_file(), "later.rumi")
    blob_file = save(tmp_path, later_blob(), "later.header")
    status, out, _ = run(capsys, "validate", later)
    assert status == 1 and SAYS in out
    assert out.startswith("rumi validate: file-profile.later-container: the file begins with RUMI")
    status, _, err = run(capsys, "info", path, "--header", blob_file)
    assert status == 1 and err.startswith("rumi info: blob.later-container: the blob is the reference implementation's")
