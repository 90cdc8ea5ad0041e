"""runtime/fork.py: the one place a module asks for its per-process state to be reset in a forked child."""

from __future__ import annotations

import os

import pytest

from xarray_rumi.runtime.fork import in_forked_child


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_reset_runs_in_the_child_and_not_in_the_parent():
    calls = []
    in_forked_child(lambda: calls.append(os.getpid()))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports what it saw, and leaves without running the parent's cleanup
        os.write(write, repr(calls == [os.getpid()]).encode())
        os._exit(0)
    os.close(write)
    seen = os.read(read, 16)
    os.waitpid(pid, 0)
    assert seen == b"True" and calls == []
