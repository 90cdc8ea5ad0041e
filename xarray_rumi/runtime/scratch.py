"""Per-thread scratch memory, reused from frame to frame (docs/benchmarks.md, "Training chips", shows why)."""

from __future__ import annotations

import math
import threading

import numpy as np

KEPT_BYTES = 16 * 1024 * 1024

#: Purposes in use at once, so each has its own memory.
FRAME, DECODED_BYTES = "decoded frame", "decoded bytes"

_kept = threading.local()


def scratch(purpose: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """This thread's reused C-contiguous, 8-byte-aligned array for ``purpose``.

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
        # OpenZL writes its numeric streams 8-byte aligned
        buffer = buffers[purpose] = np.empty(-(-size // 8), np.uint64).view(np.uint8)
    return buffer[:size].view(dtype).reshape(shape)
