"""Counting the Python steps a call takes: a bound on work that no machine's load can make flaky."""

from __future__ import annotations

import sys
import tracemalloc

import pytest


class _OverBudget(BaseException):  # not an Exception: the code under test cannot catch it as an error
    pass


def python_steps(run, budget: int | None = None) -> int:
    """The Python calls and lines ``run()`` executes in this thread, stopped once past ``budget``.

    A count, not a time: the same code takes the same steps on any machine,
    however loaded, and a loop over what a blob claims fails at once instead
    of running for hours.

    >>> python_steps(lambda: sum(range(10))) > 0
    True
    """
    steps, previous = 0, sys.gettrace()

    def count(frame, event, arg):
        nonlocal steps
        steps += 1
        if budget is not None and steps > budget:
            raise _OverBudget
        return count

    sys.settrace(count)
    try:
        run()
    except _OverBudget:
        pytest.fail(f"more than {budget} Python steps")
    finally:
        sys.settrace(previous)
    return steps


def steps_and_peak(run, budget: int) -> tuple[int, int]:
    """:func:`python_steps` of ``run()`` and the peak of memory it allocated, in bytes.

    >>> steps, peak = steps_and_peak(lambda: bytes(1000), budget=100)
    >>> steps > 0, peak >= 1000
    (True, True)
    """
    tracemalloc.start()
    try:
        steps = python_steps(run, budget)
        return steps, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
