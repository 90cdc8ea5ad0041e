"""Measuring many candidate encodings at once, on the calling thread and the idle cores."""

from __future__ import annotations

import functools

import numpy as np

from ..runtime.threads import share_work


class Measurer:
    """Sizes of many ``(stored, candidate)`` encodings, on the calling thread and ``workers - 1`` helpers.

    >>> def encode(stored, candidate):
    ...     if candidate == "never":
    ...         raise RuntimeError("this graph does not apply")
    ...     return bytes(stored.size // candidate)
    >>> Measurer(2, encode).sizes([(np.zeros(64), 2), (np.zeros(64), 4), (np.zeros(64), "never")])
    [32, 16, None]
    """

    def __init__(self, workers: int, encode):
        self._encode = encode  # (stored, candidate) -> frame bytes; RuntimeError: does not apply
        self._workers = max(1, workers)

    def sizes(self, jobs: list[tuple[np.ndarray, str]]) -> list[int | None]:
        """The frame length of each job, ``None`` where the candidate does not apply (``RuntimeError``)."""
        sizes: list[int | None] = [None] * len(jobs)

        def measure(i: int) -> None:
            stored, candidate = jobs[i]
            try:
                sizes[i] = len(self._encode(stored, candidate))
            except RuntimeError:  # the recipe does not apply, or not at the pinned version
                pass

        # one batch: the jobs need no fetching, so every piece is ready at once
        share_work([range(len(jobs))], lambda batch: [functools.partial(measure, i) for i in batch],
                   threads=self._workers, at_most=len(jobs))
        return sizes


__all__ = ["Measurer"]
