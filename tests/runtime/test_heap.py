"""In a process that trims its heap eagerly (a Dask worker), frame-sized buffers stay in the heap."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xarray_rumi.runtime import heap
from xarray_rumi.runtime.heap import _glibc

pytestmark = pytest.mark.skipif(_glibc() is None, reason="glibc's allocator only")

CHILD = """
import importlib.util, resource, sys
import numpy as np
spec = importlib.util.spec_from_file_location("heap", sys.argv[2])  # the module alone: a quick start
heap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(heap)
if sys.argv[1] == "set-late":  # what distributed does in the process that starts workers
    import os
    os.environ["MALLOC_TRIM_THRESHOLD_"] = "65536"
applied = heap.keep_heap_top() if sys.argv[1] != "unchanged" else False
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):  # what the codec does each frame: take a frame-sized buffer, use it, free it
    buffer = np.ones(1 << 20, np.uint8)
    del buffer
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, **environment) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(environment)
    out = subprocess.run([sys.executable, "-c", CHILD, mode, heap.__file__], env=env, capture_output=True, text=True, check=True)
    applied, faults = out.stdout.split()
    return applied, int(faults)


def test_buffers_are_not_faulted_in_again_each_time_in_a_worker_like_process():
    worker = {"MALLOC_TRIM_THRESHOLD_": "65536"}  # what distributed's nanny sets
    applied, adjusted = _faults("adjusted", **worker)
    _, left_alone = _faults("unchanged", **worker)
    assert applied == "True"
    # 200 x 1 MiB: 256 pages faulted in each time unless the buffer stays in the heap
    assert left_alone > 200 * 200 and adjusted < left_alone / 10


def test_nothing_changes_where_the_heap_is_not_trimmed_eagerly_or_the_user_chose():
    assert _faults("adjusted")[0] == "False"
    chosen = {"MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TOP_PAD_": "0"}
    applied, faults = _faults("adjusted", **chosen)
    assert applied == "False" and faults > 200 * 200  # their choice, kept


def test_a_variable_set_after_the_process_started_changes_nothing():
    """glibc read the environment at start: a process that sets the variable later (to start workers) is left alone."""
    assert _faults("set-late")[0] == "False"
