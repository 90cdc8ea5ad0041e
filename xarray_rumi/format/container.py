"""Refusing the reference implementation's later container as what it is (docs/format.md)."""

from __future__ import annotations

import struct

from ..errors import RumiFormatError

FILE_MAGIC = b"RUMI"
BLOB_FIXED_SIZE = 32
_FRAME_TIME_COUNT = struct.Struct("<H")  # at byte 14
_READS = "this package reads rumi spec 0.1.0 files (BigTIFF profile) and their 28-byte-header blobs"
# The 0.1.0 rules a later blob breaks first.
_FIELD_VALUE_RULES = frozenset({"blob.sample-encoding", "blob.frame-unit"})


def refuse_later_file(head: bytes) -> None:
    """Refuse (``file-profile.later-container``) a file that begins with ``RUMI``."""
    if bytes(head[:4]) == FILE_MAGIC:
        raise RumiFormatError("file-profile.later-container", "the file begins with RUMI: it is in the reference "
                              f"implementation's later container, not a rumi spec 0.1.0 file; {_READS}")


def refuse_later_blob(blob: bytes, refusal: RumiFormatError) -> None:
    """Raise ``blob.later-container`` when 0.1.0's ``refusal`` of ``blob`` is that of a later blob.

    >>> later = bytes.fromhex("4c4f56450100") + bytes(8) + bytes([3, 0]) + bytes(16)
    >>> refuse_later_blob(later, RumiFormatError("blob.sample-encoding", "(0, 0) is not a valid rumi pair"))
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: blob.later-container: the blob is the reference implementation's later ...
    """
    if bytes(blob[:4]) == FILE_MAGIC:
        raise RumiFormatError("blob.later-container", "the blob begins with RUMI: it is a file in the reference "
                              f"implementation's later container, not a rumi spec 0.1.0 blob; {_READS}") from None
    if refusal.rule not in _FIELD_VALUE_RULES or len(blob) < BLOB_FIXED_SIZE or len(blob) in _sizes_0_1_0(blob):
        return
    frame_times, = _FRAME_TIME_COUNT.unpack_from(blob, 14)
    if frame_times:
        raise RumiFormatError(
            "blob.later-container", f"the blob is the reference implementation's later container "
            f"({BLOB_FIXED_SIZE}-byte fixed part, {frame_times} frame times), not a rumi spec 0.1.0 blob; {_READS} "
            f"(read as one, it breaks {refusal})") from None


def _sizes_0_1_0(blob: bytes) -> set[int]:
    """The sizes a 0.1.0 blob of these grid fields may have, at any frame unit and count width."""
    width, length, tile_width, tile_length, bands = struct.unpack_from("<IIHHH", blob, 6)
    if not (tile_width and tile_length):
        return set()
    positions = -(-width // tile_width) * -(-length // tile_length)
    return {28 + -(-frames * count_bits // 8) for frames in (positions, positions * bands) for count_bits in range(33)}
