"""The one module that starts the package's threads (docs/benchmarks.md shows why ``share_work`` is kept)."""

from __future__ import annotations

import collections
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from .fork import in_forked_child


def computing_threads() -> int:
    """Threads that may compute at once in this process: its cores, or its Dask worker's threads."""
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            return max(1, int(distributed.get_worker().state.nthreads))
        except ValueError:  # not inside a worker's task
            pass
    return _cores()


def idle_threads() -> int:
    """Threads that could join a :func:`share_work` started now, the caller's own included (at least 1)."""
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
    >>> started.wait() and cancel_or_wait(in_background(len, b"abc"))  # queued: never started
    True
    >>> gate.set(); cancel_or_wait(busy)  # started: waited for
    False
    """
    if future.cancel():
        return True
    future.result()
    return False


class _ProcessThreads:
    """A thread pool made on first use, grown on demand, new in a forked child."""

    def __init__(self, name: str):
        self._name = name
        self._lock = threading.Lock()
        self._pool: tuple[ThreadPoolExecutor, int] | None = None
        in_forked_child(self._forget)

    def get(self, size: int) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pool[1] < size:
                old, self._pool = self._pool, (ThreadPoolExecutor(size, thread_name_prefix=self._name), size)
                if old is not None:
                    old[0].shutdown(wait=False)
            return self._pool[0]

    def _forget(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._pool, self._lock = None, threading.Lock()


_shared = _ProcessThreads("rumi")
_background = _ProcessThreads("rumi-background")
_network = _ProcessThreads("rumi-network")
#: Calls waiting on answers at once (opens from many threads); threads are made only as calls wait.
NETWORK_THREADS = 64


def _shared_pool(size: int = 0) -> ThreadPoolExecutor:
    return _shared.get(max(size, computing_threads()))


def in_background(function, *args) -> Future:
    """Run ``function(*args)`` on the process's one background thread (for disk waits)."""
    return _background.get(1).submit(function, *args)


def waiting_on_network(function, *args) -> Future:
    """Run ``function(*args)``, which mostly waits for answers, on a thread of its own: such calls overlap."""
    return _network.get(NETWORK_THREADS).submit(function, *args)


def ordered_map(function: Callable, items: Iterable, in_flight: int) -> Iterator:
    """``function(item)`` for each of ``items``, in order, at most ``in_flight`` of them handed out at once.

    >>> list(ordered_map(abs, [-3, 1, -2], in_flight=2))
    [3, 1, 2]
    """
    pool = _shared_pool()
    pending: collections.deque = collections.deque()
    try:
        for item in items:
            while len(pending) >= in_flight:
                yield _claimed(function, *pending.popleft())
            pending.append((item, pool.submit(function, item)))
        while pending:
            yield _claimed(function, *pending.popleft())
    finally:
        for _, future in pending:  # the caller stopped early
            future.cancel()


def _claimed(function, item, future: Future):
    # a piece no pool thread has started is run here rather than waited for
    return function(item) if cancel_or_wait(future) else future.result()


def in_processes(function: Callable, items: Iterable, processes: int) -> Iterator:
    """``function(item)`` for each of ``items`` on ``processes`` spawned processes, the results in order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned, not forked: a forked child would inherit locks the parent's threads (Dask's, GDAL's) hold
    with ProcessPoolExecutor(max(1, processes), mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(function, items)


class _Computing:
    def __init__(self):
        self.lock = threading.Lock()
        self.working = 0

    def enter(self, limit: int, wanted: int) -> int:
        with self.lock:
            self.working += 1
            helpers = max(0, min(wanted, limit - self.working))
            self.working += helpers
            return helpers

    def leave(self) -> None:
        with self.lock:
            self.working -= 1


_computing = _Computing()
in_forked_child(_computing.__init__)


def share_work(batches: Iterable, prepare: Callable[[object], list[Callable[[], None]]], *,
               threads: int | None = None, at_most: int | None = None) -> None:
    """Run ``prepare(batch)``'s pieces for each batch on this thread and idle cores; raise the first failure.

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
            # an unstarted helper gives its place back rather than wait on a busy pool
            if cancel_or_wait(future):
                _computing.leave()
        shared.work(None)  # the pieces a helper left behind when it made way for a caller
        _computing.leave()
    if shared.failure is not None:
        raise shared.failure


_preparing = threading.local()  # .work: the _SharedWork whose batch this thread is preparing


def share_with_idle(pieces: list) -> bool:
    """Queue ``pieces`` for the :func:`share_work` whose batch this thread prepares, if one of its threads idles."""
    work = getattr(_preparing, "work", None)
    return work is not None and work.share_if_idle(pieces)


class _SharedWork:

    def __init__(self, batches, prepare):
        self.changed = threading.Condition()
        self.batches = batches
        self.prepare = prepare
        self.pieces: collections.deque = collections.deque()
        self.preparing = 0
        self.idle = 0
        self.failure: BaseException | None = None

    def share_if_idle(self, pieces: list) -> bool:
        with self.changed:
            if self.idle <= len(self.pieces) or self.failure is not None:
                return False
            self.pieces.extend(pieces)
            self.changed.notify_all()
            return True

    def work(self, limit: int | None) -> None:
        try:
            while (piece := self._next()) is not None:
                piece()
                if limit is not None and _computing.working > limit:  # read without the lock, after every piece
                    return
        except BaseException as exc:  # noqa: BLE001  (kept, and raised in the caller)
            with self.changed:
                self.failure = self.failure or exc
                self.changed.notify_all()
        finally:
            if limit is not None:
                _computing.leave()

    def _next(self):
        with self.changed:
            while self.failure is None:
                if self.pieces:
                    return self.pieces.popleft()
                batch = next(self.batches, _NONE)
                if batch is not _NONE:
                    self.preparing += 1
                    return functools.partial(self._prepare_and_run, batch)
                if not self.preparing:
                    return None
                self.idle += 1
                self.changed.wait()  # another thread is fetching: its pieces may be shared
                self.idle -= 1
            return None

    def _prepare_and_run(self, batch) -> None:
        outer, _preparing.work = getattr(_preparing, "work", None), self
        rest: list = []
        try:
            first, *rest = self.prepare(batch) or [lambda: None]
        finally:
            _preparing.work = outer
            with self.changed:
                self.preparing -= 1
                self.pieces.extend(rest)
                self.changed.notify_all()
        first()


_NONE = object()
