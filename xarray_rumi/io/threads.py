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

import collections
import os
import sys
import threading
from collections.abc import Callable, Iterable
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


def computing_threads() -> int:
    """Threads that may compute at once in this process: its cores, or its Dask worker's threads.

    A ``distributed`` worker runs ``nthreads`` tasks at once and shares the
    machine with other workers (a ``LocalCluster`` of two one-thread
    processes on two cores), so the cores it may use are its own threads;
    elsewhere (Dask's threaded scheduler, no Dask) they are the cores this
    process may run on.  ``distributed`` is only asked when it is imported.

    >>> computing_threads() >= 1
    True
    """
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            return max(1, int(distributed.get_worker().state.nthreads))
        except ValueError:  # not inside a worker's task
            pass
    return _cores()


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Computing:
    """How many threads of this process are running :func:`share_work` now (callers and helpers)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.busy = 0

    def enter(self, limit: int, wanted: int) -> int:
        """Count the caller in; return how many helpers (at most ``wanted``) fit under ``limit``."""
        with self.lock:
            self.busy += 1
            helpers = max(0, min(wanted, limit - self.busy))
            self.busy += helpers
            return helpers

    def crowded(self, limit: int) -> bool:
        return self.busy > limit

    def leave(self) -> None:
        with self.lock:
            self.busy -= 1


_computing = _Computing()
if hasattr(os, "register_at_fork"):
    # A forked child has none of the parent's threads, and a lock they held would never be released.
    os.register_at_fork(after_in_child=_computing.__init__)


def share_work(batches: Iterable, prepare: Callable[[object], list[Callable[[], None]]], *,
               threads: int | None = None, useful: int | None = None) -> None:
    """Run the work of ``batches`` on the calling thread and on as many idle cores as there are.

    ``batches`` only says what to do (no I/O while it is iterated);
    ``prepare(batch)`` fetches what a batch needs (it may wait on I/O) and
    returns its pieces of work, callables that compute (decode a frame into
    its place).  The calling thread always works; pool threads join it only
    while fewer than ``threads`` (default :func:`computing_threads`) threads
    of the process are working, and never more than ``useful`` threads in
    all (say, the number of frames), so two Dask tasks on a two-thread
    scheduler each work alone while a read on its own uses every core.  A
    helper leaves after its current piece when more callers arrive.  Each
    thread prepares the batch it claims itself, outside the lock, so remote
    fetches overlap with decoding; a thread claims a batch only when no
    prepared piece waits, so about one batch per thread is held at a time.
    The first failure stops the work and is raised here, once every helper
    has finished its piece.

    >>> out = [0] * 6
    >>> share_work([range(0, 3), range(3, 6)], lambda batch: [lambda k=k: out.__setitem__(k, k * k) for k in batch])
    >>> out
    [0, 1, 4, 9, 16, 25]
    """
    limit = computing_threads() if threads is None else max(1, threads)
    wanted = limit - 1 if useful is None else min(limit, useful) - 1
    shared = _SharedWork(iter(batches), prepare)
    helpers = _computing.enter(limit, wanted)
    pool = shared_pool(max(default_threads(), helpers)) if helpers else None
    started = [pool.submit(shared.work, limit) for _ in range(helpers)]
    try:
        shared.work(None)
    finally:
        for future in started:
            # A helper no thread has started is not waited for (the pool may be
            # busy with other callers' helpers); its reserved place is given back.
            if future.cancel():
                _computing.leave()
            else:
                future.result()  # failures are kept in shared.failure, never raised by a helper
        shared.work(None)  # the pieces a helper left behind when it made way for a caller
        _computing.leave()
    if shared.failure is not None:
        raise shared.failure


class _SharedWork:
    """What :func:`share_work`'s threads share: unclaimed batches, prepared pieces, the first failure."""

    def __init__(self, batches, prepare):
        self.changed = threading.Condition()
        self.batches = batches
        self.prepare = prepare
        self.pieces: collections.deque = collections.deque()
        self.preparing = 0
        self.failure: BaseException | None = None

    def work(self, limit: int | None) -> None:
        """Take pieces (or claim and prepare a batch) until none is left; a helper (``limit``) may leave early."""
        try:
            while (job := self._next()) is not None:
                piece, batch = job
                if batch is not None:
                    piece = self._prepared(batch)
                piece()
                if limit is not None and _computing.crowded(limit):
                    return
        except BaseException as exc:  # noqa: BLE001  (kept, and raised in the caller)
            with self.changed:
                self.failure = self.failure or exc
                self.changed.notify_all()
        finally:
            if limit is not None:
                _computing.leave()

    def _next(self):
        """``(piece, None)``, ``(None, batch)`` to prepare, or ``None`` when nothing is left to do."""
        with self.changed:
            while self.failure is None:
                if self.pieces:
                    return self.pieces.popleft(), None
                batch = next(self.batches, _NONE)
                if batch is not _NONE:
                    self.preparing += 1
                    return None, batch
                if not self.preparing:
                    return None
                self.changed.wait()  # another thread is fetching: its pieces may be shared
            return None

    def _prepared(self, batch) -> Callable[[], None]:
        try:
            first, *rest = self.prepare(batch) or [_nothing]
        except BaseException:
            with self.changed:
                self.preparing -= 1
            raise
        with self.changed:
            self.preparing -= 1
            self.pieces.extend(rest)
            self.changed.notify_all()
        return first


_NONE = object()


def _nothing() -> None:
    pass


__all__ = ["ProcessThreads", "computing_threads", "default_threads", "in_background", "result_or_run",
           "share_work", "shared_pool"]
