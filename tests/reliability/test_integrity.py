"""Integrity and limits on the read path: checksums, lengths, bombs, huge claims.

* The frames ``xarray_rumi.write`` produces carry both of OpenZL's checksums
  (over the compressed bytes and over the decoded content).  A flipped bit in
  the payload that still decodes is caught: by either checksum alone, and by
  the reader by default.
* A frame that decompresses to more than its grid position is refused through
  ``xr.open_dataset`` without being expanded; a 28-byte blob claiming 10**19
  samples is refused at once.
* A file cut short is refused, never decoded: at open when the open reads
  the IFD or checks the blob, and by the read that meets the missing frame
  when the open read nothing (``frames.truncated``, naming the frame).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import openzl.ext as zl
import pytest
import xarray as xr
from steps import python_steps, steps_and_peak

import xarray_rumi
from xarray_rumi import RumiFormatError
from xarray_rumi.format.blob import Header
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.geo import Georeferencing
from xarray_rumi.format.grid import FrameGrid
from xarray_rumi.format.ifd import build_prefix
from xarray_rumi.frames.codec import decode_frame, encode_frame

# Incompressible values: zstd stores them as a raw block, so a flipped payload bit still decodes.
NOISE = np.random.default_rng(11).integers(0, 65535, (1, 32, 32), dtype=np.uint16)
UINT16 = sample_type_from_name("uint16")
_ON, _OFF = 1, 2  # OpenZL's ternary parameters: 0 is "library default"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    path = tmp_path_factory.mktemp("integrity") / "noise.rumi"
    blob = xarray_rumi.write(path, NOISE, tile_size=32, compression="portable", write_header=False)
    data = path.read_bytes()
    header = Header.from_bytes(blob)
    frame = data[header.offset(0): header.offset(1)]
    return path, blob, data, header, frame


def _openzl_decode(frame: bytes, *, compressed: int, content: int) -> bytes:
    dctx = zl.DCtx()
    dctx.set_parameter(zl.DParam.CheckCompressedChecksum, compressed)
    dctx.set_parameter(zl.DParam.CheckContentChecksum, content)
    return bytes(dctx.decompress(frame)[0].content.as_bytes())


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x04
    return bytes(out)


def test_written_frames_carry_both_checksums_and_each_catches_a_payload_flip(written):
    *_, frame = written
    assert _openzl_decode(frame, compressed=_ON, content=_ON) == NOISE.tobytes()
    flipped = _flip(frame, len(frame) // 2)  # inside the stored raw block
    # The damage still decodes, to the right length but wrong values, when nothing is checked ...
    damaged = _openzl_decode(flipped, compressed=_OFF, content=_OFF)
    assert len(damaged) == NOISE.nbytes and damaged != NOISE.tobytes()
    # ... and each checksum on its own refuses it: the content checksum is in the frame.
    with pytest.raises(RuntimeError, match="Content checksum mismatch"):
        _openzl_decode(flipped, compressed=_OFF, content=_ON)
    with pytest.raises(RuntimeError, match="Compressed checksum mismatch"):
        _openzl_decode(flipped, compressed=_ON, content=_OFF)


def test_readers_verify_by_default_and_the_decode_layer_can_skip_it(written):
    *_, frame = written
    flipped = _flip(frame, len(frame) // 2)
    with pytest.raises(RumiFormatError, match="checksum"):
        decode_frame(flipped, UINT16, NOISE.shape)
    # verify=False is the decode layer's speed option: it returns what the bytes say, unchecked.
    unchecked = decode_frame(flipped, UINT16, NOISE.shape, verify=False)
    assert not np.array_equal(unchecked, NOISE)


def test_a_damaged_payload_is_refused_by_every_reader(tmp_path, written):
    path, blob, data, header, _ = written
    broken = tmp_path / "broken.rumi"
    broken.write_bytes(_flip(data, (header.offset(0) + header.offset(1)) // 2))
    with pytest.raises(RumiFormatError, match="checksum"):
        xr.open_dataset(broken, engine="rumi", header=blob).band_data.values
    with pytest.raises(RumiFormatError, match="checksum"):
        xr.open_dataset(broken, engine="rumi", chunks={}).band_data.values  # IFD path, Dask
    with pytest.raises(RumiFormatError, match="checksum"):
        xarray_rumi.open_image(broken, blob).read()
    with pytest.raises(RumiFormatError):
        xarray_rumi.validate(broken, blob)


@pytest.fixture(scope="module")
def four_frames_one_flipped(tmp_path_factory):
    """Noise in four 32 px frames, frame 2's payload with one bit flipped (it still decodes, wrongly)."""
    values = np.random.default_rng(12).integers(0, 65535, (1, 64, 64), dtype=np.uint16)
    path = tmp_path_factory.mktemp("flipped") / "four.rumi"
    blob = xarray_rumi.write(path, values, tile_size=32, compression="portable", write_header=False)
    header = Header.from_bytes(blob)
    path.write_bytes(_flip(path.read_bytes(), (header.offset(2) + header.offset(3)) // 2))
    return path, blob, values


@pytest.mark.parametrize("window", [(0, slice(32, 64), slice(0, 32)), (slice(None),) * 3],
                         ids=["one-frame", "all-four-frames"])
@pytest.mark.parametrize("chunks", [None, {}], ids=["lazy", "dask"])
def test_verify_false_through_open_dataset_skips_the_checksums(four_frames_one_flipped, window, chunks):
    import pickle

    path, blob, values = four_frames_one_flipped
    with pytest.raises(RumiFormatError, match="checksum"):
        xr.open_dataset(path, engine="rumi", header=blob, chunks=chunks).band_data[window].values
    trusting = pickle.loads(pickle.dumps(xr.open_dataset(path, engine="rumi", header=blob, chunks=chunks,
                                                         verify=False)))  # as shipped to a worker
    unchecked = trusting.band_data[window].values
    assert unchecked.shape == values[window].shape and not np.array_equal(unchecked, values[window])
    # Only frame 2 (rows 32..63, columns 0..31) is damaged: the others are exact, checked or not.
    np.testing.assert_array_equal(trusting.band_data[0, :32, :].values, values[0, :32, :])


@pytest.mark.parametrize("cut", [1, 100, "half"])
def test_a_truncated_file_is_refused_never_decoded(tmp_path, written, cut):
    path, blob, data, header, _ = written
    keep = len(data) - (header.byte_count(0) // 2 if cut == "half" else cut)
    short = tmp_path / "short.rumi"
    short.write_bytes(data[:keep])
    # The open checks the blob against the file, and the file's size with it.
    with pytest.raises(RumiFormatError, match=f"frames.truncated: {re.escape(str(short))} is {keep} bytes.*"
                                              "cut after its blob was made, or the blob is not this file's"):
        xr.open_dataset(short, engine="rumi", header=blob)
    # An open that reads nothing: the read that meets the frame refuses it.
    ds = xr.open_dataset(short, engine="rumi", header=blob, georeferencing=False)
    frame = re.escape(f"frame 0 (bytes {header.offset(0)}-{header.offset(1)}) runs past the end of {short}")
    with pytest.raises(RumiFormatError, match=f"frames.truncated: {frame}"):
        ds.band_data.values
    with pytest.raises(RumiFormatError, match="frames.truncated: frame 0 "):
        xarray_rumi.open_image(short, blob, georeferencing=False).read()


# -- limits ----------------------------------------------------------------

BOMB_SCRIPT = textwrap.dedent("""
    import resource, sys
    import xarray as xr
    import xarray_rumi
    path, blob_path = sys.argv[1:3]
    blob = open(blob_path, "rb").read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for read in (lambda: xr.open_dataset(path, engine="rumi", header=blob).band_data.values,
                 lambda: xr.open_dataset(path, engine="rumi", chunks={}).band_data.values,
                 lambda: xarray_rumi.open_image(path, blob).read()):
        try:
            read()
            print("decoded")
        except xarray_rumi.RumiFormatError as exc:
            print(exc.rule)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
""")


def test_a_decompression_bomb_is_refused_through_the_backend_without_expanding_it(tmp_path):
    """A 16 x 16 frame position holding a frame of 256 MiB of zeros."""
    grid, sample = FrameGrid(16, 16, 16, 16, 1), sample_type_from_name("uint8")
    bomb = encode_frame(np.zeros((1, 16384, 16384), np.uint8), "id>zstd")
    assert len(bomb) < 64 * 1024
    path = tmp_path / "bomb.rumi"
    path.write_bytes(build_prefix(grid, sample, Georeferencing(), [len(bomb)]) + bomb)
    blob_path = tmp_path / "bomb.rumi.header"
    blob_path.write_bytes(Header.from_byte_counts(grid, sample, [len(bomb)]).to_bytes())
    out = subprocess.run([sys.executable, "-c", BOMB_SCRIPT, str(path), str(blob_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    *rules, grown_kib = out.stdout.split()
    assert rules == ["frame.decode"] * 3
    assert int(grown_kib) < 32 * 1024  # KiB; the frame expands to 256 MiB


def _claim(width: int, length: int, tile: int, spp: int = 1, bits: int = 8, fmt: int = 1) -> bytes:
    import struct

    return struct.pack("<IHIIHHHBBBIB", 0x45564F4C, 1, width, length, tile, tile, spp, bits, fmt, 0, 1, 0)


@pytest.mark.parametrize("claim, limit, small, small_limits", [
    # 1.8 * 10**19 samples in 4.3 * 10**9 frames; and the same kind of claim, 10,000 frames over a limit of 1,000
    (_claim(2**32 - 1, 2**32 - 1, 65535), "max_frames", _claim(100, 100, 1), xarray_rumi.Limits(max_frames=1000)),
    (_claim(2**32 - 1, 2**32 - 1, 1), "max_frames", _claim(100, 100, 1), xarray_rumi.Limits(max_frames=1000)),
    # one 2.2 PB frame per band; and one of 32 KiB over a limit of 1 KiB
    (_claim(65535, 65535, 65535, spp=65535, bits=64, fmt=3), "max_frame_bytes",
     _claim(64, 64, 64, spp=3, bits=64, fmt=3), xarray_rumi.Limits(max_frame_bytes=1024)),
])
def test_a_28_byte_blob_claiming_10_19_samples_is_refused_at_once(tmp_path, claim, limit, small, small_limits):
    """Refusing the huge claim takes the steps refusing a small one does: no work in proportion to what is claimed."""
    assert len(claim) == len(small) == 28
    path = tmp_path / "claim.rumi"
    path.write_bytes(b"")  # opening with a blob reads nothing before the claim is checked

    def refuse(blob: bytes, limits: xarray_rumi.Limits = xarray_rumi.Limits()) -> None:
        with pytest.raises(RumiFormatError, match=f"blob.limits: .*Limits.{limit}"):
            xr.open_dataset(path, engine="rumi", header=blob, georeferencing=False, limits=limits)

    refuse(small, small_limits)  # the first open in a process loads xarray's backends: not the refusal's work
    small_steps = python_steps(lambda: refuse(small, small_limits))
    steps, peak = steps_and_peak(lambda: refuse(claim), budget=2 * small_steps)
    assert peak < 1 << 20
    assert steps <= small_steps + 50  # the same checks; only the numbers in the message differ


def test_limits_are_configurable_through_the_backend(tmp_path, written):
    path, blob, *_ = written
    with pytest.raises(RumiFormatError, match="Limits.max_frame_bytes"):
        xr.open_dataset(path, engine="rumi", header=blob, limits=xarray_rumi.Limits(max_frame_bytes=1024))
    assert xr.open_dataset(path, engine="rumi", header=blob, limits=xarray_rumi.Limits(max_frame_bytes=2048)
                           ).band_data.shape == (1, 32, 32)


def test_the_numcodecs_codec_bounds_decoding_even_without_a_chunk_shape(monkeypatch):
    import geozl
    import numcodecs

    bounds = []
    decompress = geozl.decompress

    def spy(data, **kwargs):
        bounds.append(kwargs.get("max_output_size"))
        return decompress(data, **kwargs)

    monkeypatch.setattr(geozl, "decompress", spy)
    frame = encode_frame(np.zeros((1, 64, 64), np.uint8), "id>zstd")
    assert len(numcodecs.get_codec({"id": "openzl"}).decode(frame)) == 64 * 64
    assert bounds and all(b is not None and b <= xarray_rumi.Limits().max_frame_bytes for b in bounds)


def test_a_blob_claiming_huge_frames_does_not_make_a_local_read_allocate_them(tmp_path, written):
    """count_min of ~1 GiB: every frame range runs far past the 2 KiB file."""
    path, blob, *_ = written
    claim = bytearray(blob)
    claim[23:27] = (1 << 30).to_bytes(4, "little")  # count_min
    tracemalloc.start()
    try:
        with pytest.raises(RumiFormatError, match="frames.truncated: frame 0 "):
            xarray_rumi.open_image(path, bytes(claim), georeferencing=False).read()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("chunks", [None, {"x": 64}], ids=["frame-chunks", "rechunked"])
def test_verify_false_reaches_every_image_of_a_cube(four_frames_one_flipped, chunks):
    path, blob, values = four_frames_one_flipped
    with pytest.raises(RumiFormatError, match="checksum"):
        xarray_rumi.open_cube([path, path], [blob, blob], chunks=chunks).band_data.values
    trusting = xarray_rumi.open_cube([path, path], [blob, blob], chunks=chunks, verify=False)
    unchecked = trusting.band_data.values
    assert unchecked.shape == (2, *values.shape) and not np.array_equal(unchecked[1], values)


def test_another_files_blob_is_refused_naming_the_file(tmp_path):
    # Two files of one grid, the second far more compressible: each other's blobs pass the
    # IFD-head check (same grid and sample type) but locate the wrong bytes.
    rng = np.random.default_rng(5)
    noisy, flat = tmp_path / "noisy.rumi", tmp_path / "flat.rumi"
    noisy_blob = xarray_rumi.write(noisy, rng.integers(0, 60000, (1, 96, 96), dtype="uint16"), tile_size=32)
    flat_blob = xarray_rumi.write(flat, np.full((1, 96, 96), 7, "uint16"), tile_size=32)
    # the noisy file's frames end far beyond the flat file: the open says both causes and names the file
    with pytest.raises(RumiFormatError, match=rf"frames\.truncated: {re.escape(str(flat))} is \d+ bytes.*"
                                              "or the blob is not this file's"):
        xr.open_dataset(flat, engine="rumi", header=noisy_blob)
    # the flat file's frames lie inside the noisy one: the first frame that does not decode is named, with the file
    ds = xr.open_dataset(noisy, engine="rumi", header=flat_blob)
    with pytest.raises(RumiFormatError, match=rf"^frame\.\w+: frame \d+ of {re.escape(str(noisy))}: "):
        ds.band_data.values
