"""Frames encoded on a ``dask.distributed`` cluster a window at a time, each task run once (docs/writing.md)."""

from __future__ import annotations

import bisect
import collections
import functools
import itertools
import sys
import uuid
from collections.abc import Callable, Iterator

import numpy as np

from ..format.grid import FrameGrid
from .blocks import check_declared_block

#: The cluster computes the next window while the file takes this one.
WINDOWS_AHEAD = 1


class ClusterSession:
    """One write's computations on a distributed client: results a later window needs stay on the workers."""

    def __init__(self, client):
        self.client = client
        self._held: dict = {}  # key -> Future of a result a later window needs

    @classmethod
    def active(cls) -> ClusterSession | None:
        """A session on the distributed client ``dask.compute`` would use, else ``None``."""
        if "distributed" not in sys.modules:  # no client without it; importing it would cost every write
            return None
        from dask.base import get_scheduler
        from distributed import Client

        client = getattr(get_scheduler(), "__self__", None)  # a client's scheduler is its bound ``get``
        return cls(client) if isinstance(client, Client) else None

    def threads(self) -> int:
        return sum(worker["nthreads"] for worker in self.client.scheduler_info()["workers"].values()) or 1

    def frames(self, array, grid: FrameGrid, indices: list[int]) -> list[np.ndarray]:
        """Frames ``indices`` of Dask ``array``, every result computed for them held for the write."""
        graph = _task_graph(array)
        keys = _add_frame_tasks(graph, array, grid, f"sample-{uuid.uuid4().hex}", [[k] for k in indices],
                                lambda k: None)
        needed = _upstream(graph, keys, self._held)
        futures = self.client.get({key: graph[key] for key in needed}, needed, sync=False)
        self._held.update(zip(needed, futures))
        return [frame for frames in self.client.gather([self._held[key] for key in keys]) for frame in frames]

    def encoded(self, array, grid: FrameGrid, windows: list[list[list[int]]], encoder: Callable) -> Iterator[bytes]:
        """``encoder(k)(frame)`` for each frame ``k`` of ``windows`` (lists of groups, a task each), in order."""
        graph = _task_graph(array)
        name = f"encode_one-{uuid.uuid4().hex}"
        outputs = [_add_frame_tasks(graph, array, grid, name, window, encoder) for window in windows]
        last_use = _last_use(graph, outputs)
        # results held for another grid (tile samples, cell frames written) serve no window
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
        groups = self.client.gather(pending[0])  # a failure leaves the window pending, to be cancelled
        pending.popleft()
        return [frame for frames in groups for frame in frames]

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


def holds_only_data(array) -> bool:
    """Whether every block of Dask ``array`` is an array in its graph, nothing to compute.

    >>> import dask.array as da
    >>> holds_only_data(da.from_array(np.zeros((1, 4, 4)), chunks=2)), holds_only_data(da.zeros((1, 4, 4)))
    (True, False)
    """
    from dask._task_spec import DataNode

    graph = _task_graph(array)
    return all(isinstance(getattr(graph.get((array.name, *index)), "value", None), np.ndarray)
               and isinstance(graph[(array.name, *index)], DataNode) for index in np.ndindex(*array.numblocks))


def _task_graph(array) -> dict:
    from dask._task_spec import convert_legacy_graph

    return convert_legacy_graph(dict(array.__dask_graph__()))


def _add_frame_tasks(graph: dict, array, grid: FrameGrid, name: str, groups: list, finish: Callable) -> list:
    """Add a task ``(name, first frame)`` per group of frames, each frame cut then ``finish(k)``-ed; their keys."""
    # a task per group: distributed's cost per task is several times that of encoding a frame
    from dask._task_spec import Task, TaskRef

    starts = [np.cumsum((0,) + sizes).tolist() for sizes in array.chunks]
    cut_name = f"frame-{uuid.uuid4().hex}"
    keys = []
    for group in groups:
        cut, arguments, from_larger = _group_cut(array, starts, grid, group)
        key, finishers = (name, group[0]), tuple(finish(k) for k in group)
        if finishers[0] is None:
            graph[key] = Task(key, cut, *arguments)
        elif from_larger:  # cut where the block is, finished where the scheduler finds room: frames move, not it
            cut_key = (cut_name, group[0])
            graph[cut_key] = Task(cut_key, cut, *arguments)
            graph[key] = Task(key, functools.partial(_finished, finishers=finishers), TaskRef(cut_key))
        else:
            graph[key] = Task(key, functools.partial(_finished_cut, cut=cut, finishers=finishers), *arguments)
        keys.append(key)
    return keys


