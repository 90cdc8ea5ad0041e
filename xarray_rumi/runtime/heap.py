"""Keep frame buffers in the heap where Dask workers trim it eagerly (docs/benchmarks.md shows why)."""

from __future__ import annotations

import ctypes
import functools
import logging
import os

logger = logging.getLogger(__name__)

MMAP_THRESHOLD = 32 * 1024 * 1024
#: About one Cube chunk.
TOP_PAD = 16 * 1024 * 1024
#: glibc's ``mallopt`` options (malloc.h) by the environment variable that sets them, and what they are.
_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": (-3, MMAP_THRESHOLD, "mmap threshold"),
             "MALLOC_TOP_PAD_": (-2, TOP_PAD, "top pad")}
SWITCH = "XARRAY_RUMI_HEAP_TUNING"


@functools.cache
def keep_heap_top() -> bool:
    """Tune glibc once if this process started with eager trimming (unless ``SWITCH`` is 0); whether it did."""
    switch = os.environ.get(SWITCH, "").strip()
    if switch not in ("", "0", "1"):
        raise ValueError(f"{SWITCH} must be 0 (allocator tuning off) or 1 (on), not {switch!r}")
    environment = _startup_environment()
    libc = _glibc()
    if switch == "0" or "MALLOC_TRIM_THRESHOLD_" not in environment or libc is None:
        return False
    applied = [f"{what} to {value >> 20} MiB" for name, (option, value, what) in _SETTINGS.items()
               if name not in environment and libc.mallopt(option, value) == 1]
    if applied:
        logger.info("set glibc's %s for this process (mallopt): it started with MALLOC_TRIM_THRESHOLD_ set, as "
                    "distributed's workers do, which makes every frame buffer a fresh mapping and halves decoding "
                    "speed; %s=0 turns this off", " and ".join(applied), SWITCH)
    return bool(applied)


def _startup_environment() -> set[str]:
    # glibc read the environment the process started with, not today's os.environ
    try:
        with open("/proc/self/environ", "rb") as f:
            return {entry.split(b"=", 1)[0].decode(errors="replace") for entry in f.read().split(b"\0") if entry}
    except OSError:  # not Linux
        return set(os.environ)


def _glibc():
    try:
        # the process's own symbols: find_library would run ldconfig
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    # musl has mallopt too (and ignores it); gnu_get_libc_version is glibc's own.
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None
