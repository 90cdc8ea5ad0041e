"""Frames encoded on a ``dask.distributed`` cluster, a window at a time, every task of the source's graph run once.

Each window is a graph submission of its own; the results a later window
needs are held on the workers and left out of its submission, so nothing is
computed or sent twice (docs/writing.md, "On a cluster").
"""

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

    def frames(self, array, grid: FrameGrid, indices: list[int]) -> list[np.ndarray]:
        """Frames ``indices`` of Dask ``array`` (``(band, y, x)``); every result computed for them is held.

        Choosing recipes computes a few sample frames before the write: their
        source blocks are kept for the write, not computed a second time.
        """
        graph = _task_graph(array)
        keys = _add_frame_tasks(graph, array, grid, f"sample-{uuid.uuid4().hex}", [[k] for k in indices],
                                lambda k: None)
        needed = _upstream(graph, keys, self._held)
        futures = self.client.get({key: graph[key] for key in needed}, needed, sync=False)
        self._held.update(zip(needed, futures))
        return [frame for frames in self.client.gather([self._held[key] for key in keys]) for frame in frames]

    def encoded(self, array, grid: FrameGrid, windows: list[list[list[int]]], encoder: Callable) -> Iterator[bytes]:
        """``encoder(k)(frame)`` for each frame ``k`` of ``windows`` in order, ``WINDOWS_AHEAD`` windows ahead.

        A window is a list of groups of frames, each group computed by one task.
        """
        graph = _task_graph(array)
        name = f"encode_one-{uuid.uuid4().hex}"
        outputs = [_add_frame_tasks(graph, array, grid, name, window, encoder) for window in windows]
        last_use = _last_use(graph, outputs)
        # results held for frames of another grid (samples of tile frames, cell frames written) serve no window
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
    """Dask ``array``'s graph as a dict of task-spec nodes (``dask._task_spec``), each listing its dependencies."""
    from dask._task_spec import convert_legacy_graph

    return convert_legacy_graph(dict(array.__dask_graph__()))


def _add_frame_tasks(graph: dict, array, grid: FrameGrid, name: str, groups: list, finish: Callable) -> list:
    """Add to ``graph`` a task ``(name, first frame)`` per group of frames: cut from ``array``, each then
    ``finish(k)`` (``None``: returned as cut); returns their keys.

    A task per group, not per frame: distributed's cost per task is several
    times that of encoding a frame.
    """
    from dask._task_spec import Task, TaskRef

    starts = [np.cumsum((0,) + sizes).tolist() for sizes in array.chunks]
    cut_name = f"frame-{uuid.uuid4().hex}"
    keys = []
    for group in groups:
        cut, arguments, from_larger = _group_cut(graph, array, starts, grid, group)
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


def _group_cut(graph: dict, array, starts: list, grid: FrameGrid, group: list[int]):
    """``_cut_frames`` for the frames ``group``, its arguments, and whether a computed block is larger than a frame.

    A block whose data is in the graph (``from_array``) is checked here, and
    only each frame's piece of it is passed: the data travels once, a window
    at a time, in tasks that need no other and so spread over the workers.
    """
    from dask._task_spec import DataNode, TaskRef

    arguments, checks, frames = [], [], []
    computed: dict = {}  # computed block index -> its position among the arguments
    for k in group:
        pieces = []
        for index, declared, into, part in _frame_pieces(array.chunks, starts, grid.frame_window(k)):
            node = graph.get((array.name, *index))
            if isinstance(node, DataNode) and isinstance(node.value, np.ndarray):
                check_declared_block(node.value, index, declared, array.dtype)
                pieces.append((len(arguments), into, ...))
                arguments.append(node.value[part])
                checks.append(None)
                continue
            if index not in computed:
                computed[index] = len(arguments)
                arguments.append(TaskRef((array.name, *index)))
                checks.append((index, declared))
            pieces.append((computed[index], into, part))
        frames.append((grid.frame_shape(k), tuple(pieces)))
    cut = functools.partial(_cut_frames, checks=tuple(checks), dtype=array.dtype, frames=tuple(frames))
    from_larger = any(check is not None and np.prod(check[1]) > np.prod(shape)
                      for check in checks for shape, _ in frames)
    return cut, arguments, from_larger


def _frame_pieces(chunks: tuple, starts: list, window: tuple[slice, ...]) -> tuple:
    """``(block index, its declared shape, where it goes in the frame, what of it)`` for each block ``window`` meets.

    ``starts`` holds each axis's block offsets, ``0`` to the axis's size.

    >>> chunks = ((1,), (3, 3), (4,))
    >>> [piece[0] for piece in _frame_pieces(chunks, [[0, 1], [0, 3, 6], [0, 4]], (slice(0, 1), slice(2, 5), slice(0, 4)))]
    [(0, 0, 0), (0, 1, 0)]
    """
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
    """The frames ``(shape, pieces)`` cut from ``arrays``; each block first checked against ``checks``
    (``(index, declared shape)``, or ``None`` for a piece of data checked when the graph was built)."""
    for array, check in zip(arrays, checks):
        if check is not None:
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
