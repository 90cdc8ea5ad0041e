"""Which byte range each virtual chunk points at, so that every edge decodes exactly.

A Zarr chunk behind a reference is a rumi frame, and the OpenZL codec places a
cut edge frame top-left in a full chunk from the number of samples it decodes
to.  One case needs more: when ``T_l * e_w == e_l * T_w`` (for instance a
1000 x 1000 image in 256 px tiles), a right-edge frame ``(T_l, e_w)`` and a
bottom-edge frame ``(e_l, T_w)`` decode to the same count.  The codec's
configuration then lists the compressed lengths of the right-edge references
and of the bottom-edge ones (a length in neither is refused).

If a right-edge and a bottom-edge frame share a compressed length, the length
cannot tell them apart.  Those right-edge references are *moved*: they start
``k`` bytes before the frame (every rumi frame has at least the 252-byte IFD
before it) and are ``k`` bytes longer, where ``L + k`` is the length of no
frame at all; the configuration says to skip ``k`` leading bytes of a chunk of
that length.  Frames whose compressed length equals the byte size of a chunk
are moved the same way, so that no reference can pass for raw chunk bytes.
Everything comes from the header blob: nothing is read, and the references
stay plain ``[url, offset, length]`` triples that Kerchunk, VirtualiZarr and
Icechunk all carry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..format.blob import Header
from ..format.grid import FrameGrid


def ambiguous_edges(grid: FrameGrid) -> bool:
    """Whether right-edge and bottom-edge frames decode to the same sample count.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> ambiguous_edges(FrameGrid(1000, 1000, 256, 256, 1)), ambiguous_edges(FrameGrid(1000, 900, 256, 256, 1))
    (True, False)
    """
    edge_length, edge_width = grid.edge_sizes()
    return (
        grid.tiles_down > 1 and grid.tiles_across > 1 and edge_length != grid.tile_length
        and grid.tile_length * edge_width == edge_length * grid.tile_width
    )


def edge_masks(grid: FrameGrid) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over frame indices: right-edge frames, bottom-edge frames (corners excluded).

    >>> right, bottom = edge_masks(FrameGrid(6, 6, 4, 4, 2))   # 2 x 2 positions, 2 bands
    >>> right.astype(int).tolist(), bottom.astype(int).tolist()
    ([0, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 0, 0])
    """
    position = np.arange(grid.frame_count, dtype=np.int64) // grid.frames_per_position
    row, col = np.divmod(position, grid.tiles_across)
    last_row, last_col = row == grid.tiles_down - 1, col == grid.tiles_across - 1
    return last_col & ~last_row, last_row & ~last_col


@dataclass(frozen=True)
class ChunkReferences:
    """Byte ranges of the frames of one or more images on one grid, and the codec's tables.

    ``starts[i]`` and ``lengths[i]`` are per frame of image ``i``, in frame-index order.
    ``moved_lengths`` lists ``(reference length, leading bytes to skip)`` of moved
    references; ``right_edge_lengths`` / ``bottom_edge_lengths`` the reference
    lengths of each ambiguous edge.  ``moved`` counts moved references.
    """

    starts: list[np.ndarray]
    lengths: list[np.ndarray]
    moved_lengths: tuple[tuple[int, int], ...]
    right_edge_lengths: tuple[int, ...]
    bottom_edge_lengths: tuple[int, ...]
    moved: int

    def codec_config(self) -> dict:
        """The table part of the codec configuration."""
        return {"moved_lengths": self.moved_lengths, "right_edge_lengths": self.right_edge_lengths,
                "bottom_edge_lengths": self.bottom_edge_lengths}


def chunk_references(headers: list[Header]) -> ChunkReferences:
    """Plan the references of images sharing one grid (a Cube shares one codec configuration).

    Two kinds of frame are moved: right-edge frames whose compressed length a
    bottom-edge frame also has (ambiguous grids only), and any frame whose
    compressed length equals the byte size of a chunk, so that no reference can
    pass for raw chunk bytes in a reader that has lost the codec (VirtualiZarr's
    Kerchunk writer drops array-to-bytes codecs).

    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> grid = FrameGrid(6, 6, 4, 4, 1)   # right edge (4, 2) and bottom edge (2, 4): 8 samples each
    >>> h = Header.from_byte_counts(grid, sample_type_from_name("uint8"), [30, 20, 20, 9])
    >>> plan = chunk_references([h])
    >>> plan.moved_lengths, plan.right_edge_lengths, plan.bottom_edge_lengths, plan.moved
    (((21, 1),), (21,), (20,), 1)
    >>> plan.starts[0].tolist(), plan.lengths[0].tolist()
    ([460, 489, 510, 530], [30, 21, 20, 9])
    """
    grid, sample = headers[0].grid, headers[0].sample_type
    starts = [h.offsets() for h in headers]
    lengths = [h.byte_counts() for h in headers]
    chunk_bytes = grid.bands_per_frame * grid.tile_length * grid.tile_width * sample.bytes_per_sample
    ambiguous = ambiguous_edges(grid)
    right, bottom = edge_masks(grid) if ambiguous else (np.zeros(grid.frame_count, bool),) * 2
    classes = {"right": right, "bottom": bottom, "other": ~(right | bottom)}

    def lengths_of(mask):
        return set(np.unique(np.concatenate([c[mask] for c in lengths])).tolist())

    conflicts = lengths_of(right) & lengths_of(bottom)
    groups = sorted({("right", n) for n in conflicts} | {(name, chunk_bytes) for name, mask in classes.items()
                                                          if chunk_bytes in lengths_of(mask)})
    taken = lengths_of(np.ones(grid.frame_count, bool)) | {chunk_bytes}   # never move a reference *to* a chunk's size
    moved, moved_lengths = 0, []
    for name, length in groups:
        k = 1
        while length + k in taken:
            k += 1
        taken.add(length + k)
        moved_lengths.append((length + k, k))
        for start, count in zip(starts, lengths):
            hit = classes[name] & (count == length)
            if np.any(start[hit] < k):  # cannot happen with a 252-byte prefix, unless the table is huge
                raise ValueError("a reference cannot be moved before the start of the file")
            start[hit] -= k
            count[hit] += k
            moved += int(hit.sum())
    return ChunkReferences(starts, lengths, tuple(sorted(moved_lengths)),
                           tuple(sorted(lengths_of(right))) if ambiguous else (),
                           tuple(sorted(lengths_of(bottom))) if ambiguous else (), moved)
