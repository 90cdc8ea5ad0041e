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
that length.  Everything comes from the header blob: nothing is read, and the
references stay plain ``[url, offset, length]`` triples that Kerchunk,
VirtualiZarr and Icechunk all carry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .format.blob import Header
from .format.grid import FrameGrid


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
    """Byte ranges of the frames of one or more images on one grid, and the codec's edge table.

    ``starts[i]`` and ``lengths[i]`` are per frame of image ``i``, in frame-index order.
    ``moved`` counts the references that start before their frame.
    """

    starts: list[np.ndarray]
    lengths: list[np.ndarray]
    right_edge_lengths: tuple[tuple[int, int], ...]
    bottom_edge_lengths: tuple[int, ...]
    moved: int

    def codec_config(self) -> dict:
        """The edge-table part of the codec configuration."""
        return {"right_edge_lengths": self.right_edge_lengths, "bottom_edge_lengths": self.bottom_edge_lengths}


def chunk_references(headers: list[Header]) -> ChunkReferences:
    """Plan the references of images sharing one grid (a Cube shares one codec configuration).

    >>> from xarray_rumi.format.dtypes import sample_type_from_name
    >>> grid = FrameGrid(6, 6, 4, 4, 1)   # right edge (4, 2) and bottom edge (2, 4): 8 samples each
    >>> h = Header.from_byte_counts(grid, sample_type_from_name("uint8"), [30, 20, 20, 9])
    >>> plan = chunk_references([h])
    >>> plan.right_edge_lengths, plan.bottom_edge_lengths, plan.starts[0].tolist(), plan.lengths[0].tolist(), plan.moved
    (((21, 1),), (20,), [460, 489, 510, 530], [30, 21, 20, 9], 1)
    """
    grid = headers[0].grid
    starts = [h.offsets() for h in headers]
    lengths = [h.byte_counts() for h in headers]
    if not ambiguous_edges(grid):
        return ChunkReferences(starts, lengths, (), (), 0)
    right, bottom = edge_masks(grid)
    right_lengths = set(np.unique(np.concatenate([c[right] for c in lengths])).tolist())
    bottom_lengths = set(np.unique(np.concatenate([c[bottom] for c in lengths])).tolist())
    taken = set(np.unique(np.concatenate(lengths)).tolist())
    shift = {}
    for length in sorted(right_lengths & bottom_lengths):
        k = 1
        while length + k in taken:
            k += 1
        taken.add(length + k)
        shift[length] = k
    table = [(length, 0) for length in right_lengths - shift.keys()] + [(n + k, k) for n, k in shift.items()]
    moved = 0
    if shift:
        keys = np.array(sorted(shift), dtype=np.int64)
        values = np.array([shift[k] for k in keys.tolist()], dtype=np.int64)
        for start, count in zip(starts, lengths):
            hit = right & np.isin(count, keys)
            k = values[np.searchsorted(keys, count[hit])]
            if np.any(start[hit] < k):  # cannot happen with a 252-byte prefix, unless the table is huge
                raise ValueError("a right-edge reference cannot be moved before the start of the file")
            start[hit] -= k
            count[hit] += k
            moved += int(hit.sum())
    return ChunkReferences(starts, lengths, tuple(sorted(table)), tuple(sorted(bottom_lengths)), moved)
