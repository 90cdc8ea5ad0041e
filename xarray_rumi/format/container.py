"""The reference implementation's later container, refused as what it is rather than as a broken 0.1.0 file.

Its files begin with ``RUMI``; its blobs share the 0.1.0 magic and version
but have a 32-byte fixed part with a frame-time count at byte 14, so read as
0.1.0 they break some unrelated field rule.  Only bytes that 0.1.0 refuses
are told apart here, so every valid 0.1.0 file and blob reads unchanged; a blob
damaged in several fields can look like a later one, so that refusal also
says the 0.1.0 rule it breaks.
"""

from __future__ import annotations

import struct

from ..errors import RumiFormatError

FILE_MAGIC = b"RUMI"
BLOB_FIXED_SIZE = 32
_FRAME_TIME_COUNT = struct.Struct("<H")  # at byte 14
_READS = "this package reads rumi spec 0.1.0 files (BigTIFF profile) and their 28-byte-header blobs"


def refuse_later_file(head: bytes) -> None:
    """Refuse a file that begins with ``RUMI``: the later container, not a BigTIFF.

    >>> refuse_later_file(b"II+\\x00")
    >>> refuse_later_file(b"RUMI\\x01\\x00")
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: file-profile.later-container: the file begins with RUMI: it is in the reference implementation's later container, not a rumi spec 0.1.0 file; this package reads rumi spec 0.1.0 files (BigTIFF profile) and their 28-byte-header blobs
    """
    if bytes(head[:4]) == FILE_MAGIC:
        raise RumiFormatError("file-profile.later-container", "the file begins with RUMI: it is in the reference implementation's "
                              f"later container, not a rumi spec 0.1.0 file; {_READS}")


def refuse_later_blob(blob: bytes, refusal: RumiFormatError) -> None:
    """Raise the later container's error for ``blob`` when that is what 0.1.0's ``refusal`` of it means.

    The later blob passes 0.1.0's magic and version, then breaks a rule on
    the field values; a 0.1.0 blob damaged in those fields is still a size
    its grid fields allow (any frame unit, any count width), and keeps its rule.

    >>> later = bytes.fromhex("4c4f56450100") + bytes(8) + bytes([3, 0]) + bytes(16)
    >>> refuse_later_blob(later, RumiFormatError("blob.sample-encoding", "(0, 0) is not a valid rumi pair"))
    Traceback (most recent call last):
    ...
    xarray_rumi.errors.RumiFormatError: blob.later-container: the blob is the reference implementation's later container (32-byte fixed part, 3 frame times), not a rumi spec 0.1.0 blob; this package reads rumi spec 0.1.0 files (BigTIFF profile) and their 28-byte-header blobs (read as one, it breaks blob.sample-encoding: (0, 0) is not a valid rumi pair)
    """
    if bytes(blob[:4]) == FILE_MAGIC:
        raise RumiFormatError("blob.later-container", "the blob begins with RUMI: it is a file in the reference "
                              f"implementation's later container, not a rumi spec 0.1.0 blob; {_READS}") from None
    if refusal.rule not in _FIELD_VALUE_RULES or len(blob) < BLOB_FIXED_SIZE or len(blob) in _sizes_0_1_0(blob):
        return
    frame_times, = _FRAME_TIME_COUNT.unpack_from(blob, 14)
    if frame_times:
        raise RumiFormatError(
            "blob.later-container", f"the blob is the reference implementation's later container ({BLOB_FIXED_SIZE}-byte "
            f"fixed part, {frame_times} frame times), not a rumi spec 0.1.0 blob; {_READS} (read as one, it breaks "
            f"{refusal})") from None


#: The 0.1.0 rules a later blob breaks first: its sample and unit bytes, read at 0.1.0's places.
_FIELD_VALUE_RULES = frozenset({"blob.sample-encoding", "blob.frame-unit"})


def _sizes_0_1_0(blob: bytes) -> set[int]:
    """The sizes a 0.1.0 blob of these grid fields may have, whichever frame unit and count width it was written with."""
    width, length, tile_width, tile_length, bands = struct.unpack_from("<IIHHH", blob, 6)
    if not (tile_width and tile_length):
        return set()
    positions = -(-width // tile_width) * -(-length // tile_length)
    return {28 + -(-frames * count_bits // 8) for frames in (positions, positions * bands) for count_bits in range(33)}
