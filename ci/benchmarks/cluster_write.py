"""A Dask array written threaded and on a 2-worker ``LocalCluster`` (processes): time, computations, memory.

Two arrays, each written both ways, repetitions interleaved after one to warm
up (median kept):

- ``from_array``: a numpy array of ``--mib`` MiB wrapped by ``da.from_array``
  (Dask's automatic chunks), the data in the graph;
- ``map_blocks``: the same size made by a ``map_blocks`` function in 8 blocks
  of whole rows, each larger than a frame, that appends a line to a file each
  time it runs, so its computations are counted across processes.

For each: seconds, the cluster / threaded ratio (target at most 1.5), the
computations per block (target 1), the peak RSS of the writing process
(``VmHWM`` reset before each write) and of the busiest worker, and whether
the cluster's file is byte for byte the threaded one.

    python ci/benchmarks/cluster_write.py [--mib 128] [--repeat 3] [--package DIR]

``--package DIR`` imports ``xarray_rumi`` from ``DIR`` (a worktree of other
code), in this process and in the workers.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCKS = 8
TILE = 512


def _pattern(block, block_info=None, log=None):
    (_, _), (y0, _), (x0, _) = block_info[None]["array-location"]
    with open(log, "a") as f:
        f.write(f"{block_info[None]['chunk-location']}\n")
    bands, rows, cols = block_info[None]["chunk-shape"]
    y, x = np.mgrid[y0:y0 + rows, x0:x0 + cols]
    noise = np.random.default_rng(y0).integers(0, 16, (rows, cols))
    return np.broadcast_to(((x // 4 + y // 4) % 4096 + noise).astype("uint16"), (bands, rows, cols)).copy()


def _usage(dask_worker=None, reset=False) -> tuple[int, float]:
    """This process's peak RSS (``VmHWM``, reset first if asked) and CPU seconds so far."""
    sys.path.insert(0, HERE)
    from _peak_rss import high_water_mark, reset_high_water_mark

    if reset:
        reset_high_water_mark()
    times = os.times()
    return high_water_mark(), times.user + times.system


def arrays(side: int, log: str) -> dict:
    import dask.array as da

    data = _pattern(np.empty((1, side, side), "uint16"),
                    {None: {"array-location": [(0, 1), (0, side), (0, side)], "chunk-location": "numpy",
                            "chunk-shape": (1, side, side)}}, log="/dev/null")
    made = da.zeros((1, side, side), "uint16", chunks=(1, side // BLOCKS, side)).map_blocks(
        _pattern, log=log, dtype="uint16")
    return {"from_array": da.from_array(data), "map_blocks": made}


def measure(write, client, log: str, on_cluster: bool) -> dict:
    """One write: seconds, CPU seconds and peak RSS of the writer and of the busiest worker, computations."""
    open(log, "w").close()
    workers = client.run(_usage, reset=True)
    _, cpu = _usage(reset=True)
    start = time.perf_counter()
    write()
    seconds = time.perf_counter() - start
    peak, cpu_after = _usage()
    after = client.run(_usage)
    worker_cpu = sum(after[w][1] - workers[w][1] for w in after) if on_cluster else 0.0
    with open(log) as f:
        lines = f.read().splitlines()
    return {"seconds": seconds, "cpu": cpu_after - cpu + worker_cpu, "peak": peak,
            "worker_peak": max(p for p, _ in after.values()) if on_cluster else 0,
            "calls": len(lines) / BLOCKS if lines else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--package")
    args = parser.parse_args()
    if args.package:
        sys.path.insert(0, args.package)
        os.environ["PYTHONPATH"] = args.package + os.pathsep + os.environ.get("PYTHONPATH", "")
    import dask
    import distributed
    import xarray_rumi

    side = int((args.mib * 2**20 // 2) ** 0.5) // TILE * TILE
    folder = tempfile.mkdtemp(prefix="cluster-write-")
    log = os.path.join(folder, "calls.log")
    print(f"xarray_rumi from {xarray_rumi.__file__}; {args.mib} MiB uint16 ({side} x {side}), {TILE} px tiles, "
          f"median of {args.repeat}, CPU s of every process")
    print("| array | threaded s | cluster s | ratio (<= 1.5) | CPU s threaded | CPU s cluster "
          "| computations/block threaded | cluster (= 1) | peak RSS threaded MiB | writer on cluster MiB "
          "| busiest worker MiB | same bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    # the client is not the default: a write finds it only where dask.config names it
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        for name, array in arrays(side, log).items():
            runs = {"threaded": [], "cluster": []}
            for repetition in range(args.repeat + 1):  # the first warms up: imports and codecs on the workers
                for how, scheduler in (("threaded", "threads"), ("cluster", client)):
                    def write(how=how, scheduler=scheduler):
                        with dask.config.set(scheduler=scheduler, num_workers=2):
                            xarray_rumi.write(os.path.join(folder, f"{name}-{how}.rumi"), array, tile_size=TILE)
                    run = measure(write, client, log, how == "cluster")
                    if repetition:
                        runs[how].append(run)
            with open(os.path.join(folder, f"{name}-threaded.rumi"), "rb") as f, \
                    open(os.path.join(folder, f"{name}-cluster.rumi"), "rb") as g:
                same = f.read() == g.read()
            t, c = ({key: statistics.median(run[key] for run in runs[how]) for key in ("seconds", "cpu")}
                    for how in ("threaded", "cluster"))
            count = lambda calls: "-" if calls is None else f"{calls:.2f}"  # noqa: E731
            mib = lambda how, key: max(run[key] for run in runs[how]) / 2**20  # noqa: E731
            print(f"| {name} | {t['seconds']:.2f} | {c['seconds']:.2f} | {c['seconds'] / t['seconds']:.2f} "
                  f"| {t['cpu']:.2f} | {c['cpu']:.2f} | {count(runs['threaded'][-1]['calls'])} "
                  f"| {count(runs['cluster'][-1]['calls'])} | {mib('threaded', 'peak'):.0f} "
                  f"| {mib('cluster', 'peak'):.0f} | {mib('cluster', 'worker_peak'):.0f} | {same} |", flush=True)


if __name__ == "__main__":
    main()
