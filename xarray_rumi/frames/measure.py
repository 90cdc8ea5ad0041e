"""Measuring many candidate encodings at once, on threads kept for the process.

Choosing a recipe (``compression.py``) encodes small windows of sample frames
with many graphs and keeps the sizes.  GeoZL releases the GIL while it
encodes, so the calling thread and a few helper threads measure together;
the helpers live as long as the process because each keeps the graphs it has
built from one image to the next.
"""

from __future__ import annotations

import threading

import numpy as np

from ..io.threads import ProcessThreads

#: Kept for the process: each helper keeps its GeoZL graphs from one image to the next (building a
#: graph and its first use cost about as much as one measurement on a quick window).
_helper_threads = ProcessThreads("rumi-measure")


class Measurer:
    """Sizes of many (stored, candidate) encodings, on the calling thread and ``workers - 1`` helpers.

    GeoZL releases the GIL while it encodes, so the helpers measure in parallel.
    Each size is a pure function of its pair: the threads change when, not what.
    The calling thread measures too, so a helper busy for another writer only
    delays, never blocks, this one.

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
        helpers = [_helper_threads.get(self._helpers).submit(work) for _ in range(count)] if count > 0 else []
        try:
            work()
        finally:
            for helper in helpers:
                helper.result()
        return sizes


__all__ = ["Measurer"]
