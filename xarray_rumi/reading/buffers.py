"""Memory for large read results (batches, windows, Cube chunks), reused once the caller lets one go."""

from __future__ import annotations

import math
import threading

import numpy as np

from ..runtime.fork import in_forked_child

#: Results smaller than this come from numpy as usual: the heap reuses their memory itself.
POOLED_FROM = 1024 * 1024
#: Bytes of let-go results kept for the next ones, at most.
KEPT_BYTES = 128 * 1024 * 1024
#: A result starts on a page: what pinning it for a GPU copy (``cudaHostRegister``) wants.
ALIGNMENT = 4096


def result_array(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised C-contiguous array, page-aligned; a large one in the memory of a result let go.

    >>> a = result_array((3, 1000, 1000), np.uint8)
    >>> address = a.ctypes.data
    >>> del a
    >>> result_array((3, 1000, 1000), np.uint8).ctypes.data == address
    True
    """
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    if size < POOLED_FROM:
        return np.empty(shape, dtype)
    memory = _released.take(size)
    if memory is None:
        raw = np.empty(size + ALIGNMENT, np.uint8)
        skip = -raw.ctypes.data % ALIGNMENT
        memory = raw[skip:skip + size]
    # bytes viewed as the dtype: an interface's typestr cannot name ml_dtypes' types (bfloat16 reads as void)
    return np.asarray(_Lease(memory, size)).view(dtype).reshape(shape)


class _Lease:
    """The base of a pooled result: once no view of the result is left, its memory goes back to the pool."""

    def __init__(self, memory: np.ndarray, size: int):
        self.memory = memory
        self.__array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (memory.ctypes.data, False),
                                    "version": 3}

    def __del__(self):
        try:
            _released.give(self.memory)
        except Exception:  # noqa: BLE001 - at interpreter exit the pool may be gone: the memory is freed anyway
            pass


class _Released:
    """Memory of results let go, oldest first, within :data:`KEPT_BYTES`."""

    def __init__(self):
        self.forget()
        in_forked_child(self.forget)

    def forget(self) -> None:
        # A child's copy of the parent's free memory is copy-on-write: reusing it would fault it in again;
        # and the lock may have been held by a thread the child does not have.
        self.blocks: list[np.ndarray] = []
        self.lock = threading.RLock()  # re-entrant: a lease may die (and give) while this thread is taking

    def take(self, size: int) -> np.ndarray | None:
        """The smallest kept block of ``size`` to ``2 * size`` bytes, the latest let go of equal ones (warmest)."""
        with self.lock:
            fits = [i for i, block in enumerate(self.blocks) if size <= block.size <= 2 * size]
            if not fits:
                return None
            return self.blocks.pop(min(fits, key=lambda i: (self.blocks[i].size, -i)))

    def give(self, block: np.ndarray) -> None:
        with self.lock:
            self.blocks.append(block)
            while sum(b.size for b in self.blocks) > KEPT_BYTES:
                self.blocks.pop(0)


_released = _Released()


__all__ = ["ALIGNMENT", "KEPT_BYTES", "POOLED_FROM", "result_array"]
