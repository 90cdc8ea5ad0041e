"""Per-thread memory to decode a frame into when a read wants only part of it.

A read (a window, a batch of chips) copies its part out before the thread
decodes its next frame, so one buffer a thread is enough; the reader and the
batch reader share it.
"""

from __future__ import annotations

import math
import threading

import numpy as np

#: Decoded bytes of the largest frame a thread keeps a buffer for, to decode frames of which a read
#: wants only a part (see :func:`frame_buffer`); a larger frame is decoded into memory of its own.
FRAME_BUFFER_BYTES = 16 * 1024 * 1024


_frame_buffers = threading.local()


def frame_buffer(shape: tuple[int, int, int], dtype: np.dtype) -> np.ndarray:
    """This thread's array of ``shape`` to decode a frame into when only a part of it is wanted.

    A read copies its part out before the thread decodes the next frame, so
    one buffer a thread is enough.  Decoding into memory the process already
    uses, rather than a fresh frame each time, is what keeps a small window
    near the cost of decoding its frames (docs/benchmarks.md, "Training
    chips").  A frame over :data:`FRAME_BUFFER_BYTES` gets memory of its own.

    >>> a = frame_buffer((1, 4, 4), np.dtype("uint16"))
    >>> b = frame_buffer((2, 2, 2), np.dtype("uint8"))
    >>> a.shape, b.shape, np.shares_memory(a, b), a.flags.c_contiguous and a.ctypes.data % 8 == 0
    ((1, 4, 4), (2, 2, 2), True, True)
    """
    size = math.prod(shape) * dtype.itemsize
    if size > FRAME_BUFFER_BYTES:
        return np.empty(shape, dtype)
    buffer = getattr(_frame_buffers, "buffer", None)
    if buffer is None or buffer.size < size:
        # uint64 storage keeps it 8-byte aligned, so the decoder writes straight into it
        buffer = _frame_buffers.buffer = np.empty(-(-size // 8), np.uint64).view(np.uint8)
    return buffer[:size].view(dtype).reshape(shape)


__all__ = ["FRAME_BUFFER_BYTES", "frame_buffer"]
