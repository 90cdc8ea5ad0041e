"""Measuring many candidate encodings at once, on the process's shared threads.

Choosing a recipe (``choose.py``) encodes small windows of sample frames
with many graphs and keeps the sizes.  GeoZL releases the GIL while it
encodes, so the calling thread and a few helpers on the shared pool measure
together; the pool lives as long as the process, so each of its threads
keeps the graphs it has built from one image to the next (building a graph
and its first use cost about as much as one measurement on a quick window).
"""

from __future__ import annotations

import threading

import numpy as np

from ..io.threads import result_or_run, shared_pool


class Measurer:
    """Sizes of many (stored, candidate) encodings, on the calling thread and ``workers - 1`` helpers.

    GeoZL releases the GIL while it encodes, so the helpers measure in parallel.
    Each size is a pure function of its pair: the threads change when, not what.
    The calling thread measures too, and helpers that have not started by the
    time it runs out of jobs are called off, so a pool busy with other work
    delays this one at most by the job a helper is measuring.

    >>> def encode(stored, candidate):  # a stand-in for a GeoZL graph
    ...     if candidate == "never":
    ...         raise RuntimeError("this graph does not apply")
    ...     return bytes(stored.size // candidate)
    >>> Measurer(2, encode).sizes([(np.zeros(64), 2), (np.zeros(64), 4), (np.zeros(64), "never")])
    [32, 16, None]
    """

    def __init__(self, workers: int, encode):
        self._encode = encode  # (stored, candidate) -> frame bytes; RuntimeError: does not apply
        self._helpers = max(0, workers - 1)

    def sizes(self, jobs: list[tuple[np.ndarray, str]]) -> list[int | None]:
        """The frame length of each job, ``None`` where the candidate does not apply."""
        sizes: list[int | None] = [None] * len(jobs)
        lock, order, failed = threading.Lock(), iter(range(len(jobs))), []

        def work():
            while not failed:
                with lock:
                    i = next(order, None)
                if i is None:
                    return
                stored, candidate = jobs[i]
                try:
                    sizes[i] = len(self._encode(stored, candidate))
                except RuntimeError:  # the recipe does not apply, or not at the pinned version
                    pass
                except BaseException:
                    failed.append(True)
                    raise

        count = min(self._helpers, len(jobs) - 1)
        # asked for as many threads as the writer encodes on: growing the pool later would drop the graphs built here
        helpers = [shared_pool(self._helpers + 1).submit(work) for _ in range(count)] if count > 0 else []
        try:
            work()
        finally:
            for helper in helpers:
                result_or_run(helper, lambda: None)  # not started: nothing is left for it
        return sizes


__all__ = ["Measurer"]
