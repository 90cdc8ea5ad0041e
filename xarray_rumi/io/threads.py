"""The process's worker threads: how many to use, and the pools every part shares.

Decoding and encoding release the GIL, so the reader and the writer spread
frames over a few threads.  One pool of :func:`default_threads` threads,
made on first use and kept for the process, serves all that computing: the
reader's decoding, the writer's encoding, the measuring that chooses
recipes.  Its threads keep what they build (scratch buffers, the measurer's
GeoZL graphs) from one call to the next.  Work that only waits for the disk
(a write-back ``fdatasync``, ~2.5 ms a 4 MiB step here; freeing a replaced
28 MB file's blocks, ~8 ms) goes to one background thread instead, so that
it never idles a computing thread.  Both are :class:`ProcessThreads`; a
forked child starts without the parent's threads, so it makes its own.

A task must never wait for another task on the same pool: with every thread
waiting, the awaited task would never start.  Only callers outside the pool
wait, and :func:`result_or_run` lets a caller run a task that no thread has
started itself, so even a caller that is busy on the pool cannot stall.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor


def default_threads() -> int:
    """Threads a read or a write uses unless told otherwise: one a core, at most 4.

    >>> 1 <= default_threads() <= 4
    True
    """
    return min(4, os.cpu_count() or 1)


class ProcessThreads:
    """A thread pool made on first use, kept for the process, grown on demand, new in a forked child.

    The package keeps one, behind :func:`shared_pool`.

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
                    old[0].shutdown(wait=False)  # what it runs or has queued still finishes
            return self._pool[0]

    def _forget(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._pool, self._lock = None, threading.Lock()


_shared = ProcessThreads("rumi")
_background = ProcessThreads("rumi-background")


def shared_pool(size: int | None = None) -> ThreadPoolExecutor:
    """The process's one pool of worker threads, with at least ``size`` (default: :func:`default_threads`).

    Submit work that never waits for other work on the pool.

    >>> shared_pool().submit(pow, 2, 10).result()
    1024
    >>> shared_pool(2) is shared_pool()
    True
    """
    return _shared.get(default_threads() if size is None else size)


def in_background(function, *args) -> Future:
    """Run ``function(*args)`` on the process's background thread: for work that waits on the disk, not the CPU.

    >>> in_background(len, b"abc").result()
    3
    """
    return _background.get(1).submit(function, *args)


def result_or_run(future: Future, run):
    """The result of ``future``; if no thread has started it yet, cancel it and call ``run()`` here instead.

    The caller then never waits behind work queued for others on the shared
    pool, nor for a thread when it is itself one of the pool's.

    >>> import threading
    >>> gate = threading.Event()
    >>> pool = ThreadPoolExecutor(1)
    >>> blocker = pool.submit(gate.wait)          # the only thread is busy
    >>> queued = pool.submit(threading.get_ident)
    >>> result_or_run(queued, threading.get_ident) == threading.get_ident()  # ran here
    True
    >>> gate.set(), pool.shutdown()
    (None, None)
    """
    if future.cancel():
        return run()
    return future.result()


__all__ = ["ProcessThreads", "default_threads", "in_background", "result_or_run", "shared_pool"]
