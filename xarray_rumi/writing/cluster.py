"""Frames encoded on a ``dask.distributed`` cluster, every task of the source's graph run once.

The frames are asked for a window at a time, so only a few windows are in
memory, each window its own graph submission.  Submissions share nothing by
themselves: a source block that spans two windows is released when the first
is done and computed again for the second (8 blocks of a ``map_blocks``
chain were computed 35 times), and data in the graph (``from_array``) is sent
again with each.  So the writer works on the graph: it knows the last window
that needs each task, holds a future on every result a later window needs,
and leaves held tasks out of later submissions, which then depend on the
results already on the workers.  A held result is let go once the last window
that needs it is submitted; the scheduler keeps it until that window's tasks
have run.  Each frame is compressed by a task of its own, where its block is.
"""

from __future__ import annotations

import collections
import sys
import uuid
from collections.abc import Iterator

#: Windows submitted ahead of the one being gathered: the cluster computes the next while the file takes this one.
WINDOWS_AHEAD = 1


class ClusterSession:
    """One write's computations on a distributed client: results a later window needs stay on the workers."""

    def __init__(self, client):
        self.client = client
        self._held: dict = {}  # key -> Future, for each result a later window needs

    @classmethod
    def active(cls) -> ClusterSession | None:
        """A session on the distributed client Dask would compute on (``dask.compute``'s choice), else ``None``."""
        if "distributed" not in sys.modules:  # no client without it; importing it would cost every write
            return None
        from dask.base import get_scheduler
        from distributed import Client

        client = getattr(get_scheduler(), "__self__", None)  # a client's scheduler is its bound ``get``
        return cls(client) if isinstance(client, Client) else None

    def threads(self) -> int:
        """Threads across the cluster's workers."""
        return sum(worker["nthreads"] for worker in self.client.scheduler_info()["workers"].values()) or 1

    def compute(self, array, keys: list) -> list:
        """The blocks ``keys`` of Dask ``array``; every result computed for them is held for the write.

        Choosing recipes computes a few sample frames before the write: their
        source blocks are kept, not computed a second time for the write.
        """
        graph = task_graph(array)
        needed = _upstream(graph, keys, self._held)
        futures = self.client.get({key: graph[key] for key in needed}, needed, sync=False)
        self._held.update(zip(needed, futures))
        return self.client.gather([self._held[key] for key in keys])

    def encoded(self, array, windows: list[list], encode_task) -> Iterator[bytes]:
        """``encode_task(k)``'s results for each ``k`` of ``windows`` in order, ``WINDOWS_AHEAD`` windows ahead.

        ``encode_task(k)`` is ``(function, key)``: ``function(block)`` encodes
        the block ``key`` of ``array``, frame ``k``.
        """
        graph = task_graph(array)
        name = f"encode_one-{uuid.uuid4().hex}"
        outputs = []
        for window in windows:
            outputs.append([])
            for k in window:
                function, key = encode_task(k)
                graph[(name, k)] = _task((name, k), function, key)
                outputs[-1].append((name, k))
        last_use = _last_use(graph, outputs)
        # results held for another frame grid (samples taken on tile frames, cell frames written) serve no window
        self._held = {key: future for key, future in self._held.items() if key in last_use}
        releases = collections.defaultdict(list)
        for key in self._held:
            releases[last_use[key]].append(key)
        pending = collections.deque()
        try:
            for index, keys in enumerate(outputs):
                pending.append(self._submit(graph, keys, index, last_use, releases))
                if len(pending) > WINDOWS_AHEAD:
                    yield from self._gathered(pending)
            while pending:
                yield from self._gathered(pending)
        finally:  # a failed or abandoned write: the cluster forgets its tasks
            self.client.cancel([future for futures in pending for future in futures] + list(self._held.values()))
            self._held.clear()

    def _gathered(self, pending: collections.deque) -> list:
        frames = self.client.gather(pending[0])  # a failure leaves the window pending, to be cancelled
        pending.popleft()
        return frames

    def _submit(self, graph: dict, outputs: list, index: int, last_use: dict, releases: dict) -> list:
        needed = _upstream(graph, outputs, self._held)
        later = [key for key in needed if last_use[key] > index]
        futures = self.client.get({key: graph[key] for key in needed}, outputs + later, sync=False)
        for key, future in zip(later, futures[len(outputs):]):
            self._held[key] = future
            releases[last_use[key]].append(key)
        for key in releases.pop(index, ()):
            del self._held[key]  # the scheduler keeps it until this window's tasks that need it have run
        return futures[:len(outputs)]


def task_graph(array) -> dict:
    """Dask ``array``'s graph as a dict of task-spec nodes (``dask._task_spec``), each listing its dependencies."""
    from dask._task_spec import convert_legacy_graph

    return convert_legacy_graph(dict(array.__dask_graph__()))


def _task(key, function, dependency):
    from dask._task_spec import Task, TaskRef

    return Task(key, function, TaskRef(dependency))


def _upstream(graph: dict, outputs: list, present) -> list:
    """The keys ``outputs`` need computed, stopping at results ``present`` on the cluster; keys not in ``graph``
    (a persisted collection's futures) are present already."""
    found, stack = {}, list(outputs)
    while stack:
        key = stack.pop()
        if key in found or key in present or key not in graph:
            continue
        found[key] = None
        stack.extend(graph[key].dependencies)
    return list(found)


def _last_use(graph: dict, windows: list[list]) -> dict:
    """For each key the ``windows`` need, the index of the last window that needs it.

    Walked from the last window back, each key once: a key already seen was
    needed by a window at least as late, and so were all its dependencies.
    """
    last = {}
    for index in reversed(range(len(windows))):
        stack = list(windows[index])
        while stack:
            key = stack.pop()
            if key in last or key not in graph:
                continue
            last[key] = index
            stack.extend(graph[key].dependencies)
    return last
