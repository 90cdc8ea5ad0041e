"""The package's threads: the one module that starts them and hands them work.

Sharing the cores (``share_work``) is kept because ``ci/benchmarks/runtime.py`` shows it matters
(docs/benchmarks.md, *Measurements the code relies on*).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from .fork import in_forked_child


def computing_threads() -> int:
    """Threads that may compute at once in this process: its cores, or its Dask worker's threads.

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


def idle_threads() -> int:
    """Threads that could join a :func:`share_work` started now, the caller's own included (at least 1).

    >>> 1 <= idle_threads() <= computing_threads()
    True
    """
    return max(1, computing_threads() - _computing.working)


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cancel_or_wait(future: Future) -> bool:
    """Cancel ``future`` if no thread has started it, else wait until it is done; whether it was cancelled.

    >>> gate, started = threading.Event(), threading.Event()
    >>> busy = in_background(lambda: started.set() or gate.wait())
    >>> started.wait()                                  # the background thread is taken...
    True
    >>> cancel_or_wait(in_background(len, b"abc"))      # ...so this one never started
    True
    >>> gate.set()
    >>> cancel_or_wait(busy)                            # started: waited for
    False
    """
    if future.cancel():
        return True
    future.result()
    return False


# -- the pools ------------------------------------------------------------------


class _ProcessThreads:
    """A thread pool made on first use, kept for the process, grown on demand, new in a forked child."""

    def __init__(self, name: str):
        self._name = name
        self._lock = threading.Lock()
        self._pool: tuple[ThreadPoolExecutor, int] | None = None  # the pool and its size
        in_forked_child(self._forget)

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


_shared = _ProcessThreads("rumi")
_background = _ProcessThreads("rumi-background")


def _shared_pool(size: int = 0) -> ThreadPoolExecutor:
    """The process's pool of computing threads, with at least ``size`` (and :func:`computing_threads`) threads."""
    return _shared.get(max(size, computing_threads()))


def in_background(function, *args) -> Future:
    """Run ``function(*args)`` on the process's background thread: for work that waits on the disk, not the CPU.

    >>> in_background(len, b"abc").result()
    3
    """
    return _background.get(1).submit(function, *args)


# -- ordered results: the writer's frames ---------------------------------------


def ordered_map(function: Callable, items: Iterable, in_flight: int) -> Iterator:
    """``function(item)`` for each of ``items``, in order, at most ``in_flight`` of them handed out at once.

    >>> list(ordered_map(abs, [-3, 1, -2], in_flight=2))
    [3, 1, 2]
    """
    pool = _shared_pool()
    in_flight = max(1, in_flight)
    pending: collections.deque = collections.deque()
    try:
        for item in items:
            while len(pending) >= in_flight:
                yield _claimed(function, *pending.popleft())
            pending.append((item, pool.submit(function, item)))
        while pending:
            yield _claimed(function, *pending.popleft())
    finally:
        for _, future in pending:  # the caller stopped early (a failed write, say): unstarted work is dropped
            future.cancel()


def _claimed(function, item, future: Future):
    return function(item) if cancel_or_wait(future) else future.result()


# -- whole jobs in processes: rumi convert -j -----------------------------------


def in_processes(function: Callable, items: Iterable, processes: int) -> Iterator:
    """``function(item)`` for each of ``items`` on ``processes`` spawned processes, the results in order.

    >>> list(in_processes(abs, [-3, 1, -2], processes=2))
    [3, 1, 2]
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned, not forked: a forked child would inherit locks the parent's threads (Dask's, GDAL's) hold
    with ProcessPoolExecutor(max(1, processes), mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(function, items)


# -- sharing the cores: the reader's and the measurer's work --------------------


class _Computing:
    """How many threads of this process are running :func:`share_work` now (callers and helpers)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.working = 0

    def enter(self, limit: int, wanted: int) -> int:
        """Count the caller in; return how many helpers (at most ``wanted``) fit under ``limit``."""
        with self.lock:
            self.working += 1
            helpers = max(0, min(wanted, limit - self.working))
            self.working += helpers
            return helpers

    def more_than(self, limit: int) -> bool:
        """Whether more than ``limit`` threads are working (read without the lock: a helper checks it often)."""
        return self.working > limit

    def leave(self) -> None:
        with self.lock:
            self.working -= 1


_computing = _Computing()
# A forked child has none of the parent's threads, and a lock they held would never be released.
in_forked_child(_computing.__init__)


def share_work(batches: Iterable, prepare: Callable[[object], list[Callable[[], None]]], *,
               threads: int | None = None, at_most: int | None = None) -> None:
    """Run the work of ``batches`` on the calling thread and on as many idle cores as there are.

    ``prepare(batch)`` fetches what a batch needs and returns its pieces (callables); at most ``threads``
    (default :func:`computing_threads`) threads of the process work, and at most ``at_most`` here.  The
    first failure stops the work and is raised once every helper has finished its piece.

    >>> out = [0] * 6
    >>> share_work([range(0, 3), range(3, 6)], lambda batch: [lambda k=k: out.__setitem__(k, k * k) for k in batch])
    >>> out
    [0, 1, 4, 9, 16, 25]
    """
    limit = computing_threads() if threads is None else max(1, threads)
    wanted = limit - 1 if at_most is None else min(limit, at_most) - 1
    shared = _SharedWork(iter(batches), prepare)
    helpers = _computing.enter(limit, wanted)
    pool = _shared_pool(helpers) if helpers else None
    started = [pool.submit(shared.work, limit) for _ in range(helpers)]
    try:
        shared.work(None)
    finally:
        for future in started:
            # A helper no thread has started is not waited for (the pool may be
            # busy with other callers' helpers); its reserved place is given back.
            # A helper never raises: failures are kept in shared.failure.
            if cancel_or_wait(future):
                _computing.leave()
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
                if limit is not None and _computing.more_than(limit):
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


__all__ = ["cancel_or_wait", "computing_threads", "idle_threads", "in_background", "in_processes", "ordered_map", "share_work"]
