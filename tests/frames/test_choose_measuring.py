"""frames/choose.py encoded_sizes: many candidate encodings measured on the calling thread and idle cores."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from xarray_rumi.frames.choose import encoded_sizes

STORED = np.zeros(64, np.uint8)


def _length(stored, candidate) -> bytes:
    if candidate == "never":
        raise RuntimeError("this graph does not apply")
    return bytes(stored.size // candidate)


def test_each_size_is_its_own_jobs_and_none_where_the_candidate_does_not_apply():
    jobs = [(STORED, 2), (STORED, "never"), (STORED, 4), (STORED, 64)]
    assert encoded_sizes(workers=2, encode=_length, jobs=jobs) == [32, None, 16, 1]
    assert encoded_sizes(workers=2, encode=_length, jobs=[]) == []


def test_an_error_other_than_does_not_apply_is_raised():
    def broken(stored, candidate):
        raise MemoryError("out of memory")

    with pytest.raises(MemoryError):
        encoded_sizes(workers=2, encode=broken, jobs=[(STORED, 2), (STORED, 4)])


def test_one_worker_measures_on_the_calling_thread_alone(monkeypatch):
    monkeypatch.setattr("xarray_rumi.runtime.threads.computing_threads", lambda: 4)
    threads = set()

    def recording(stored, candidate):
        threads.add(threading.get_ident())
        return _length(stored, candidate)

    encoded_sizes(workers=1, encode=recording, jobs=[(STORED, c) for c in (1, 2, 4, 8, 16, 32)])
    assert threads == {threading.get_ident()}


def test_helpers_join_the_caller_on_idle_cores():
    """Two workers, and a job that waits until a second thread has started one: only a helper can start it."""
    second_started, threads, lock = threading.Event(), [], threading.Lock()

    def waiting(stored, candidate):
        with lock:
            threads.append(threading.get_ident())
            first = len(threads) == 1
        if first:
            assert second_started.wait(timeout=30), "no helper joined"
        else:
            second_started.set()
        return _length(stored, candidate)

    assert encoded_sizes(workers=2, encode=waiting, jobs=[(STORED, 2), (STORED, 4)]) == [32, 16]
    assert len(set(threads)) == 2
