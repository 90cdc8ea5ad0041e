"""The package's one per-thread scratch memory: aligned, reused, one array a purpose and a thread, bounded."""

from __future__ import annotations

import threading

import numpy as np

from xarray_rumi.runtime import scratch as module
from xarray_rumi.runtime.scratch import scratch


def test_an_array_is_reused_grown_and_stays_aligned():
    small = scratch("test", (1, 3, 3), np.uint8)
    large = scratch("test", (3, 64, 64), np.float64)
    again = scratch("test", (1, 3, 3), np.uint8)
    assert large.shape == (3, 64, 64) and large.dtype == np.float64 and large.flags.c_contiguous
    assert large.ctypes.data % 8 == 0 and np.shares_memory(again, large) and small.shape == (1, 3, 3)


def test_purposes_and_threads_have_memory_of_their_own():
    mine = scratch("test", (16,), np.uint8)
    assert not np.shares_memory(mine, scratch("another test", (16,), np.uint8))
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(scratch("test", (16,), np.uint8)))
    thread.start()
    thread.join()
    assert not np.shares_memory(mine, theirs[0])


def test_an_array_over_the_bound_is_memory_of_its_own(monkeypatch):
    monkeypatch.setattr(module, "KEPT_BYTES", 64)
    a, b = (scratch("test", (65,), np.uint8) for _ in range(2))
    assert not np.shares_memory(a, b)
    assert np.shares_memory(scratch("test", (64,), np.uint8), scratch("test", (8,), np.uint64))
