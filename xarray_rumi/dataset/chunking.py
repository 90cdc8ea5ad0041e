"""Dask chunks of rumi arrays: whole frames, one task a chunk, a graph that stays small.

``chunks`` means what it means to ``xr.open_dataset``, the frame being the
backend's preferred chunk: ``{}`` one chunk per frame, ``"auto"`` Dask's
``array.chunk-size`` in multiples of frames, an int or a dict of sizes by
dimension (a dimension left out, or given ``None``, gets one frame's extent;
``-1`` the whole dimension).  ``None`` (no Dask) is the openers' to handle.
A Cube's ``"auto"`` is its own rule, :func:`cube_auto_chunks`.

Whatever the chunks, the array is one ``dask.array.from_array`` over the
backend array: the backend array is one value in the graph (so a worker
receives the blobs once, not once per task) and the chunk tasks are a
Blockwise layer that Dask materialises only when it schedules them.
"""

from __future__ import annotations

import hashlib
import numbers
import warnings

import numpy as np

from ..datamodel.variable import Layout

_ACCEPTED = "None (no Dask), {}, 'auto', an int or a dict of sizes by dimension"


def frame_chunks(layout: Layout, chunks) -> tuple[tuple[int, ...], ...]:
    """Dask's chunks for ``layout`` from ``chunks`` as ``xr.open_dataset`` takes it, in whole frames where possible.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> from xarray_rumi.datamodel.variable import image_layout
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((2, 100, 70), "uint8"), tile_size=32)
    >>> layout = image_layout(xarray_rumi.open_image(path, header=blob))
    >>> frame_chunks(layout, {})
    ((1, 1), (32, 32, 32, 4), (32, 32, 6))
    >>> frame_chunks(layout, {"y": 64, "x": -1, "band": None})
    ((1, 1), (64, 36), (70,))
    """
    from dask.array.core import normalize_chunks

    frame = layout.chunks
    if isinstance(chunks, dict) and not chunks:
        return normalize_chunks(frame, layout.shape, dtype=layout.dtype)  # the frame grid cuts no frame
    if isinstance(chunks, str) and chunks == "auto" and layout.stack_dim is not None:
        return cube_auto_chunks(layout)
    if isinstance(chunks, str) and chunks != "auto":
        raise ValueError(f"chunks must be {_ACCEPTED}, not {chunks!r}")
    if isinstance(chunks, str) or (isinstance(chunks, numbers.Integral) and not isinstance(chunks, bool)):
        chunks = dict.fromkeys(layout.dims, chunks)
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
    """``"auto"`` for a Cube: columns of whole frames through the stack, sized by Dask's ``array.chunk-size``.

    A chunk holds the same frames of as many images as fit in
    ``array.chunk-size`` (all of them, for most Cubes), so a reduction over
    the stacking dimension finishes inside each task, with no step that
    combines partial results.  When the whole stack fits, the chunk grows by
    whole frames up to a quarter of ``array.chunk-size`` (32 MiB by default):
    chunks that stay in the processor's cache make the reduction's own pass
    over them cheaper, and more chunks keep every thread busy to the end,
    while each still costs far more to decode than Dask's per-task overhead.
    docs/backend.md has the measurements behind this.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> from xarray_rumi.datamodel.variable import cube_layout
    >>> root = tempfile.mkdtemp()
    >>> paths = [os.path.join(root, f"{i}.rumi") for i in range(4)]
    >>> images = [xarray_rumi.open_image(p, header=xarray_rumi.write(p, np.zeros((1, 1024, 1024), "uint16")))
    ...           for p in paths]
    >>> cube_auto_chunks(cube_layout(images, "time"))
    ((4,), (1,), (1024,), (1024,))
    >>> import dask
    >>> with dask.config.set({"array.chunk-size": "1MiB"}):   # two frames' worth: two images deep
    ...     cube_auto_chunks(cube_layout(images, "time"))
    ((2, 2), (1,), (512, 512), (512, 512))
    """
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
            warnings.warn(
                f"The specified chunks separate the stored chunks along dimension {dim!r} starting at index "
                f"{int(cut[0])}. This could degrade performance. Instead, consider rechunking after loading.",
                UserWarning, stacklevel=4,
            )
            return


def dask_array(backend_array, layout: Layout, chunks, *, verify: bool):
    """The Dask array reading ``backend_array`` (shape ``layout.shape``) in :func:`frame_chunks`.

    Its name is derived from what the data is (each file's address and blob,
    and whether frames are verified), so the same images opened twice give
    the same Dask keys, and an unverified read never stands in for a
    verified one.
    """
    import dask.array

    named = hashlib.blake2b(digest_size=16)
    for source, header in zip(layout.sources, layout.headers):
        named.update(source.encode() + b"\0" + header.to_bytes())
    named.update(b"" if verify else b"\0unverified")
    blocks = frame_chunks(layout, chunks)
    named.update(repr(blocks).encode())  # other chunks are other keys
    return dask.array.from_array(
        backend_array, chunks=blocks, name=f"rumi-{named.hexdigest()}", lock=False, meta=np.ndarray,
        inline_array=False,
    )


__all__ = ["cube_auto_chunks", "dask_array", "frame_chunks"]
