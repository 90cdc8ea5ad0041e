"""Per-thread scratch memory, reused from frame to frame: where a frame is decoded when it cannot go to its place.

Fresh memory for each frame costs up to twice the decoding (docs/benchmarks.md, "Training chips").
"""

from __future__ import annotations

import math
import threading

import numpy as np

#: Bytes of the largest array a thread keeps; a larger one is memory of its own, let go after use.
KEPT_BYTES = 16 * 1024 * 1024

#: Purposes, each its own memory as both are in use at once: a read decodes a frame it cuts into a
#: ``FRAME``; the decoder, where that array cannot take the bytes as they are, into ``DECODED_BYTES``.
FRAME, DECODED_BYTES = "decoded frame", "decoded bytes"

_kept = threading.local()


def scratch(purpose: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """This thread's C-contiguous, 8-byte-aligned array of ``shape`` and ``dtype`` for ``purpose``, reused.

    >>> a = scratch("example", (1, 4, 4), np.dtype("uint16"))
    >>> b = scratch("example", (2, 2, 2), np.dtype("uint8"))
    >>> np.shares_memory(a, b), np.shares_memory(a, scratch("other", (4,), np.dtype("uint8"))), a.ctypes.data % 8
    (True, False, 0)
    """
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    if size > KEPT_BYTES:
        return np.empty(shape, dtype)
    buffers = _kept.__dict__.setdefault("buffers", {})
    buffer = buffers.get(purpose)
    if buffer is None or buffer.size < size:
        # uint64 storage keeps it 8-byte aligned: OpenZL writes its numeric streams aligned
        buffer = buffers[purpose] = np.empty(-(-size // 8), np.uint64).view(np.uint8)
    return buffer[:size].view(dtype).reshape(shape)


__all__ = ["DECODED_BYTES", "FRAME", "KEPT_BYTES", "scratch"]
