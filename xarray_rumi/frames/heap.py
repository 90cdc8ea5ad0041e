"""Keep the codec's work buffers in the heap in processes that trim it eagerly (Dask workers).

``distributed`` starts its worker processes with ``MALLOC_TRIM_THRESHOLD_``
set to 64 KiB, so that glibc gives freed memory back to the system at once.
Setting it also freezes glibc's mmap threshold at 128 KiB, and the OpenZL
codec allocates and frees frame-sized work buffers on every call: in such a
worker each of them became a fresh mapping, faulted in and unmapped again,
frame after frame, and decoding ran at half speed (a 24-frame chunk on a
worker thread: 25 ms normally, 51-57 ms there).  Raising the mmap threshold
to 4 MiB (buffers below it come from the heap) and keeping 4 MiB at the top
of the heap when it is trimmed (``M_TOP_PAD``) brings it back to 27 ms,
while freed memory beyond those 4 MiB, and every array of 4 MiB or more,
still goes back to the system at once, which is what the setting is for.
Nothing is changed where the trim threshold is not set, where the caller
chose these two settings themselves, or off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

#: Allocations below this come from the heap, not a mapping of their own: a few frames' work buffers.
MMAP_THRESHOLD = 4 * 1024 * 1024
#: What glibc keeps at the top of the heap when it trims.
TOP_PAD = 4 * 1024 * 1024
_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": (-3, MMAP_THRESHOLD), "MALLOC_TOP_PAD_": (-2, TOP_PAD)}  # glibc's malloc.h


@functools.cache
def keep_heap_top() -> bool:
    """Adjust glibc once, where this process started with eager trimming; whether anything was set.

    >>> isinstance(keep_heap_top(), bool)
    True
    """
    environment = _startup_environment()
    if "MALLOC_TRIM_THRESHOLD_" not in environment:
        return False
    libc = _glibc()
    if libc is None:
        return False
    applied = [libc.mallopt(option, value) == 1 for name, (option, value) in _SETTINGS.items()
               if name not in environment]  # each one the caller did not choose, every one of them
    return any(applied)


def _startup_environment() -> set[str]:
    """The names in the environment this process started with, which is what glibc read.

    ``os.environ`` may have changed since: ``distributed`` sets the variable
    there while it starts worker processes, which does not change this
    process's allocator.
    """
    try:
        with open("/proc/self/environ", "rb") as f:
            return {entry.split(b"=", 1)[0].decode(errors="replace") for entry in f.read().split(b"\0") if entry}
    except OSError:  # not Linux
        return set(os.environ)


def _glibc():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    # musl has mallopt too (and ignores it); gnu_get_libc_version is glibc's own.
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


__all__ = ["MMAP_THRESHOLD", "TOP_PAD", "keep_heap_top"]
