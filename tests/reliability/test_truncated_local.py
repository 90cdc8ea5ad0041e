"""A local rumi file cut short is refused where a user first touches it, never read as data.

Cut with ``os.truncate`` inside the IFD, inside its external values, inside
the frames, exactly at a frame boundary and one byte short: every open that
reads the IFD or checks a blob refuses it (``frames.truncated``, or
``file-profile.truncated`` when the IFD itself is cut), and so do
``validate``, ``header_from_file``, ``references`` and ``stac.item``.  A file
cut after its blob was made, opened from the blob and georeferencing (which
reads nothing), is refused by the read that meets a missing frame, naming
it.  The size an opened image reports is the file's, not the blob's claim.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import xarray as xr

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import Header
from xarray_rumi.format.placement import check_frames_inside
from xarray_rumi.reading.checked import checked_blobs

CRS, TRANSFORM = 32618, (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0)
#: 3 x 3 positions of 2 tile frames each (frame 2p + b is band b of position p), 18 frames.
VALUES = np.random.default_rng(5).integers(0, 4000, (2, 40, 48), dtype=np.uint16)

#: Where each file is cut: a function of its header, and the rule the refusal names.
CUTS = {
    "inside-the-ifd": (lambda h: 100, "file-profile.truncated"),
    "inside-the-external-values": (lambda h: h.base_frame_offset - 50, "file-profile.truncated"),
    "inside-a-frame": (lambda h: h.offset(9) + h.byte_count(9) // 2, "frames.truncated"),
    "at-a-frame-boundary": (lambda h: h.offset(5), "frames.truncated"),
    "one-byte-short": (lambda h: h.frames_end - 1, "frames.truncated"),
}
#: The first frame each cut inside the frames leaves short or absent.
FIRST_CUT = {"inside-a-frame": 9, "at-a-frame-boundary": 5, "one-byte-short": 17}


@pytest.fixture
def written(tmp_path):
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, VALUES, tile_size=16, crs=CRS, transform=TRANSFORM, write_header=False)
    return path, blob, Header.from_bytes(blob)


@pytest.fixture(params=list(CUTS))
def cut(request, written):
    """``(path, blob, header, kept bytes, rule, name)`` of a file truncated where the parameter says."""
    path, blob, header = written
    where, rule = CUTS[request.param]
    keep = where(header)
    os.truncate(path, keep)
    return path, blob, header, keep, rule, request.param


def _refusal(cut) -> str:
    """What the refusal of an open that learns the size says, as a pattern."""
    path, blob, header, keep, rule, name = cut
    if rule == "file-profile.truncated":
        return rule
    missing = header.frames_end - keep
    # through the IFD "the file"; through a blob the file's path, and the message ends saying the
    # blob may be another file's
    return f"frames\\.truncated: (the file|{re.escape(str(path))}) " + re.escape(
        f"is {keep} bytes, but its frames end at byte {header.frames_end} "
        f"({missing} byte{'s' if missing > 1 else ''} missing): frame {FIRST_CUT[name]} of 18 "
        "is the first cut short or absent")


def test_an_open_without_a_blob_refuses_it(cut):
    path = cut[0]
    with pytest.raises(RumiFormatError, match=_refusal(cut)):
        xarray_rumi.open_image(path)
    with pytest.raises(RumiFormatError, match=_refusal(cut)):
        xr.open_dataset(path, engine="rumi")


def test_an_open_that_checks_the_blob_refuses_it(cut):
    path, blob = cut[:2]
    with pytest.raises(RumiFormatError, match=_refusal(cut)):
        xarray_rumi.open_image(path, blob)
    with pytest.raises(RumiFormatError, match=_refusal(cut)):
        xr.open_dataset(path, engine="rumi", header=blob)


def test_validate_header_from_file_and_references_refuse_it(cut):
    path, blob, *_ = cut
    for run in (lambda: xarray_rumi.validate(path), lambda: xarray_rumi.validate(path, blob),
                lambda: xarray_rumi.header_from_file(path), lambda: xarray_rumi.references(path),
                lambda: xarray_rumi.references(path, blob)):
        with pytest.raises(RumiFormatError, match=_refusal(cut)):
            run()


def test_a_stac_item_is_refused(cut):
    pytest.importorskip("pystac")
    from xarray_rumi.stac import item

    path, blob, *_ = cut
    for header in (None, blob):
        with pytest.raises(RumiFormatError, match=_refusal(cut)):
            item(path, header, datetime="2024-01-01T00:00:00Z")


def test_a_file_cut_after_its_blob_was_made_is_refused_by_the_read_naming_the_frame(written):
    """Blob and georeferencing given: the open reads nothing, so the first read that needs a missing frame refuses."""
    path, blob, header = written
    os.truncate(path, header.offset(5) + 3)   # frames 0-4 whole, frame 5 cut, the rest absent
    ds = xr.open_dataset(path, engine="rumi", header=blob, crs=CRS, transform=TRANSFORM, chunks={})
    np.testing.assert_array_equal(ds.band_data[:, :16, :32].values, VALUES[:, :16, :32])   # frames 0-3
    start, stop = header.ranges([5])
    cut_frame = re.escape(f"frames.truncated: frame 5 (bytes {start[0]}-{stop[0]}) runs past the end of {path}, "
                          f"which is {header.offset(5) + 3} bytes")
    with pytest.raises(RumiFormatError, match=cut_frame):
        ds.band_data[1, :16, 32:].values   # exactly frame 5
    absent = re.escape(f"frames.truncated: frame 8 (bytes {header.offset(8)}-{header.offset(9)})")
    with pytest.raises(RumiFormatError, match=absent):
        ds.band_data[0, 16:32, 16:32].values   # frame 8: wholly past the end
    lazy = xr.open_dataset(path, engine="rumi", header=blob, crs=CRS, transform=TRANSFORM)
    with pytest.raises(RumiFormatError, match="frames.truncated: frame 5 "):
        lazy.band_data.values
    cube = xarray_rumi.open_cube([path, path], [blob, blob], crs=CRS, transform=TRANSFORM, chunks={})
    with pytest.raises(RumiFormatError, match=r"frames\.truncated: frame \d+ \(bytes"):   # whichever task fails first
        cube.band_data.values


def test_a_blob_checked_before_the_file_was_cut_does_not_let_a_later_open_skip_the_size(written):
    """The size is checked at every open that checks a blob, not once per process like the IFD head."""
    path, blob, header = written
    image = xarray_rumi.open_image(path, blob)
    assert image.blob_key in checked_blobs and image.file_size == header.frames_end
    os.truncate(path, header.frames_end - 1)
    for _ in range(2):
        with pytest.raises(RumiFormatError, match="frames.truncated"):
            xarray_rumi.open_image(path, blob)


def test_a_frame_the_file_holds_is_read_though_a_later_one_is_missing(written):
    path, blob, header = written
    os.truncate(path, header.offset(9))
    image = xarray_rumi.open_image(path, blob, georeferencing=False)
    np.testing.assert_array_equal(image.read(rows=slice(0, 16)), VALUES[:, :16])   # frames 0-5


# -- the size an image reports ------------------------------------------------------------

def test_file_size_is_the_files_own_size_not_the_blobs_claim(written):
    path, blob, header = written
    with open(path, "ab") as f:
        f.write(b"\0" * 3)   # trailing bytes (frames.trailing-bytes for validate): the claim is now 3 short
    assert os.path.getsize(path) == header.frames_end + 3
    for image in (xarray_rumi.open_image(path), xarray_rumi.open_image(path, blob),
                  xarray_rumi.open_image(path, blob, crs=CRS, transform=TRANSFORM),
                  xarray_rumi.open_image(path, blob, verify=False)):
        assert image.file_size == header.frames_end + 3


def test_file_size_is_learned_at_open_where_the_open_reads_and_asked_later_where_it_reads_nothing(written):
    path, blob, header = written
    learned = xarray_rumi.open_image(path, blob)
    unread = xarray_rumi.open_image(path, blob, crs=CRS, transform=TRANSFORM)
    assert learned.opened_size == header.frames_end and unread.opened_size is None
    with open(path, "ab") as f:
        f.write(b"\0")
    assert learned.file_size == header.frames_end      # as the open saw it
    assert unread.file_size == header.frames_end + 1   # asked now


def test_a_stac_item_records_the_files_real_size(written):
    pytest.importorskip("pystac")
    from xarray_rumi.stac import item

    path, blob, header = written
    with open(path, "ab") as f:
        f.write(b"\0" * 7)
    for blob_given in (None, blob):
        it = item(path, blob_given, datetime="2024-01-01T00:00:00Z")
        assert it.assets["data"].extra_fields["file:size"] == os.path.getsize(path) == header.frames_end + 7


# -- the check itself ---------------------------------------------------------------------

def test_the_check_is_vectorised_over_millions_of_frames():
    counts = np.full(4_000_000, 1000, np.int64)
    counts[::7] = 999
    offsets = 412 + np.concatenate([[0], np.cumsum(counts[:-1])])
    end = int(offsets[-1] + counts[-1])
    check_frames_inside(offsets, counts, end)
    with pytest.raises(RumiFormatError, match=r"frame 3999999 of 4000000 is the first cut short or absent, 1 in all"):
        check_frames_inside(offsets, counts, end - 1)
    with pytest.raises(RumiFormatError, match=rf"\(1000 bytes missing\): frame 3999999 of 4000000"):
        check_frames_inside(offsets, counts, int(offsets[-1]))   # the last frame wholly absent
    with pytest.raises(RumiFormatError, match=r"frame 2000000 of 4000000 is the first cut short or absent, "
                                              r"2000000 in all"):
        check_frames_inside(offsets, counts, int(offsets[2_000_000]) + 10)


def test_virtual_references_to_a_file_cut_after_they_were_made_never_read_as_data(written):
    """The reference file system hands the codec whatever bytes are left: it refuses them as a damaged frame.

    The codec sees only a chunk's bytes, not the length the reference promised,
    so it names the damage (``frame.decode``, or ``frame.openzl`` for a frame
    that is absent) rather than ``frames.truncated``.
    """
    pytest.importorskip("zarr")
    path, blob, header = written
    refs = xarray_rumi.references(path, blob, crs=CRS, transform=TRANSFORM)
    os.truncate(path, header.offset(6) - 20)
    ds = xr.open_dataset("reference://", engine="zarr",
                         backend_kwargs={"consolidated": False, "storage_options": {"fo": refs}})
    np.testing.assert_array_equal(ds.band_data[:, :16, :32].values, VALUES[:, :16, :32])   # frames 0-3
    with pytest.raises(RumiFormatError, match="frame.decode"):
        ds.band_data[1, :16, 32:].values   # frame 5, all but its last 20 bytes
    with pytest.raises(RumiFormatError, match="frame.openzl"):
        ds.band_data[0, 16:32, 16:32].values   # frame 8, absent
