"""Threads kept for the process: how many to use, and pools that outlive one call.

Decoding and encoding release the GIL, so the reader and the writer spread
frames over a few threads.  Pools that serve many calls (the reader's
decoding threads, the threads that measure recipes, each keeping the graphs
it has built) live as long as the process; a forked child starts without the
parent's threads, so it gets pools of its own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor


def default_threads() -> int:
    """Threads a read or a write uses unless told otherwise: one a core, at most 4.

    >>> 1 <= default_threads() <= 4
    True
    """
    return min(4, os.cpu_count() or 1)


class ProcessThreads:
    """A thread pool made on first use, kept for the process, grown on demand, new in a forked child.

    >>> pool = ProcessThreads("rumi-example")
    >>> pool.get(2).submit(sum, [1, 2]).result()
    3
    """

    def __init__(self, name: str):
        self._name = name
        self._lock = threading.Lock()
        self._pool: tuple[ThreadPoolExecutor, int] | None = None  # the pool and its size
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def get(self, size: int) -> ThreadPoolExecutor:
        """The pool, with at least ``size`` threads."""
        with self._lock:
            if self._pool is None or self._pool[1] < size:
                old, self._pool = self._pool, (ThreadPoolExecutor(size, thread_name_prefix=self._name), size)
                if old is not None:
                    old[0].shutdown(wait=False)  # what it runs still finishes
            return self._pool[0]

    def _forget(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._pool, self._lock = None, threading.Lock()


__all__ = ["ProcessThreads", "default_threads"]
