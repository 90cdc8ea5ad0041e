"""Which byte range each virtual chunk points at, so that every edge decodes exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import RumiFormatError
from ..format.blob import Header
from ..format.grid import FrameGrid
from ..frames.codec import MAGIC_TAIL, frame_version

# Leading bytes before a frame, written into stored references (so never change them): RIGHT_EDGE before a
# right-edge frame of an ambiguous grid; RAW_LENGTH before any other frame exactly as long as a raw chunk, so that
# its reference is not; RIGHT_EDGE_AT_RAW_LENGTH before a right-edge frame that RIGHT_EDGE would make that long.
RIGHT_EDGE, RAW_LENGTH, RIGHT_EDGE_AT_RAW_LENGTH = 1, 2, 3
RIGHT_EDGE_SHIFTS = (RIGHT_EDGE, RIGHT_EDGE_AT_RAW_LENGTH)
LARGEST_SHIFT = max(RIGHT_EDGE, RAW_LENGTH, RIGHT_EDGE_AT_RAW_LENGTH)


def ambiguous_edges(grid: FrameGrid) -> bool:
    """Whether right-edge and bottom-edge frames decode to the same sample count."""
    edge_length, edge_width = grid.edge_sizes()
    return (
        grid.tiles_down > 1 and grid.tiles_across > 1 and edge_length != grid.tile_length
        and grid.tile_length * edge_width == edge_length * grid.tile_width
    )


def frame_shift(data) -> int:
    """How many bytes a reference's data has before its frame: where OpenZL's frame magic begins."""
    head = bytes(data[:LARGEST_SHIFT + 4])
    for shift in range(LARGEST_SHIFT + 1):
        # bytes 1..3 of the magic first: no exception on the way to the frame
        if head[shift + 1:shift + 4] == MAGIC_TAIL:
            try:
                frame_version(head[shift:shift + 4])
            except RumiFormatError:
                continue
            return shift
    raise RumiFormatError("frame.openzl", f"the chunk does not start with an OpenZL frame header (got {head.hex()})")


@dataclass(frozen=True)
class ChunkReferences:
    """Byte ranges of the frames of one or more images on one grid."""

    starts: list[np.ndarray]
    lengths: list[np.ndarray]
    moved: int


def chunk_references(headers: list[Header]) -> ChunkReferences:
    """The references of images sharing one grid, each moved back by its frame's shift (the constants above)."""
    grid, sample = headers[0].grid, headers[0].sample_type
    chunk_bytes = grid.bands_per_frame * grid.tile_length * grid.tile_width * sample.bytes_per_sample
    right = grid.edge_masks()[0] if ambiguous_edges(grid) else np.zeros(grid.frame_count, bool)
    starts, lengths, moved = [], [], 0
    for header in headers:
        length = header.byte_counts()
        shift = np.where(right, np.where(length + RIGHT_EDGE == chunk_bytes, RIGHT_EDGE_AT_RAW_LENGTH, RIGHT_EDGE),
                         np.where(length == chunk_bytes, RAW_LENGTH, 0))
        starts.append(header.offsets() - shift)   # never before the file: its 252-byte IFD comes first
        lengths.append(length + shift)
        moved += int(np.count_nonzero(shift))
    return ChunkReferences(starts, lengths, moved)
