"""A Dask array written threaded and on a 2-worker ``LocalCluster`` (processes): time, computations, memory.

Two arrays, each written both ways, repetitions interleaved (median kept):

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


def _worker_peak(dask_worker=None, reset=False):
    sys.path.insert(0, HERE)
    from _peak_rss import high_water_mark, reset_high_water_mark

    if reset:
        reset_high_water_mark()
    return high_water_mark()


def arrays(side: int, log: str) -> dict:
    import dask.array as da

    data = _pattern(np.empty((1, side, side), "uint16"),
                    {None: {"array-location": [(0, 1), (0, side), (0, side)], "chunk-location": "numpy",
                            "chunk-shape": (1, side, side)}}, log="/dev/null")
    made = da.zeros((1, side, side), "uint16", chunks=(1, side // BLOCKS, side)).map_blocks(
        _pattern, log=log, dtype="uint16")
    return {"from_array": da.from_array(data), "map_blocks": made}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--package")
    args = parser.parse_args()
    if args.package:
        sys.path.insert(0, args.package)
        os.environ["PYTHONPATH"] = args.package + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path.insert(0, HERE)
    import dask
    import distributed
    import xarray_rumi
    from _peak_rss import high_water_mark, reset_high_water_mark

    side = int((args.mib * 2**20 // 2) ** 0.5) // TILE * TILE
    folder = tempfile.mkdtemp(prefix="cluster-write-")
    log = os.path.join(folder, "calls.log")
    rows = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        for name, array in arrays(side, log).items():
            times = {"threaded": [], "cluster": []}
            peaks = {"threaded": [0, 0], "cluster": [0, 0]}
            calls = {}
            for _ in range(args.repeat):
                for how in ("threaded", "cluster"):
                    target = os.path.join(folder, f"{name}-{how}.rumi")
                    open(log, "w").close()
                    client.run(_worker_peak, reset=True)
                    reset_high_water_mark()
                    start = time.perf_counter()
                    if how == "threaded":  # the client is not the default: the write does not find it
                        with dask.config.set(scheduler="threads", num_workers=2):
                            xarray_rumi.write(target, array, tile_size=TILE)
                    else:
                        with dask.config.set(scheduler=client):
                            xarray_rumi.write(target, array, tile_size=TILE)
                    times[how].append(time.perf_counter() - start)
                    peaks[how][0] = max(peaks[how][0], high_water_mark())
                    peaks[how][1] = max(peaks[how][1], max(client.run(_worker_peak).values()) if how == "cluster"
                                        else 0)
                    with open(log) as f:
                        lines = f.read().splitlines()
                    calls[how] = len(lines) / BLOCKS if lines else None
            same = open(os.path.join(folder, f"{name}-threaded.rumi"), "rb").read() == \
                open(os.path.join(folder, f"{name}-cluster.rumi"), "rb").read()
            threaded, clustered = statistics.median(times["threaded"]), statistics.median(times["cluster"])
            rows.append((name, threaded, clustered, clustered / threaded, calls["threaded"], calls["cluster"],
                         peaks["threaded"][0], peaks["cluster"][0], peaks["cluster"][1], same))
    print(f"xarray_rumi from {xarray_rumi.__file__}; {args.mib} MiB uint16 ({side} x {side}), {TILE} px tiles, "
          f"median of {args.repeat}")
    print("| array | threaded s | cluster s | ratio (<= 1.5) | computations/block threaded | cluster (= 1) "
          "| peak RSS threaded MiB | writer on cluster MiB | busiest worker MiB | same bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, threaded, clustered, ratio, calls_t, calls_c, peak_t, peak_c, worker, same in rows:
        count = lambda c: "-" if c is None else f"{c:.2f}"  # noqa: E731
        print(f"| {name} | {threaded:.2f} | {clustered:.2f} | {ratio:.2f} | {count(calls_t)} | {count(calls_c)} "
              f"| {peak_t / 2**20:.0f} | {peak_c / 2**20:.0f} | {worker / 2**20:.0f} | {same} |")


if __name__ == "__main__":
    main()
