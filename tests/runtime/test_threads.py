"""The package's threads: share_work (the caller works, idle cores help, busy cores are not oversubscribed),
ordered_map, cancel_or_wait, in_processes, and a forked child's fresh start."""

from __future__ import annotations

import threading

import pytest

from xarray_rumi.runtime import threads
from xarray_rumi.runtime.threads import cancel_or_wait, computing_threads, in_processes, ordered_map, share_work


def _recording(out: dict, prepared: list | None = None):
    def prepare(batch):
        if prepared is not None:
            prepared.append(batch)
        return [lambda k=k: out.__setitem__(k, threading.get_ident()) for k in batch]
    return prepare


def test_every_piece_runs_once_and_the_count_of_working_threads_returns_to_zero():
    out = {}
    share_work([range(i, i + 7) for i in range(0, 70, 7)], _recording(out), threads=2)
    assert sorted(out) == list(range(70))
    assert threads._computing.working == 0


def test_an_idle_core_helps_the_caller():
    """Piece 0 (on whichever thread) waits for piece 1 to start on another: only two threads can finish this."""
    started_1 = threading.Event()
    seen = []

    def prepare(batch):
        def first():
            seen.append(threading.get_ident())
            assert started_1.wait(timeout=20), "no second thread ever took a piece"

        def second():
            seen.append(threading.get_ident())
            started_1.set()

        return [first, second]

    share_work([0], prepare, threads=2)
    assert len(set(seen)) == 2


def test_a_busy_process_gets_no_helpers(monkeypatch):
    """Two callers on two cores (Dask's two-thread scheduler): each works alone, no third or fourth thread."""
    inside, release = threading.Event(), threading.Event()
    asked = []
    pool = threads._shared_pool
    monkeypatch.setattr(threads, "_shared_pool", lambda size=0: asked.append(size) or pool(size))

    def other_task():  # a Dask task of the same process, busy in share_work
        share_work([0], lambda _: [lambda: (inside.set(), release.wait(timeout=20))], threads=2, at_most=1)

    other = threading.Thread(target=other_task)
    other.start()
    try:
        assert inside.wait(timeout=20)
        out = {}
        share_work([range(k, k + 3) for k in range(0, 30, 3)], _recording(out), threads=2)
        assert set(out.values()) == {threading.get_ident()}
        assert asked == []  # no helper was even asked for
    finally:
        release.set()
        other.join()
    assert threads._computing.working == 0


def test_at_most_caps_the_helpers(monkeypatch):
    asked = []
    pool = threads._shared_pool
    monkeypatch.setattr(threads, "_shared_pool", lambda size=0: asked.append(size) or pool(size))
    out = {}
    share_work([range(1)], _recording(out), threads=8, at_most=1)
    assert set(out.values()) == {threading.get_ident()} and asked == []
    share_work([range(3)], _recording(out), threads=8, at_most=3)
    assert asked == [2]  # two helpers, from the pool


def test_a_helper_makes_way_for_a_new_caller_and_its_pieces_still_run():
    """A caller arriving mid-read fills the cores: the helper leaves after its piece; nothing is lost."""
    out, arrived = {}, threading.Event()
    late = threading.Thread(target=lambda: (arrived.wait(timeout=20), share_work([range(1000, 1030)],
                                                                                  _recording(out), threads=2)))
    late.start()

    def prepare(batch):
        if batch == 3:
            arrived.set()
        return [lambda k=k: out.__setitem__(k, threading.get_ident()) for k in range(batch * 10, batch * 10 + 10)]

    share_work(range(20), prepare, threads=2)
    late.join()
    assert sorted(out) == [*range(200), *range(1000, 1030)]
    assert threads._computing.working == 0


@pytest.mark.parametrize("where", ["piece", "prepare"])
def test_the_first_failure_is_raised_in_the_caller_and_stops_the_work(where):
    ran = []

    def prepare(batch):
        if where == "prepare" and batch == 2:
            raise OSError("range 2 failed")

        def piece(k):
            if where == "piece" and k == 20:
                raise ValueError("frame 20 is damaged")
            ran.append(k)
        return [lambda k=k: piece(k) for k in range(batch * 10, batch * 10 + 10)]

    with pytest.raises((OSError, ValueError), match="range 2 failed|frame 20 is damaged"):
        share_work(range(100), prepare, threads=2)
    assert len(ran) < 1000  # stopped early, not after the last batch
    assert threads._computing.working == 0


