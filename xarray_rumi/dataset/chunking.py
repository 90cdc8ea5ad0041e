"""Dask chunks of rumi arrays, ``chunks`` as ``xr.open_dataset`` means them, the frame the preferred chunk."""

from __future__ import annotations

import hashlib
import numbers
import warnings

import numpy as np

from ..datamodel.variable import Layout

_ACCEPTED = "None (no Dask), {}, 'auto', an int or a dict of sizes by dimension"


def frame_chunks(layout: Layout, chunks) -> tuple[tuple[int, ...], ...]:
    """Dask's chunks for ``layout`` from ``chunks`` as ``xr.open_dataset`` takes it, in whole frames where possible."""
    from dask.array.core import normalize_chunks

    frame = layout.chunks
    if chunks == "auto" and layout.stack_dim is not None:
        return cube_auto_chunks(layout)
    if chunks == "auto" or (isinstance(chunks, numbers.Integral) and not isinstance(chunks, bool)):
        chunks = dict.fromkeys(layout.dims, chunks)
    if isinstance(chunks, str):
        raise ValueError(f"chunks must be {_ACCEPTED}, not {chunks!r}")
    if not isinstance(chunks, dict):
        raise TypeError(f"chunks must be {_ACCEPTED}, not {type(chunks).__name__}")
    unknown = sorted(set(chunks) - set(layout.dims), key=str)
    if unknown:
        raise ValueError(f"chunks name dimensions the array does not have: {unknown} (it has {layout.dims})")
    # xarray's rule: a size left out, None or 0 is the preferred chunk, here one frame.
    asked = tuple(chunks.get(dim) or size for dim, size in zip(layout.dims, frame))
    normalized = normalize_chunks(asked, layout.shape, dtype=layout.dtype, previous_chunks=frame)
    _warn_cut_frames(layout, normalized)
    return normalized


def cube_auto_chunks(layout: Layout) -> tuple[tuple[int, ...], ...]:
    """``"auto"`` for a Cube: columns of whole frames through the stack (docs/backend.md, Decisions)."""
    import dask
    from dask.array.core import normalize_chunks
    from dask.utils import parse_bytes

    limit = parse_bytes(dask.config.get("array.chunk-size"))
    _, *frame = layout.chunks
    frame_bytes = int(np.prod(frame)) * layout.dtype.itemsize
    images = layout.shape[0]
    depth = min(images, max(1, limit // frame_bytes))
    if depth < images:
        return normalize_chunks((depth, *frame), layout.shape, dtype=layout.dtype)
    return normalize_chunks((images, "auto", "auto", "auto"), layout.shape, dtype=layout.dtype,
                            previous_chunks=layout.chunks, limit=max(limit // 4, images * frame_bytes))


def _warn_cut_frames(layout: Layout, chunks: tuple[tuple[int, ...], ...]) -> None:
    for dim, sizes, frame, extent in zip(layout.dims, chunks, layout.chunks, layout.shape):
        boundaries = np.cumsum(sizes)[:-1]
        cut = boundaries[(boundaries % frame != 0) & (boundaries < extent)]
        if cut.size:
            # xarray's own words, for the same situation in xr.open_dataset
            warnings.warn(f"The specified chunks separate the stored chunks along dimension {dim!r} starting at "
                          f"index {int(cut[0])}. This could degrade performance. Instead, consider rechunking after "
                          "loading.", UserWarning, stacklevel=4)
            return


def dask_array(backend_array, layout: Layout, chunks, *, verify: bool):
    """The Dask array reading ``backend_array`` in :func:`frame_chunks`, named by what it reads and how."""
    import dask.array

    named = hashlib.blake2b(digest_size=16)
    for source, header in zip(layout.sources, layout.headers):
        named.update(source.encode() + b"\0" + header.to_bytes())
    named.update(b"" if verify else b"\0unverified")
    blocks = frame_chunks(layout, chunks)
    named.update(repr(blocks).encode())
    return dask.array.from_array(backend_array, chunks=blocks, name=f"rumi-{named.hexdigest()}", lock=False,
                                 meta=np.ndarray, inline_array=False)


__all__ = ["cube_auto_chunks", "dask_array", "frame_chunks"]
