"""Whether the process-wide machinery of ``runtime/`` earns its place: each piece on and off, side by side.

Run from the repository root::

    python ci/benchmarks/runtime.py               # about a minute on 2 cores
    python ci/benchmarks/runtime.py --repeats 9

* ``runtime/heap.py``: an image read by chunks in a process started as ``distributed`` starts its workers
  (``MALLOC_TRIM_THRESHOLD_=65536``), with the allocator tuning on and off (``XARRAY_RUMI_HEAP_TUNING``),
  each in a fresh process, the two alternating.
* ``runtime/threads.py``: the same read with ``share_work`` free to use every core, and held to the
  calling thread (``computing_threads`` 1), alternating in one process.

Printed: the best seconds of ``--repeats`` for each, and the ratio off / on.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import xarray_rumi
from xarray_rumi.runtime import threads

SHAPE, TILE = (2, 2048, 2048), 512


def write_image(directory: str) -> tuple[str, bytes]:
    y, x = np.mgrid[0:SHAPE[1], 0:SHAPE[2]] / SHAPE[1]
    terrain = 2000 + 800 * np.sin(7 * x) * np.cos(5 * y) + 300 * x * y
    noise = np.random.default_rng(0).integers(0, 32, SHAPE)
    path = os.path.join(directory, "runtime.rumi")
    blob = xarray_rumi.write(path, (terrain + noise).astype("uint16"), tile_size=TILE, compression="portable")
    return path, blob


def read_by_chunks(image) -> None:
    """The image one band and one row of frames at a time: a fresh 2 MiB array each, as Dask's chunks are."""
    for band in range(SHAPE[0]):
        for row in range(0, SHAPE[1], TILE):
            image.read(slice(band, band + 1), slice(row, row + TILE))


def best_read(path: str, repeats: int) -> float:
    """The best seconds of ``repeats`` reads of ``path`` by chunks in this process."""
    image = xarray_rumi.open_image(path)
    read_by_chunks(image)  # the first read builds what later ones reuse
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read_by_chunks(image)
        times.append(time.perf_counter() - start)
    return min(times)


def heap(path: str, repeats: int) -> tuple[float, float]:
    """Best read seconds in a fresh trimming process: tuning on, tuning off."""
    seconds = {"1": [], "0": []}
    for _ in range(repeats):
        for switch in seconds:
            env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536", "XARRAY_RUMI_HEAP_TUNING": switch}
            out = subprocess.run([sys.executable, __file__, "--read", path], env=env, check=True,
                                 capture_output=True, text=True).stdout
            seconds[switch].append(float(out))
    return min(seconds["1"]), min(seconds["0"])


def sharing(path: str, repeats: int) -> tuple[float, float]:
    """Best read seconds with every core, and held to the calling thread."""
    every_core = threads._cores
    seconds = {"shared": [], "alone": []}
    try:
        for _ in range(repeats):
            threads._cores = every_core
            seconds["shared"].append(best_read(path, 1))
            threads._cores = lambda: 1
            seconds["alone"].append(best_read(path, 1))
    finally:
        threads._cores = every_core
    return min(seconds["shared"]), min(seconds["alone"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--read", help=argparse.SUPPRESS)  # the child of the heap measurement
    args = parser.parse_args()
    if args.read:
        print(best_read(args.read, 3))
        return
    with tempfile.TemporaryDirectory() as directory:
        path, _ = write_image(directory)
        on, off = heap(path, args.repeats)
        print(f"heap tuning, trimming process: on {on:.3f} s, off {off:.3f} s: off / on {off / on:.2f}x")
        shared, alone = sharing(path, args.repeats)
        print(f"share_work, {threads._cores()} cores: shared {shared:.3f} s, calling thread only {alone:.3f} s: "
              f"alone / shared {alone / shared:.2f}x")


if __name__ == "__main__":
    main()