# --- ordered_map: the writer's frames --------------------------------------------------------------------------


def _occupied_pool():
    """Every thread of the shared pool blocked until the returned event is set."""
    pool = threads._shared_pool()
    size = pool._max_workers
    started, release = threading.Barrier(size + 1), threading.Event()
    blockers = [pool.submit(lambda: (started.wait(timeout=20), release.wait(timeout=20))) for _ in range(size)]
    started.wait(timeout=20)
    return release, blockers


def test_ordered_map_keeps_the_order_and_takes_items_only_as_results_are_taken():
    taken = []

    def items():
        for k in range(40):
            taken.append(k)
            yield k

    for j, result in enumerate(ordered_map(lambda k: k * k, items(), in_flight=3)):
        assert result == j * j
        assert max(taken) <= j + 3  # never more than 3 items handed out beyond those returned
    assert taken == list(range(40))


def test_ordered_map_computes_on_the_caller_what_a_busy_pool_has_not_started():
    release, blockers = _occupied_pool()
    try:
        where = list(ordered_map(lambda k: threading.get_ident(), range(6), in_flight=2))
    finally:
        release.set()
        for blocker in blockers:
            blocker.result(timeout=20)
    assert where == [threading.get_ident()] * 6


def test_ordered_map_raises_a_failure_at_its_result_and_drops_unstarted_work_when_the_caller_stops():
    def function(k):
        if k == 2:
            raise ValueError("frame 2 is damaged")
        return k

    results = ordered_map(function, range(10), in_flight=3)
    assert [next(results), next(results)] == [0, 1]
    with pytest.raises(ValueError, match="frame 2 is damaged"):
        next(results)

    release, blockers = _occupied_pool()
    ran = []
    results = ordered_map(ran.append, range(10), in_flight=4)
    next(results)  # item 0, run here: the pool is busy; items 1-3 wait on the pool
    results.close()
    release.set()
    for blocker in blockers:
        blocker.result(timeout=20)
    threads._shared_pool().submit(int).result(timeout=20)  # anything queued before this has run
    assert ran == [0]


def test_cancel_or_wait_raises_the_failure_of_a_started_task():
    started = threading.Event()

    def failing():
        started.set()
        raise OSError("the disk is full")

    future = threads.in_background(failing)
    started.wait(timeout=20)
    with pytest.raises(OSError, match="the disk is full"):
        cancel_or_wait(future)


def test_in_processes_runs_each_item_in_another_process_in_order():
    import math
    import operator
    import os

    pids = list(in_processes(operator.call, [os.getpid] * 3, processes=2))
    assert len(pids) == 3 and os.getpid() not in pids
    results = in_processes(math.sqrt, [4.0, -1.0, 9.0], processes=2)
    assert next(results) == 2.0
    with pytest.raises(ValueError, match="math domain error"):
        next(results)


# --- the thread-count rule and forked children ------------------------------------------------------------------


def test_computing_threads_are_the_cores_outside_a_worker():
    import os

    assert computing_threads() == len(os.sched_getaffinity(0))


def test_a_forked_child_starts_with_nobody_working_and_a_free_lock():
    """A lock held by one of the parent's threads when it forks would never be released in the child."""
    import os
    import signal
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking a process that has threads
        with threads._computing.lock:  # held, as another thread of the parent might hold it, at the fork
            pid = os.fork()
            if pid == 0:  # the child: a deadlock ends it (SIGALRM) instead of hanging the suite
                signal.alarm(20)
                try:
                    out = {}
                    share_work([range(3)], _recording(out), threads=2)
                    os._exit(0 if sorted(out) == [0, 1, 2] and threads._computing.working == 0 else 1)
                except BaseException:  # noqa: BLE001  (the child must exit, whatever happened)
                    os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_share_with_idle_takes_pieces_only_from_a_preparing_thread_while_another_waits():
    import time

    from xarray_rumi.runtime.threads import share_with_idle

    assert share_with_idle([lambda: None]) is False   # no share_work around this thread
    ran = threading.Event()

    def prepare(batch):
        deadline = time.monotonic() + 20
        # the helper has no batch of its own: it comes to wait for pieces
        while not share_with_idle([ran.set]) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert ran.wait(timeout=20)   # taken by the helper while this thread still prepares
        return []

    share_work([0], prepare, threads=2)
    alone = []
    share_work([0], lambda batch: alone.append(share_with_idle([lambda: None])) or [], threads=1)
    assert alone == [False]
