"""Every block the writer encodes is the frame it stands for, or the write stops (docs/writing.md)."""

from __future__ import annotations

import numpy as np

from ..format.grid import FrameGrid


def check_frame_block(block, index: int, grid: FrameGrid, dtype: np.dtype) -> None:
    """Refuse ``block`` unless it has frame ``index``'s shape and the array's ``dtype``, and no masked values.

    >>> grid = FrameGrid(64, 100, 64, 64, 1)
    >>> check_frame_block(np.zeros((1, 64, 64), "uint16"), 0, grid, np.dtype("uint16"))
    >>> check_frame_block(np.zeros((1, 35, 64), "uint16"), 1, grid, np.dtype("uint16"))
    Traceback (most recent call last):
    ...
    ValueError: frame 1 (grid row 1, column 0) came with shape (1, 35, 64) and dtype uint16, where the frame is (1, 36, 64) of uint16: ...
    """
    expected = grid.frame_shape(index)
    if np.shape(block) != expected or getattr(block, "dtype", None) != dtype:
        row, col, band = grid.frame_location(index)
        where = f"grid row {row}, column {col}" + (f", band {band}" if grid.frames_per_position > 1 else "")
        _refuse_block(block, f"frame {index} ({where})", f"the frame is {expected} of {dtype}")
    refuse_masked(block, f"frame {index} of the data")


def checked_blocks(array):
    """``array`` (Dask) whose blocks are each checked against their declared chunk and dtype when computed.

    >>> import dask.array as da
    >>> short = da.zeros((1, 8, 4), dtype="uint8").map_blocks(lambda b: b[:, :7], dtype="uint8")
    >>> checked_blocks(short).compute()
    Traceback (most recent call last):
    ...
    ValueError: block (0, 0, 0) of the Dask array came with shape (1, 7, 4) and dtype uint8, where its chunks declare (1, 8, 4) ...
    """
    return array.map_blocks(_declared_block, dtype=array.dtype)


def _declared_block(block, block_info=None):
    if block_info is None:  # Dask inferring the output's type on a stand-in
        return block
    declared = block_info[None]
    check_declared_block(block, tuple(declared["chunk-location"]), tuple(declared["chunk-shape"]),
                         np.dtype(declared["dtype"]))
    return block


def check_declared_block(block, location: tuple, shape: tuple, dtype: np.dtype) -> None:
    if np.shape(block) != shape or getattr(block, "dtype", None) != dtype:
        _refuse_block(block, f"block {location} of the Dask array", f"its chunks declare {shape} of {dtype}")
    refuse_masked(block, f"block {location} of the Dask array")


def _refuse_block(block, what: str, declared: str):
    raise ValueError(f"{what} came with shape {np.shape(block)} and dtype {getattr(block, 'dtype', None)}, where "
                     f"{declared}: a Dask block must hold exactly what its chunks declare (for map_blocks: return "
                     "blocks of the declared chunks= and dtype=); nothing was written")


def refuse_masked(values, what: str = "the data") -> None:
    """Refuse a numpy masked array with masked values: rumi has no place for a mask (docs/writing.md, "Masks")."""
    if not isinstance(values, np.ma.MaskedArray):
        return
    masked = int(np.ma.count_masked(values))
    if masked:
        raise ValueError(f"{what} is a masked array with {masked} masked values of {values.size}; rumi has no place "
                         "for a mask, and the values under it would be stored as they are and read back as valid "
                         "pixels: fill them first (data.filled(nodata), or dask.array.ma.filled(data, nodata)), and "
                         "publish that nodata with xarray_rumi.stac.item(..., nodata=)")
