"""In a process that trims its heap eagerly (a Dask worker), frame-sized buffers stay in the heap; the tuning is
logged once, and XARRAY_RUMI_HEAP_TUNING=0 turns it off."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xarray_rumi.runtime import heap
from xarray_rumi.runtime.heap import _glibc

pytestmark = pytest.mark.skipif(_glibc() is None, reason="glibc's allocator only")

CHILD = """
import importlib.util, logging, resource, sys
import numpy as np
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
# the module alone, under its own name: a quick start, and its own logger
spec = importlib.util.spec_from_file_location("xarray_rumi.runtime.heap", sys.argv[2])
heap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(heap)
if sys.argv[1] == "set-late":  # what distributed does in the process that starts workers
    import os
    os.environ["MALLOC_TRIM_THRESHOLD_"] = "65536"
applied = heap.keep_heap_top() if sys.argv[1] != "unchanged" else False
assert sys.argv[1] == "unchanged" or heap.keep_heap_top() is applied  # decided once
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):  # what the codec does each frame: take a frame-sized buffer, use it, free it
    buffer = np.ones(1 << 20, np.uint8)
    del buffer
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(mode: str, **environment) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != heap.SWITCH}
    env.update(environment)
    return subprocess.run([sys.executable, "-c", CHILD, mode, heap.__file__], env=env, capture_output=True, text=True)


def _faults(mode: str, **environment) -> tuple[str, int]:
    out = _run(mode, **environment)
    assert out.returncode == 0, out.stderr
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


WORKER = {"MALLOC_TRIM_THRESHOLD_": "65536"}  # what distributed's nanny sets


def test_the_tuning_says_what_it_set_and_why_once_at_info():
    out = _run("adjusted", **WORKER)
    lines = [line for line in out.stderr.splitlines() if line.startswith("xarray_rumi.runtime.heap")]
    assert len(lines) == 1, out.stderr
    assert "INFO" in lines[0] and "mmap threshold to 32 MiB and top pad to 16 MiB" in lines[0]
    assert "MALLOC_TRIM_THRESHOLD_" in lines[0] and "XARRAY_RUMI_HEAP_TUNING=0" in lines[0]
    only_one = _run("adjusted", MALLOC_TOP_PAD_="0", **WORKER)  # the caller chose the pad: only the threshold
    assert "mmap threshold to 32 MiB for this process" in only_one.stderr and "top pad" not in only_one.stderr


def test_heap_tuning_0_turns_it_off():
    applied, faults = _faults("adjusted", XARRAY_RUMI_HEAP_TUNING="0", **WORKER)
    assert applied == "False" and faults > 200 * 200  # every buffer faulted in again, as without the package
    assert "xarray_rumi.runtime.heap" not in _run("adjusted", XARRAY_RUMI_HEAP_TUNING="0", **WORKER).stderr
    assert _faults("adjusted", XARRAY_RUMI_HEAP_TUNING="1", **WORKER)[0] == "True"


def test_a_heap_tuning_value_other_than_0_or_1_is_refused_by_name():
    out = _run("adjusted", XARRAY_RUMI_HEAP_TUNING="off", **WORKER)
    assert out.returncode != 0
    assert "XARRAY_RUMI_HEAP_TUNING must be 0 (allocator tuning off) or 1 (on), not 'off'" in out.stderr


def _documented_recipe() -> dict:
    """The ``distributed.nanny.pre-spawn-environ`` block of docs/backend.md."""
    import pathlib
    import re

    import yaml

    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "backend.md").read_text()
    blocks = [yaml.safe_load(block) for block in re.findall(r"^```yaml\n(.*?)^```", page, re.S | re.M)]
    recipe = [block for block in blocks if "pre-spawn-environ" in str(block)]
    assert len(recipe) == 1, "docs/backend.md shows one pre-spawn-environ block"
    return recipe[0]


def test_the_documented_distributed_setting_tunes_workers_without_the_package():
    """docs/backend.md's recipe: the worker starts with both settings, so the package has nothing left to set."""
    import dask
    distributed = pytest.importorskip("distributed")

    # as the page says: dotted keys, so the rest of distributed's configuration stays
    dotted = {f"distributed.nanny.pre-spawn-environ.{name}": value
              for name, value in _documented_recipe()["distributed"]["nanny"]["pre-spawn-environ"].items()}
    with dask.config.set(dotted), \
            distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                     dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        environment = next(iter(client.run(dict, os.environ).values()))
        assert environment["MALLOC_MMAP_THRESHOLD_"] == str(heap.MMAP_THRESHOLD)
        assert environment["MALLOC_TOP_PAD_"] == str(heap.TOP_PAD)
        assert environment["MALLOC_TRIM_THRESHOLD_"] == "65536"  # distributed's own setting is kept
        assert client.submit(heap.keep_heap_top, pure=False).result() is False
