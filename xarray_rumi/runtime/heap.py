"""Keep frame and chunk buffers in the heap in processes that trim it eagerly (Dask workers).

``distributed`` starts its worker processes with ``MALLOC_TRIM_THRESHOLD_``
set to 64 KiB, so that glibc gives freed memory back to the system at once.
Setting it also freezes glibc's mmap threshold at 128 KiB.  The OpenZL codec
allocates and frees frame-sized work buffers on every call, and every Dask
chunk is a fresh array: in such a worker each of them became a new mapping,
faulted in page by page and unmapped again, so a chunk decoded in a worker
took far longer than in the client, and a Cube mean on a ``LocalCluster``
was slower than on the threaded scheduler even with its result left on the
workers.

Where the process started with that setting, the package raises the mmap
threshold to 32 MiB (the ceiling glibc's own dynamic threshold would reach)
and keeps 16 MiB at the top of the heap when it is trimmed (``M_TOP_PAD``):
the codec's buffers and chunks of a Cube's ``"auto"`` size are then reused
in place, while freed memory beyond those 16 MiB, and every array of 32 MiB
or more, still goes back to the system at once, which is what the setting
is for.  Nothing is changed where the trim
threshold is not set, where the caller chose these two settings
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TOP_PAD_``) themselves, or off glibc.
Measurements: docs/benchmarks.md, scenario 8.

A library that changes the allocator of the whole process says so: one
INFO line under ``xarray_rumi.runtime.heap`` names what it set and why, and
``XARRAY_RUMI_HEAP_TUNING=0`` in the environment turns it off (docs/backend.md
shows the ``distributed`` setting that does the same without the library).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading

from .fork import in_forked_child

logger = logging.getLogger(__name__)

#: Allocations below this come from the heap, not a mapping of their own (glibc's dynamic ceiling).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: What glibc keeps at the top of the heap when it trims: about one Cube chunk.
TOP_PAD = 16 * 1024 * 1024
_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": (-3, MMAP_THRESHOLD), "MALLOC_TOP_PAD_": (-2, TOP_PAD)}  # glibc's malloc.h
#: The environment variable that turns the tuning off (``0``) or leaves it on (``1``, or unset).
SWITCH = "XARRAY_RUMI_HEAP_TUNING"


def keep_heap_top() -> bool:
    """Adjust glibc once, where this process started with eager trimming; whether anything was set.

    Off where ``XARRAY_RUMI_HEAP_TUNING=0``; what it sets is logged at INFO,
    once for the process.

    >>> isinstance(keep_heap_top(), bool)
    True
    """
    if not _decided:  # decided once, whichever decoding thread comes first
        with _deciding:
            if not _decided:
                _decided.append(_tune())
    return _decided[0]


_decided: list[bool] = []
_deciding = threading.Lock()
# A lock held by another thread at fork time would never be released in the child.
in_forked_child(lambda: globals().update(_deciding=threading.Lock()))


def _tune() -> bool:
    if not tuning_wanted(os.environ):
        return False
    environment = _startup_environment()
    if "MALLOC_TRIM_THRESHOLD_" not in environment:
        return False
    libc = _glibc()
    if libc is None:
        return False
    applied = [name for name, (option, value) in _SETTINGS.items()
               if name not in environment and libc.mallopt(option, value) == 1]  # each one the caller left to us
    if applied:
        logger.info("set glibc's %s for this process (mallopt): it started with MALLOC_TRIM_THRESHOLD_ set, as "
                    "distributed's workers do, which makes every frame buffer a fresh mapping and halves decoding "
                    "speed; %s=0 turns this off", " and ".join(_DESCRIBED[name] for name in applied), SWITCH)
    return bool(applied)


_DESCRIBED = {"MALLOC_MMAP_THRESHOLD_": f"mmap threshold to {MMAP_THRESHOLD >> 20} MiB",
              "MALLOC_TOP_PAD_": f"top pad to {TOP_PAD >> 20} MiB"}


def tuning_wanted(environment) -> bool:
    """Whether ``XARRAY_RUMI_HEAP_TUNING`` in ``environment`` leaves the tuning on: unset, empty or ``1``.

    ``0`` turns it off; any other value is refused, naming the variable.

    >>> tuning_wanted({}), tuning_wanted({"XARRAY_RUMI_HEAP_TUNING": "0"})
    (True, False)
    """
    value = environment.get(SWITCH, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{SWITCH} must be 0 (allocator tuning off) or 1 (on), not {value!r}")
    return value != "0"


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
    try:
        # The process's own symbols, libc's among them: no search for the library (find_library runs ldconfig).
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    # musl has mallopt too (and ignores it); gnu_get_libc_version is glibc's own.
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


__all__ = ["MMAP_THRESHOLD", "SWITCH", "TOP_PAD", "keep_heap_top", "tuning_wanted"]