def _group_cut(array, starts: list, grid: FrameGrid, group: list[int]):
    """``_cut_frames`` for the frames ``group``, its arguments, and whether a block is larger than a frame."""
    from dask._task_spec import TaskRef

    arguments, checks, frames = [], [], []
    position: dict = {}  # block index -> its place among the arguments
    for k in group:
        pieces = []
        for index, declared, into, part in _frame_pieces(array.chunks, starts, grid.frame_window(k)):
            if index not in position:
                position[index] = len(arguments)
                arguments.append(TaskRef((array.name, *index)))
                checks.append((index, declared))
            pieces.append((position[index], into, part))
        frames.append((grid.frame_shape(k), tuple(pieces)))
    cut = functools.partial(_cut_frames, checks=tuple(checks), dtype=array.dtype, frames=tuple(frames))
    from_larger = any(np.prod(declared) > np.prod(shape) for _, declared in checks for shape, _ in frames)
    return cut, arguments, from_larger


def _frame_pieces(chunks: tuple, starts: list, window: tuple[slice, ...]) -> tuple:
    """``(block index, declared shape, place in the frame, part of the block)`` for each block ``window`` meets."""
    per_axis = []
    for sizes, offsets, want in zip(chunks, starts, window):
        first = bisect.bisect_right(offsets, want.start) - 1
        found = []
        for i in range(first, len(sizes)):
            lo, hi = max(offsets[i], want.start), min(offsets[i + 1], want.stop)
            if lo >= hi:
                break
            found.append((i, sizes[i], slice(lo - want.start, hi - want.start), slice(lo - offsets[i], hi - offsets[i])))
        per_axis.append(found)
    return tuple(tuple(zip(*combination)) for combination in itertools.product(*per_axis))


def _cut_frames(*arrays, checks: tuple, frames: tuple, dtype: np.dtype) -> list[np.ndarray]:
    """The frames ``(shape, pieces)`` cut from ``arrays``, each first checked against its ``checks``."""
    for array, check in zip(arrays, checks):
        check_declared_block(array, *check, dtype)  # a longer block would be cut without a word
    cut = []
    for shape, pieces in frames:
        if len(pieces) == 1:
            position, _, part = pieces[0]
            cut.append(arrays[position][part])
            continue
        frame = np.empty(shape, dtype)
        for position, into, part in pieces:
            frame[into] = arrays[position][part]
        cut.append(frame)
    return cut


def _finished(frames: list, finishers: tuple) -> list:
    return [finish(frame) for finish, frame in zip(finishers, frames)]


def _finished_cut(*arrays, cut: Callable, finishers: tuple) -> list:
    return _finished(cut(*arrays), finishers)


def _upstream(graph: dict, outputs: list, present) -> list:
    """The keys ``outputs`` need computed; keys ``present`` or not in ``graph`` (persisted futures) are not."""
    found, stack = {}, list(outputs)
    while stack:
        key = stack.pop()
        if key in found or key in present or key not in graph:
            continue
        found[key] = None
        stack.extend(graph[key].dependencies)
    return list(found)


def _last_use(graph: dict, windows: list[list]) -> dict:
    """For each key the ``windows`` need, the index of the last window that needs it."""
    # from the last window back: a key seen already, and its dependencies, were needed as late
    last: dict = {}
    for index in reversed(range(len(windows))):
        last.update(dict.fromkeys(_upstream(graph, windows[index], last), index))
    return last
